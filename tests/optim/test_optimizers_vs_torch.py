"""ember.optim against torch.optim: same start, same gradients each step, same trajectory.

Every optimizer runs 12 steps over each option combination that changes the math, in float64
(rtol 1e-10) and float32 (loose), once through the eager array fast path and once through the
reference ember-op path (what a graph tracer records).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember import interpreters
from ember.optim import SGD, Adagrad, Adam, AdamW, Optimizer, RMSprop
from ember.optim.compiled_update import CompiledUpdates

torch = pytest.importorskip("torch")

SHAPES = [(5, 4), (4,), (3, 1, 2)]
STEPS = 12
TOLERANCE = {np.float64: dict(rtol=1e-10, atol=1e-12), np.float32: dict(rtol=2e-5, atol=2e-6)}


@pytest.fixture(params=["fast", "ops"])
def path(request, monkeypatch):
    """Run each test once with the array fast path and once with the ember-op path."""
    monkeypatch.setattr(Optimizer, "fast_path", request.param == "fast")
    return request.param


def _pairs(dtype, seed=0):
    rng = np.random.default_rng(seed)
    inits = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    mine = [ember.tensor(a.copy(), requires_grad=True) for a in inits]
    theirs = [torch.tensor(a.copy(), requires_grad=True) for a in inits]
    return mine, theirs


def _feed(mine, theirs, rng, dtype, skip=None):
    for i, (p, q) in enumerate(zip(mine, theirs)):
        if i == skip:
            p.grad, q.grad = None, None
            continue
        g = rng.standard_normal(p.shape).astype(dtype)
        p.grad = ember.tensor(g.copy())
        q.grad = torch.tensor(g.copy())


def _assert_params(mine, theirs, dtype, where=""):
    for i, (p, q) in enumerate(zip(mine, theirs)):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), **TOLERANCE[dtype],
                                   err_msg=f"param {i} {where}")


def _assert_state(opt, topt, dtype):
    for p, q in zip(itertools.chain.from_iterable(g["params"] for g in opt.param_groups),
                    itertools.chain.from_iterable(g["params"] for g in topt.param_groups)):
        mine, theirs = opt.state[p], topt.state[q]
        assert set(mine) == set(theirs)
        for key, value in theirs.items():
            if key == "step":
                assert float(mine[key]) == float(value)
            else:
                np.testing.assert_allclose(mine[key].numpy(), value.numpy(), **TOLERANCE[dtype], err_msg=key)


def _compare(ember_cls, torch_cls, kwargs, dtype, steps=STEPS, groups=None, skip=None):
    mine, theirs = _pairs(dtype)
    if groups:
        opt = ember_cls([dict(params=mine[:1], **groups), dict(params=mine[1:])], **kwargs)
        topt = torch_cls([dict(params=theirs[:1], **groups), dict(params=theirs[1:])], **kwargs)
    else:
        opt, topt = ember_cls(mine, **kwargs), torch_cls(theirs, **kwargs)
    rng = np.random.default_rng(1)
    for step in range(steps):
        _feed(mine, theirs, rng, dtype, skip=skip if step % 3 == 1 else None)
        opt.step()
        topt.step()
        _assert_params(mine, theirs, dtype, f"after step {step + 1} with {kwargs}")
    _assert_state(opt, topt, dtype)
    if Optimizer.fast_path:  # the compiled update really ran (it is not silently replaced by the op path)
        assert any(e.fn is not None and e.fn.last is not None for e in opt._compiled.cache.values())
    return opt, topt


def _grid(**axes):
    keys = list(axes)
    return [dict(zip(keys, values)) for values in itertools.product(*axes.values())]


SGD_CASES = [c for c in _grid(lr=[0.1], momentum=[0.0, 0.9], dampening=[0.0, 0.25], nesterov=[False, True],
                              weight_decay=[0.0, 0.05], maximize=[False, True])
             if not (c["nesterov"] and (c["momentum"] == 0 or c["dampening"] != 0))]
ADAM_CASES = _grid(lr=[0.01], betas=[(0.9, 0.999), (0.3, 0.8)], weight_decay=[0.0, 0.1], amsgrad=[False, True],
                   maximize=[False, True])
RMSPROP_CASES = _grid(lr=[0.01], alpha=[0.99, 0.3], momentum=[0.0, 0.9], centered=[False, True],
                      weight_decay=[0.0, 0.1], maximize=[False, True])
ADAGRAD_CASES = _grid(lr=[0.1], lr_decay=[0.0, 0.01], weight_decay=[0.0, 0.1], initial_accumulator_value=[0.0, 0.1],
                      maximize=[False, True])
ALL = ([(SGD, torch.optim.SGD, c) for c in SGD_CASES] + [(Adam, torch.optim.Adam, c) for c in ADAM_CASES]
       + [(AdamW, torch.optim.AdamW, c) for c in ADAM_CASES]
       + [(RMSprop, torch.optim.RMSprop, c) for c in RMSPROP_CASES]
       + [(Adagrad, torch.optim.Adagrad, c) for c in ADAGRAD_CASES])


def _id(case):
    cls, _, kwargs = case
    return cls.__name__ + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items() if k != "lr")


@pytest.mark.parametrize("case", ALL, ids=[_id(c) for c in ALL])
def test_matches_torch_float64(case, path):
    ember_cls, torch_cls, kwargs = case
    _compare(ember_cls, torch_cls, kwargs, np.float64, skip=1)


@pytest.mark.parametrize("case", ALL[::3], ids=[_id(c) for c in ALL[::3]])
def test_matches_torch_float32(case, path):
    ember_cls, torch_cls, kwargs = case
    _compare(ember_cls, torch_cls, kwargs, np.float32)


GROUP_CASES = [
    (SGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9), dict(lr=0.01, nesterov=True)),
    (Adam, torch.optim.Adam, dict(lr=0.01), dict(lr=0.1, betas=(0.5, 0.9), amsgrad=True)),
    (AdamW, torch.optim.AdamW, dict(lr=0.01, weight_decay=0.1), dict(lr=0.003, weight_decay=0.0)),
    (RMSprop, torch.optim.RMSprop, dict(lr=0.01), dict(lr=0.05, centered=True, momentum=0.5)),
    (Adagrad, torch.optim.Adagrad, dict(lr=0.1), dict(lr=0.5, lr_decay=0.1)),
]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c[0].__name__ for c in GROUP_CASES])
def test_param_groups_match_torch(case, path):
    ember_cls, torch_cls, kwargs, group = case
    opt, topt = _compare(ember_cls, torch_cls, kwargs, np.float64, groups=group)
    assert opt.param_groups[0]["lr"] == group["lr"] and opt.param_groups[1]["lr"] == kwargs["lr"]


@pytest.mark.parametrize("case", GROUP_CASES, ids=[c[0].__name__ for c in GROUP_CASES])
def test_state_dict_round_trip(case, path):
    ember_cls, torch_cls, kwargs, group = case
    dtype = np.float64
    mine, theirs = _pairs(dtype)
    opt = ember_cls([dict(params=mine[:1], **group), dict(params=mine[1:])], **kwargs)
    topt = torch_cls([dict(params=theirs[:1], **group), dict(params=theirs[1:])], **kwargs)
    rng = np.random.default_rng(2)
    for _ in range(5):
        _feed(mine, theirs, rng, dtype)
        opt.step()
        topt.step()
    saved, tsaved = opt.state_dict(), topt.state_dict()
    # Same layout as torch: integer keys, index lists, the same buffers per parameter.
    assert sorted(saved["state"]) == sorted(tsaved["state"])
    assert [g["params"] for g in saved["param_groups"]] == [g["params"] for g in tsaved["param_groups"]]
    for index, buffers in tsaved["state"].items():
        assert set(saved["state"][index]) == set(buffers)
    for mine_group, torch_group in zip(saved["param_groups"], tsaved["param_groups"]):
        for key in ("lr", "weight_decay", "momentum", "betas", "amsgrad", "centered", "lr_decay", "nesterov"):
            if key in torch_group:
                assert mine_group[key] == torch_group[key], key

    fresh = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in mine]
    resumed = ember_cls([dict(params=fresh[:1], **group), dict(params=fresh[1:])], **kwargs)
    resumed.load_state_dict(saved)
    for _ in range(6):
        _feed(mine, theirs, rng, dtype)
        for p, f in zip(mine, fresh):
            f.grad = ember.tensor(p.grad.numpy().copy())
        opt.step()
        resumed.step()
        topt.step()
    for p, f in zip(mine, fresh):
        np.testing.assert_array_equal(f.detach().numpy(), p.detach().numpy())
    _assert_params(fresh, theirs, dtype, "after resuming")


def test_load_state_dict_copies_and_casts():
    p = ember.tensor(np.ones(3), requires_grad=True)
    opt = Adam([p], lr=0.1)
    p.grad = ember.ones(3, dtype=ember.float64)
    opt.step()
    saved = opt.state_dict()
    q = ember.ones(3, dtype=ember.float32, requires_grad=True)
    other = Adam([q], lr=0.1)
    other.load_state_dict(saved)
    assert other.state[q]["exp_avg"].dtype == ember.float32
    assert other.state[q]["step"].dtype == saved["state"][0]["step"].dtype
    assert other.state[q]["exp_avg_sq"]._data is not saved["state"][0]["exp_avg_sq"]._data
    assert other.param_groups[0]["params"][0] is q


def test_load_state_dict_validates_groups():
    a, b = ember.zeros(2, requires_grad=True), ember.zeros(3, requires_grad=True)
    saved = SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="doesn't match the size"):
        SGD([a], lr=0.1).load_state_dict(saved)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(saved)


def test_zero_grad_set_to_none_and_zero():
    p = ember.randn(3, requires_grad=True)
    opt = SGD([p], lr=0.1)
    (p * 2).sum().backward()
    grad = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is grad
    np.testing.assert_array_equal(p.grad.numpy(), np.zeros(3, np.float32))
    opt.zero_grad()
    assert p.grad is None


def test_param_without_grad_is_skipped_and_gets_no_state(path):
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    opt = Adam([a, b], lr=0.1)
    a.grad = ember.ones(2)
    opt.step()
    assert len(opt.state[b]) == 0 and float(opt.state[a]["step"]) == 1.0
    np.testing.assert_array_equal(b.detach().numpy(), np.ones(2, np.float32))


def test_closure_runs_with_grad_and_returns_loss():
    w = ember.tensor([1.0, -2.0], requires_grad=True)
    opt = SGD([w], lr=0.5)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with ember.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 5.0
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])


def test_constructor_errors():
    w = ember.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors"):
        SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        Adam([], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        SGD([w * 2], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        Adam([w], lr=-1.0)
    with pytest.raises(ValueError, match="Nesterov"):
        SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [w]}, {"params": [w]}], lr=0.1)


def test_add_param_group_and_named_params(path):
    a, b = ember.ones(2, requires_grad=True), ember.ones(2, requires_grad=True)
    opt = SGD([("a", a)], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": [("b", b)], "lr": 1.0})
    assert opt.param_groups[1]["momentum"] == 0.9 and opt.param_groups[1]["param_names"] == ["b"]
    a.grad, b.grad = ember.ones(2), ember.ones(2)
    opt.step()
    np.testing.assert_allclose(a.detach().numpy(), [0.9, 0.9])
    np.testing.assert_allclose(b.detach().numpy(), [0.0, 0.0])
    assert opt.state_dict()["param_groups"][1]["params"] == [1]


def test_step_hooks_and_version_bump(path):
    w = ember.ones(2, requires_grad=True)
    opt = SGD([w], lr=0.1)
    calls = []
    handle = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    w.grad = ember.ones(2)
    before = w._version
    opt.step()
    assert calls == ["pre", "post"]
    handle.remove()
    opt.step()
    assert calls == ["pre", "post", "post"]
    assert w._version > before or w._vc is None


def test_graph_building_takes_the_ember_op_path(monkeypatch):
    """While a graph builder is active the update must go through ember ops, never raw arrays."""
    w = ember.ones(3, requires_grad=True)
    opt = Adam([w], lr=0.1)
    w.grad = ember.ones(3)
    monkeypatch.setattr(interpreters, "tracing", lambda: True)
    monkeypatch.setattr(CompiledUpdates, "run", lambda *a, **k: pytest.fail("compiled update used while tracing"))
    opt.step()
    np.testing.assert_allclose(w.detach().numpy(), np.full(3, 0.9), rtol=1e-6)


def test_trains_a_small_regression(path):
    """End to end: Adam drives a least-squares loss down, with autograd producing the gradients."""
    rng = np.random.default_rng(3)
    x = ember.tensor(rng.standard_normal((64, 3)).astype(np.float32))
    target = x @ ember.tensor([[1.0], [-2.0], [0.5]])
    w = ember.zeros(3, 1, requires_grad=True)
    opt = Adam([w], lr=0.1)
    for _ in range(150):
        opt.zero_grad()
        loss = ((x @ w - target) ** 2).mean()
        loss.backward()
        opt.step()
    assert float(loss) < 1e-3


COMPILE_CASES = [(Adam, dict(lr=0.01, amsgrad=True, weight_decay=0.1)), (AdamW, dict(lr=0.01)),
                 (RMSprop, dict(lr=0.01, centered=True, momentum=0.5)), (Adagrad, dict(lr=0.1, lr_decay=0.01)),
                 (SGD, dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01))]


@pytest.mark.parametrize("case", COMPILE_CASES, ids=[c[0].__name__ for c in COMPILE_CASES])
def test_compiled_training_step_matches_eager(case):
    """A traced step (ember-op path) keeps counting steps: bias corrections are graph ops, not constants."""
    if not hasattr(ember, "compile"):
        pytest.skip("ember.compile not available")
    cls, kwargs = case
    rng = np.random.default_rng(4)
    inits = [rng.standard_normal((6, 8)) * 0.3, rng.standard_normal((8, 2)) * 0.3]
    runs = []
    for compiled in (False, True):
        w1, w2 = (ember.tensor(a.copy(), requires_grad=True) for a in inits)
        opt = cls([w1, w2], **kwargs)

        def step(x, y, w1=w1, w2=w2, opt=opt):
            opt.zero_grad()
            loss = (((x @ w1).relu() @ w2 - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        fn = ember.compile(step, fallback="raise") if compiled else step
        data = np.random.default_rng(5)
        for _ in range(6):
            fn(ember.tensor(data.standard_normal((5, 6))), ember.tensor(data.standard_normal((5, 2))))
        runs.append((w1.detach().numpy().copy(), w2.detach().numpy().copy()))
    for eager, traced in zip(*runs):
        np.testing.assert_allclose(traced, eager, rtol=1e-12, atol=1e-14)
