"""torch.optim audited against torch 2.13 (optim24): what the sweep found, kept as fast checks.

- Adadelta, Adamax, NAdam, RAdam and ASGD follow torch's single-tensor op sequence (fused ``add(alpha=)``,
  ``addcmul_``, ``lerp_``, the C library's ``pow``): trajectories equal torch's bit for bit, zero-size and 0-d
  parameters and a parameter without a gradient included (torch's sqrt substituted where the update takes one).
- A Tensor ``lr``/``betas`` stays a Tensor in ``param_groups``; SGD without momentum keeps no state entries.
- ``capturable=True`` on the CPU raises at ``step`` for every optimizer; ``fused`` with ``foreach`` is refused.
- Step hooks see the optimizer as ``args[0]``; state-dict and load-state-dict hooks run as torch's.
- A torch checkpoint (``torch.save``) loads into ember and continues bit for bit, and torch loads ember's.
- SWALR's state dict keeps ``_anneal_strategy`` (not the function), as torch.
- Complex parameters step as their real views (torch's ``view_as_real``), SGD on the complex tensor.

The sweep itself (every optimizer class x its constructor flags, pairs of them, groups, named parameters, float32
and float64: 952 configurations) is the ``slow`` test at the end.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SHAPES = [(3, 4), (5,), (), (0,), (4, 3)]


@pytest.fixture(autouse=True)
def op_by_op(monkeypatch):
    """The fast tests run the updates op by op (the compiled update equals that path bit for bit:
    test_compiled_update.py), so no graph is compiled; the slow sweep runs the compiled path."""
    monkeypatch.setattr(ember.optim.Optimizer, "fast_path", False)


def _params(lib, dtype):
    rng = np.random.default_rng(0)
    return [lib.nn.Parameter(lib.tensor(rng.standard_normal(s).astype(dtype))) for s in SHAPES]


def _run(lib, name, kwargs, dtype, steps=6, named=False):
    params = _params(lib, dtype)
    given = [(f"p{i}", p) for i, p in enumerate(params)] if named else params
    opt = getattr(lib.optim, name)(given, **kwargs)
    rng = np.random.default_rng(1)
    for step in range(steps):
        for i, p in enumerate(params):
            p.grad = None if (step == 1 and i == 1) else lib.tensor(rng.standard_normal(tuple(p.shape)).astype(dtype))
        opt.step()
    return [p.detach().numpy() for p in params], opt


def _layout(obj):
    if isinstance(obj, dict):
        return [(repr(k), _layout(v)) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return type(obj).__name__, [_layout(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return "tensor", tuple(obj.shape), str(obj.dtype).split(".")[-1]
    return repr(obj)


BITWISE = [("Adadelta", {}), ("Adadelta", dict(weight_decay=0.1, maximize=True)),
           ("Adamax", {}), ("Adamax", dict(weight_decay=0.1, maximize=True)),
           ("NAdam", {}), ("NAdam", dict(weight_decay=0.1, momentum_decay=0.01)),
           ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
           ("RAdam", {}), ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)),
           ("RAdam", dict(weight_decay=0.1, maximize=True)),
           ("ASGD", dict(weight_decay=0.1, t0=2.0)), ("ASGD", dict(lambd=0.01, maximize=True))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,kwargs", BITWISE, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BITWISE)])
def test_rewritten_optimizers_equal_torch_bitwise(name, kwargs, dtype, torch_sqrt):
    mine, _ = _run(ember, name, kwargs, dtype)
    theirs, _ = _run(torch, name, kwargs, dtype)
    for a, b in zip(mine, theirs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["SGD", "Adam", "Adamax", "NAdam", "RAdam", "ASGD", "Adadelta", "RMSprop"])
def test_tensor_lr_stays_a_tensor_in_param_groups_and_state_dict(name):
    seen = []
    for lib in (torch, ember):
        _, opt = _run(lib, name, dict(lr=lib.tensor(0.01)), np.float32, steps=2, named=True)
        assert isinstance(opt.param_groups[0]["lr"], lib.Tensor)
        seen.append((_layout(opt.state_dict()), repr(opt)))
    assert seen[1] == seen[0]


def test_tensor_betas_checks_and_layout_like_torch():
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.ones(2))
        with pytest.raises(ValueError, match="betas must be either both floats or both Tensors"):
            lib.optim.Adam([p], betas=(lib.tensor(0.9), 0.99))
        with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
            lib.optim.Adam([p], lr=lib.tensor([0.1, 0.2]))
        with pytest.raises(ValueError, match="lr as a Tensor is not supported for capturable=False and foreach=True"):
            lib.optim.Adam([p], lr=lib.tensor(0.1), foreach=True)
        for cls in (lib.optim.SGD, lib.optim.Adam, lib.optim.Adagrad):
            with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
                cls([p], fused=True, foreach=True)
    seen = [_layout(_run(lib, "Adam", dict(betas=(lib.tensor(0.9), lib.tensor(0.99))), np.float32, 2)[1].state_dict())
            for lib in (torch, ember)]
    assert seen[1] == seen[0]


def test_sgd_without_momentum_keeps_no_state():
    for lib in (torch, ember):
        _, opt = _run(lib, "SGD", dict(lr=0.1), np.float32, steps=2)
        assert len(opt.state) == 0 and opt.state_dict()["state"] == {}
        _, opt = _run(lib, "SGD", dict(lr=0.1, momentum=0.9), np.float32, steps=2)
        assert sorted(opt.state_dict()["state"]) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop", "Adam"])
def test_capturable_on_the_cpu_raises_at_step_like_torch(name):
    for lib in (torch, ember):
        p = lib.nn.Parameter(lib.ones(2))
        opt = getattr(lib.optim, name)([p], capturable=True)  # built fine
        p.grad = lib.ones(2)
        with pytest.raises(AssertionError, match="If capturable=True, params.* must be on supported devices"):
            opt.step()


def _hook_log(lib):
    log = []
    p = lib.nn.Parameter(lib.ones(2))
    opt = lib.optim.SGD([p], lr=0.1, momentum=0.9)
    pre = opt.register_step_pre_hook(lambda o, a, k: log.append(("pre", len(a), a[0] is o, sorted(k))))
    opt.register_step_post_hook(lambda o, a, k: log.append(("post", len(a), sorted(k))))
    opt.register_state_dict_pre_hook(lambda o: log.append("sd_pre"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_state_dict_post_hook(lambda o, sd: log.append(("sd_post", sorted(sd))), prepend=False)
    opt.register_load_state_dict_pre_hook(lambda o, sd: log.append(("ld_pre", sorted(sd))))
    opt.register_load_state_dict_post_hook(lambda o: log.append("ld_post"))
    p.grad = lib.ones(2)
    loss = opt.step(lambda: lib.tensor(3.0))
    log.append(("closure", float(loss)))
    opt.load_state_dict(opt.state_dict())
    pre.remove()
    opt.step()
    # a pre-hook returning something else than (args, kwargs) is refused
    opt.register_step_pre_hook(lambda o, a, k: 5)
    with pytest.raises(RuntimeError, match="must return None or a tuple of \\(new_args, new_kwargs\\)"):
        opt.step()
    return log


def test_step_and_state_dict_hooks_like_torch():
    assert _hook_log(ember) == _hook_log(torch)


CROSS = [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)), ("Adam", dict(amsgrad=True)), ("AdamW", {}),
         ("RMSprop", dict(centered=True, momentum=0.5)), ("Adagrad", {}), ("Adadelta", {}), ("Adamax", {}),
         ("NAdam", {}), ("RAdam", {}), ("ASGD", {}), ("Rprop", {})]


@pytest.mark.parametrize("name,kwargs", CROSS, ids=[c[0] for c in CROSS])
def test_torch_checkpoint_continues_bitwise_and_torch_loads_embers(name, kwargs, torch_sqrt):
    theirs, topt = _run(torch, name, kwargs, np.float32, steps=3)
    buf = io.BytesIO()
    torch.save({"optimizer": topt.state_dict()}, buf)
    buf.seek(0)
    params = [ember.nn.Parameter(ember.tensor(a.copy())) for a in theirs]
    opt = getattr(ember.optim, name)(params, **kwargs)
    opt.load_state_dict(ember.load(buf)["optimizer"])
    assert _layout(opt.state_dict()) == _layout(topt.state_dict())
    tparams = [q for g in topt.param_groups for q in g["params"]]
    rng = np.random.default_rng(5)
    for _ in range(3):
        for p, q in zip(params, tparams):
            g = rng.standard_normal(tuple(p.shape)).astype(np.float32)
            p.grad, q.grad = ember.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    for p, q in zip(params, tparams):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
    buf = io.BytesIO()
    ember.save(opt.state_dict(), buf)
    buf.seek(0)
    back = getattr(torch.optim, name)([torch.nn.Parameter(torch.tensor(p.detach().numpy())) for p in params], **kwargs)
    back.load_state_dict(torch.load(buf, weights_only=True))
    assert _layout(back.state_dict()) == _layout(topt.state_dict())


COMPLEX = ["SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "NAdam", "RAdam", "RMSprop", "Rprop", "ASGD"]


@pytest.mark.parametrize("name", COMPLEX)
def test_complex_parameters_step_as_torch(name, torch_sqrt):
    """torch steps a complex parameter as ``view_as_real`` (each part its own element: Adam's second moment per
    part, Rprop's step sizes starting at ``lr`` for both parts); SGD runs on the complex tensor itself. The state
    stays complex."""
    kwargs = dict(lr=0.1, momentum=0.9) if name == "SGD" else {} if name == "Rprop" else dict(weight_decay=0.1)
    seen = []
    for lib in (torch, ember):
        rng = np.random.default_rng(0)
        param = lib.nn.Parameter(lib.tensor((rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2)))
                                            .astype(np.complex64)))
        opt = getattr(lib.optim, name)([param], **kwargs)
        for _ in range(4):
            param.grad = lib.tensor((rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2)))
                                    .astype(np.complex64))
            opt.step()
        seen.append((param.detach().numpy(), _layout(opt.state_dict())))
    np.testing.assert_array_equal(seen[1][0], seen[0][0])
    assert seen[1][1] == seen[0][1]


@pytest.mark.parametrize("name", ["Adafactor", "Muon"])
def test_complex_parameters_refused_like_torch(name):
    for lib in (torch, ember):
        param = lib.nn.Parameter(lib.ones(2, 2, dtype=lib.complex64))
        opt = getattr(lib.optim, name)([param])
        param.grad = lib.ones(2, 2, dtype=lib.complex64)
        with pytest.raises(RuntimeError, match=f"{name} does not support complex parameters"):
            opt.step()


def test_swalr_state_dict_keeps_the_strategy_like_torch():
    seen = []
    for lib in (torch, ember):
        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(2))], lr=0.5)
        sched = lib.optim.swa_utils.SWALR(opt, swa_lr=[0.05], anneal_epochs=2, anneal_strategy="linear")
        lrs = []
        for _ in range(3):
            opt.step()
            sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        state = sched.state_dict()
        fresh = lib.optim.swa_utils.SWALR(opt, swa_lr=0.05)
        fresh.load_state_dict(state)
        seen.append((sorted(state), state["_anneal_strategy"], lrs, fresh.anneal_func(0.5)))
        with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear'"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=0.05, anneal_strategy="x")
        with pytest.raises(ValueError, match="swa_lr has 2 values, param_groups has 1"):
            lib.optim.swa_utils.SWALR(opt, swa_lr=[0.1, 0.2])
    assert seen[1] == seen[0]


@pytest.mark.slow
def test_sweep_every_optimizer_and_flag_against_torch():
    """The audit's sweep: each optimizer class x each constructor flag torch's signature has (and pairs of the
    flags that change the math), float32 and float64, groups with their own lr and named parameters: the same
    errors, the same ``state_dict`` layout and ``repr``, and trajectories bit for bit where torch runs its
    for-loop formula (``foreach=True``/``fused=True`` run torch's other kernels; a Tensor ``lr``/``betas`` enters
    torch's arithmetic as a float32 tensor: those are compared to 1e-6)."""
    import inspect
    import itertools

    extra = {"weight_decay": [0.1], "momentum": [0.9], "dampening": [0.1], "lr_decay": [0.1],
             "initial_accumulator_value": [0.1], "momentum_decay": [0.01], "centered": [True], "nesterov": [True],
             "amsgrad": [True], "maximize": [True], "decoupled_weight_decay": [True], "lambd": [0.01], "t0": [2.0]}
    names = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"]
    count = 0
    ember.optim.Optimizer.fast_path = True  # (restored by the op_by_op fixture)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            accepted = inspect.signature(getattr(torch.optim, name).__init__).parameters
            singles = [{k: v} for k, vs in extra.items() if k in accepted for v in vs]
            configs = [{}] + singles + [{**a, **b} for a, b in itertools.combinations(singles, 2)]
            configs += [{**c, "foreach": True} for c in singles] + [{"foreach": False}]
            base = dict(lr=0.1) if name == "SGD" else {}
            for config in configs:
                kwargs = {**base, **config}
                if kwargs.get("nesterov"):
                    kwargs.setdefault("momentum", 0.9)
                for dtype in (np.float32, np.float64):
                    outcome = []
                    for lib in (torch, ember):
                        try:
                            outcome.append(_run(lib, name, kwargs, dtype, steps=4))
                        except Exception as error:  # noqa: BLE001 (the same refusal expected from both)
                            outcome.append(type(error))
                    count += 1
                    if not isinstance(outcome[0], tuple):
                        assert outcome[1] is outcome[0], (name, kwargs)
                        continue
                    (theirs, topt), (mine, opt) = outcome
                    assert _layout(opt.state_dict()) == _layout(topt.state_dict()), (name, kwargs)
                    assert repr(opt) == repr(topt), (name, kwargs)
                    exact = not kwargs.get("foreach") and name not in ("Adam", "AdamW", "RMSprop", "Adadelta")
                    for a, b in zip(mine, theirs):
                        if exact:
                            np.testing.assert_array_equal(a, b, err_msg=f"{name} {kwargs}")
                        else:  # (torch's MKL sqrt, or its multi-tensor formulas)
                            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-7, err_msg=f"{name} {kwargs}")
    assert count > 250
