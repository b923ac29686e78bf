"""ember.compile must follow Python state that changes between calls, as torch.compile's guards do.

Each case runs the same code in torch eager (torch.compile must equal eager; dynamo guards these values and
replays Python side effects) and through ember.compile, calling both after every change; the first call of a
signature is ember's eager warm-up, so each case calls enough times that the later calls run a traced graph.
"""
from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import torch

import ember

CALLS = 3  # per state: warm-up, trace, cached graph


def _same(lib_out, ref_out) -> None:
    a = lib_out.detach().numpy() if hasattr(lib_out, "detach") else np.asarray(lib_out)
    b = ref_out.detach().numpy() if hasattr(ref_out, "detach") else np.asarray(ref_out)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def _run(make, changes) -> None:
    """``make(lib, state)`` returns the function of one library; ``changes`` are dicts applied to ``state``
    (a namespace both libraries' functions read) between groups of calls."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    states = {lib: types.SimpleNamespace() for lib in (ember, torch)}
    f_ember = make(ember, states[ember])
    f_torch = make(torch, states[torch])
    compiled = ember.compile(f_ember)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for change in changes:
            for lib in states:
                change(lib, states[lib])
            for _ in range(CALLS):
                _same(compiled(ember.tensor(x)), f_torch(torch.tensor(x)))


# ---- values the trace bakes in ---------------------------------------------------------------------
SCALE = 1.0


def _helper(x):
    return x * SCALE  # a global read by a function the compiled one calls


def test_global_read_by_a_called_helper_retraces():
    global SCALE

    def make(lib, state):
        return lambda x: _helper(x) + 1

    def set_scale(value):
        def change(lib, state):
            global SCALE
            SCALE = value
        return change

    try:
        _run(make, [set_scale(1.0), set_scale(3.0), set_scale(-0.0), set_scale(1.0)])
    finally:
        SCALE = 1.0


CFG = types.SimpleNamespace(scale=1.0, shift=0, table=[1.0, 2.0], opts={"p": 0.5})


@pytest.mark.parametrize("what", ["attribute", "int attribute", "list item", "dict item"])
def test_object_attributes_and_container_items_retrace(what):
    def make(lib, state):
        def f(x):
            return (x * CFG.scale + CFG.shift) * CFG.table[1] + CFG.opts["p"]
        return f

    def change_to(k):
        def change(lib, state):
            if lib is torch:  # both libraries' functions read the one CFG: change it once per step
                return
            if what == "attribute":
                CFG.scale = [1.0, 2.5, 1.0][k]
            elif what == "int attribute":
                CFG.shift = [0, 3, 0][k]
            elif what == "list item":
                CFG.table[1] = [2.0, 7.0, 2.0][k]
            else:
                CFG.opts["p"] = [0.5, -1.0, 0.5][k]
        return change

    _run(make, [change_to(0), change_to(1), change_to(2)])


def test_closure_variable_and_module_attributes():
    def make(lib, state):
        state.k = 1.0
        lib.manual_seed(0)
        state.m = lib.nn.Linear(3, 2)
        state.m.scale, state.m.flag = 1.0, True

        def f(x):
            y = state.m(x) * state.m.scale * state.k
            return y + 1 if state.m.flag else y - 1
        return f

    def set_(name, value):
        def change(lib, state):
            target = state if name == "k" else state.m
            setattr(target, name, value)
        return change

    _run(make, [set_("k", 1.0), set_("k", 2.0), set_("scale", 0.5), set_("flag", False), set_("flag", True)])


def test_swapped_submodule_then_its_own_attribute_changes():
    def make(lib, state):
        state.m = lib.nn.Sequential(lib.nn.Identity(), lib.nn.LeakyReLU(0.1))
        return state.m

    def swap(lib, state):
        state.m[1] = lib.nn.LeakyReLU(0.2)

    def slope(lib, state):
        state.m[1].negative_slope = 0.7  # an attribute of the module swapped in after the first trace

    _run(make, [lambda lib, s: None, swap, slope])


def test_parameter_replaced_changed_in_place_and_frozen():
    def make(lib, state):
        lib.manual_seed(0)
        state.m = lib.nn.Linear(3, 2)
        return lambda x: state.m(x).sum(0)

    def replace(lib, state):
        state.m.weight = lib.nn.Parameter(lib.ones(2, 3))

    def in_place(lib, state):
        with lib.no_grad():
            state.m.weight.mul_(3)

    def freeze(lib, state):
        state.m.weight.requires_grad_(False)

    _run(make, [lambda lib, s: None, replace, in_place, freeze])


def test_eval_changes_dropout_and_batch_norm():
    def make(lib, state):
        state.m = lib.nn.Sequential(lib.nn.BatchNorm1d(3), lib.nn.Dropout(0.0))
        return state.m

    _run(make, [lambda lib, s: s.m.train(), lambda lib, s: s.m.eval(), lambda lib, s: s.m.train()])


# ---- Python side effects: torch.compile replays them; ember runs such a function eagerly ------------------
def test_list_append_and_counters_happen_every_call():
    for lib in (torch, ember):
        losses, acc = [], types.SimpleNamespace(n=0)

        def f(x):
            acc.n += 1
            y = (x * acc.n).sum()
            losses.append(y)
            return y

        run = ember.compile(f) if lib is ember else f
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            outs = [float(run(lib.ones(2))) for _ in range(5)]
        assert outs == [2.0, 4.0, 6.0, 8.0, 10.0]
        assert acc.n == 5 and [float(v) for v in losses] == outs  # real values, never a traced placeholder


def test_module_counter_attribute_counts_every_call():
    class Counting(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            return x * self.calls

    m = Counting()
    run = ember.compile(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outs = [run(ember.ones(1)).item() for _ in range(5)]
    assert outs == [1.0, 2.0, 3.0, 4.0, 5.0] and m.calls == 5


# ---- arguments ---------------------------------------------------------------------------------------
def test_argument_layout_dtype_shape_and_containers():
    def f(xs, n):
        return sum(t.reshape(-1) for t in xs) * n + xs[0].sum()

    run = ember.compile(f)
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    cases = [([base], 2), ([base], 2), ([base.T], 2), ([base.T], 2), ([base[:, ::2]], 2), ([base[:, ::2]], 2),
             ([base.astype(np.float64)], 2), ([base, base + 1], 2), ([base, base + 1], 2), ([base], 3.5),
             ([base], 3.5), ([base[:2]], True), ([base[:2]], True)]
    for arrays, n in cases:
        torch_out = f([torch.tensor(np.ascontiguousarray(a)) for a in arrays], n)
        # the layout case: an ember view with the same strides as the NumPy one
        args = [ember.tensor(np.ascontiguousarray(a.T)).t() if a.flags.f_contiguous and not a.flags.c_contiguous
                else ember.tensor(a) for a in arrays]
        _same(run(args, n), torch_out)


def test_dict_argument_keys_and_tensor_changed_in_place():
    w = ember.ones(3)
    run = ember.compile(lambda d: sum(v * w for v in d.values()))
    x = ember.arange(3.0)
    for d in ({"a": x}, {"a": x}, {"a": x, "b": x}, {"a": x, "b": x}, {"b": 2 * x}, {"b": 2 * x}):
        _same(run(d), sum(v * w for v in d.values()))
    w.mul_(3)  # a global tensor changed in place: graphs read state at each run
    _same(run({"a": x}), x * w)
    x.add_(1)  # an argument changed in place between calls
    _same(run({"a": x}), x * w)


def test_data_dependent_branch_is_never_baked():
    def f(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    run = ember.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for sign in (1, 1, 1, -1, -1, 1):
            x = ember.ones(3) * sign
            _same(run(x), f(x))


def test_grad_mode_contexts():
    w = ember.ones(3, requires_grad=True)
    run = ember.compile(lambda x: (x * w).sum())
    x = ember.arange(3.0)
    for mode in ("grad", "grad", "grad", "no_grad", "no_grad", "enable_in_no_grad", "enable_in_no_grad"):
        if mode == "grad":
            out = run(x)
        elif mode == "no_grad":
            with ember.no_grad():
                out = run(x)
        else:
            with ember.no_grad(), ember.enable_grad():
                out = run(x)
        assert out.requires_grad is (mode != "no_grad") and out.item() == 3.0


# ---- torch.compile's switches ------------------------------------------------------------------------
def test_fullgraph_raises_unsupported_on_a_graph_break():
    run = ember.compile(lambda x: x + 1 if x.sum() > 0 else x - 1, fullgraph=True)
    with pytest.raises(ember._dynamo.exc.Unsupported, match="graph break"):
        run(ember.ones(2))  # at the first call, as torch (no warm-up: no optimizer to create state for)
    assert issubclass(ember._dynamo.exc.Unsupported, RuntimeError)
    fine = ember.compile(lambda x: x * 2, fullgraph=True)
    assert [fine(ember.ones(1)).item() for _ in range(2)] == [2.0, 2.0] and fine.last is not None
    warmed = ember.compile(lambda x: x + 1 if x.sum() > 0 else x - 1, fullgraph=True, warmup=1)
    assert warmed(ember.ones(2)).tolist() == [2.0, 2.0]  # an explicit warm-up call runs eagerly
    with pytest.raises(ember._dynamo.exc.Unsupported):
        warmed(ember.ones(2))


BAD_OPTIONS = [({"mode": "fastest"}, "RuntimeError", "Unrecognized mode=fastest, should be one of: default, lite, "
                                                      "reduce-overhead, max-autotune-no-cudagraphs, max-autotune"),
               ({"mode": "default", "options": {"x": 1}}, "RuntimeError", "Either mode or options"),
               ({"backend": "nonexistent"}, "InvalidBackend", "Invalid backend: 'nonexistent', see "
                                                              "`torch._dynamo.list_backends\\(\\)`")]


@pytest.mark.parametrize("kwargs, error, match", BAD_OPTIONS)
def test_bad_options_raise_as_torch(kwargs, error, match):
    with pytest.raises(getattr(ember._dynamo.exc, error, RuntimeError), match=match):
        ember.compile(lambda x: x, **kwargs)


@pytest.mark.slow  # (torch.compile's first call imports dynamo and inductor: ~10 s)
@pytest.mark.parametrize("kwargs, error, match", BAD_OPTIONS)
def test_bad_options_messages_are_torchs(kwargs, error, match):
    import torch._dynamo.exc

    with pytest.raises(getattr(torch._dynamo.exc, error, RuntimeError), match=match):
        torch.compile(lambda x: x, **kwargs)


@pytest.mark.parametrize("kwargs", [{"mode": m} for m in ("default", "reduce-overhead", "max-autotune",
                                                           "max-autotune-no-cudagraphs")]
                         + [{"backend": b} for b in ("inductor", "eager", "aot_eager")] + [{"dynamic": True},
                                                                                          {"dynamic": None}])
def test_torch_options_accepted(kwargs):
    run = ember.compile(lambda x: x * 2, **kwargs)
    assert [run(ember.ones(1)).item() for _ in range(3)] == [2.0, 2.0, 2.0]


def test_stances_reset_and_recompile_limit():
    seen_shapes = []
    run = ember.compile(lambda x: x * 2)
    for n in (1, 1, 1):
        run(ember.ones(n))
    assert len(run._cache) == 1
    with ember.compiler.set_stance("force_eager"):
        assert run(ember.ones(1)).tolist() == [2.0] and run.last is not None
    with ember.compiler.set_stance("fail_on_recompile"):
        run(ember.ones(1))  # cached: fine
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            run(ember.ones(5))
    with ember.compiler.set_stance("eager_on_recompile"):
        assert run(ember.ones(4)).tolist() == [2.0] * 4 and len(run._cache) == 1
    assert ember.compiler.compile_options.STANCE[0] == "default"
    ember._dynamo.reset()
    assert len(run._cache) == 0 and run.last is None
    old = ember._dynamo.config.recompile_limit
    ember._dynamo.config.recompile_limit = 2
    try:
        with pytest.warns(RuntimeWarning, match="recompile_limit"):
            for n in (1, 1, 2, 2, 3, 3):
                seen_shapes.append(run(ember.ones(n)).shape[0])
        assert len(run._cache) == 2 and seen_shapes == [1, 1, 2, 2, 3, 3]
        strict = ember.compile(lambda x: x * 2, fullgraph=True)
        with pytest.raises(ember._dynamo.exc.FailOnRecompileLimitHit):
            for n in (1, 1, 2, 2, 3, 3):
                strict(ember.ones(n))
    finally:
        ember._dynamo.config.recompile_limit = old
        ember._dynamo.config._assigned.discard("recompile_limit")  # (back to ember's own limit)


def test_hooks_and_parametrizations_added_after_the_trace():
    def make(lib, state):
        lib.manual_seed(0)
        state.m = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.Tanh())
        state.handles = []
        return state.m

    def forward_hook(lib, state):
        state.handles.append(state.m.register_forward_hook(lambda mod, i, o: o * 10))

    def pre_hook_on_child(lib, state):
        state.handles.append(state.m[0].register_forward_pre_hook(lambda mod, i: (i[0] * 0.5,)))

    def remove_all(lib, state):
        for h in state.handles:
            h.remove()

    class Double(torch.nn.Module):
        def forward(self, w):
            return w * 2

    class DoubleE(ember.nn.Module):
        def forward(self, w):
            return w * 2

    def parametrize(lib, state):
        lib.nn.utils.parametrize.register_parametrization(state.m[0], "weight", Double() if lib is torch else DoubleE())

    _run(make, [lambda lib, s: None, forward_hook, pre_hook_on_child, remove_all, parametrize])


def test_compiled_optimizer_step_follows_param_groups_lr_like_torch():
    results = {}
    for lib in (torch, ember):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 2)
        opt = lib.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = lib.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))

        def step():
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss

        run = ember.compile(step) if lib is ember else step
        for i in range(8):
            run()
            sched.step()
            if i == 5:
                opt.param_groups[0]["lr"] = 0.3
        results[lib.__name__] = model.weight.detach().numpy()
    np.testing.assert_allclose(results["ember"], results["torch"], rtol=1e-5, atol=1e-6)


def test_manual_seed_inside_the_function_repeats_every_call_like_eager():
    def f(x):
        ember.manual_seed(0)
        return ember.nn.functional.dropout(x, 0.5) + ember.rand(4)

    run = ember.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        outs = [run(ember.ones(4)).tolist() for _ in range(4)]
    assert outs == [f(ember.ones(4)).tolist()] * 4  # torch draws the same after its own reseed: eager's numbers


def test_seeded_compiled_dropout_is_reproducible_after_warm_up():
    run = ember.compile(lambda x: ember.nn.functional.dropout(x, 0.5))
    run(ember.ones(16))  # the signature's eager warm-up
    draws = []
    for _ in range(2):
        ember.manual_seed(3)
        draws.append([run(ember.ones(16)).tolist() for _ in range(3)])
    assert draws[0] == draws[1] and draws[0][0] != draws[0][1]
    assert all(set(d) <= {0.0, 2.0} for d in draws[0])


def test_non_contiguous_arguments_of_one_shape_with_other_strides():
    def g(lib, x):
        y = x.reshape(2, 8)  # a view of a row slice, a copy of a transpose or a column slice
        y.add_(1)
        return x * 1

    run = ember.compile(lambda x: g(ember, x))
    makers = [lambda lib: lib.arange(16.0).reshape(4, 4).t(), lambda lib: lib.arange(32.0).reshape(4, 8)[:, ::2],
              lambda lib: lib.arange(32.0).reshape(8, 4)[::2]]
    for make in makers:
        for _ in range(CALLS):
            x, xt = make(ember), make(torch)
            _same(run(x), g(torch, xt))
            _same(x, xt)


def test_state_tensor_given_another_shape_through_data():
    def make(lib, state):
        state.t = lib.ones(3)
        lib.manual_seed(0)
        state.m = lib.nn.Linear(3, 3)
        return lambda x: state.m(x) * state.t

    def reshape_global(lib, state):
        state.t.data = lib.full((1,), 2.0)

    def grow_weight(lib, state):
        with lib.no_grad():
            state.m.weight.data = lib.ones(4, 3)
            state.m.bias.data = lib.zeros(4)
        state.t.data = lib.full((4,), 3.0)

    def retype(lib, state):
        state.t.data = lib.full((4,), 0.5, dtype=lib.float64)

    _run(make, [lambda lib, s: None, reshape_global, grow_weight, retype])
