"""The nn modules and functional ops added for PyTorch's surface, checked against torch from tables
(``nn_surface_cases.py``): outputs, dtypes, input and parameter gradients; lazy modules; errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from nn_surface_cases import FUNCTIONAL, MODULES
from test_surface_functions_vs_torch import _flat, _numpy, _run

torch = pytest.importorskip("torch")


def _inputs(arrays, lib):
    out = []
    for a in arrays:
        t = lib.tensor(a)
        if a.dtype == np.float64:
            t.requires_grad_(True)
        out.append(t)
    return out


@pytest.mark.parametrize("case", MODULES, ids=[f"{c[0]}-{k}" for k, c in enumerate(MODULES)])
def test_module_matches_torch(case) -> None:
    name, args, kwargs, arrays = case
    ember.manual_seed(0)
    em = getattr(ember.nn, name)(*args, **kwargs).double()
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    state = em.state_dict()
    assert set(state) == set(tm.state_dict()), (name, sorted(state), sorted(tm.state_dict()))
    tm.load_state_dict({k: torch.tensor(v.numpy()) for k, v in state.items()})
    e_in, t_in = _inputs(arrays, ember), _inputs(arrays, torch)
    e_out, t_out = em(*e_in), tm(*t_in)
    for a, b in zip(_flat(e_out), _flat(t_out)):
        assert tuple(a.shape) == tuple(b.shape), (name, a.shape, b.shape)
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-7, atol=1e-9, err_msg=name)
    w = np.random.default_rng(1).standard_normal(tuple(_flat(t_out)[0].shape))
    (_flat(e_out)[0] * ember.tensor(w)).sum().backward()
    (_flat(t_out)[0] * torch.tensor(w)).sum().backward()
    for a, b in zip(e_in + list(em.parameters()), t_in + list(tm.parameters())):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-9, err_msg=f"{name} grad")


@pytest.mark.parametrize("case", FUNCTIONAL, ids=[f"{c[0]}-{k}" for k, c in enumerate(FUNCTIONAL)])
def test_functional_matches_torch(case) -> None:
    name, args, kwargs, differentiable = case
    e_out, e_leaves = _run(name, args, kwargs, ember, ember.nn.functional)
    t_out, t_leaves = _run(name, args, kwargs, torch, torch.nn.functional)
    for a, b in zip(_flat(e_out), _flat(t_out)):
        assert tuple(a.shape) == tuple(b.shape), (name, a.shape, b.shape)
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-7, atol=1e-9, err_msg=name)
    if differentiable:
        outs = [(a, b) for a, b in zip(_flat(e_out), _flat(t_out)) if b.requires_grad]
        w = [np.random.default_rng(k).standard_normal(tuple(b.shape)) for k, (_, b) in enumerate(outs)]
        sum((a * ember.tensor(x)).sum() for (a, _), x in zip(outs, w)).backward()
        sum((b * torch.tensor(x)).sum() for (_, b), x in zip(outs, w)).backward()
        for a, b in zip(e_leaves, t_leaves):
            ga = a.grad.numpy() if a.grad is not None else np.zeros(tuple(a.shape))
            gb = b.grad.numpy() if b.grad is not None else np.zeros(tuple(b.shape))
            np.testing.assert_allclose(ga, gb, rtol=1e-6, atol=1e-9, err_msg=f"{name} grad")


def test_functional_inplace_activations_write_into_the_input() -> None:
    for name in ("relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_"):
        x = ember.tensor([-1.0, 2.0])
        assert getattr(ember.nn.functional, name)(x) is x
        np.testing.assert_allclose(x.numpy(), getattr(torch.nn.functional, name)(torch.tensor([-1.0, 2.0])).numpy())


@pytest.mark.parametrize("lazy,real,shape", [("LazyLinear", "Linear", (2, 5)), ("LazyConv1d", "Conv1d", (2, 3, 6)),
                                             ("LazyConv2d", "Conv2d", (1, 3, 5, 5)),
                                             ("LazyConvTranspose2d", "ConvTranspose2d", (1, 3, 4, 4)),
                                             ("LazyBatchNorm1d", "BatchNorm1d", (4, 3)),
                                             ("LazyInstanceNorm2d", "InstanceNorm2d", (2, 3, 4, 4))])
def test_lazy_modules_infer_the_size_and_keep_parameter_identity(lazy: str, real: str, shape: tuple) -> None:
    args = () if "Norm" in lazy else ((4,) if lazy == "LazyLinear" else (4, 3))
    m = getattr(ember.nn, lazy)(*args)
    params_before = list(m.parameters())
    opt = ember.optim.SGD(m.parameters(), lr=0.1) if params_before else None
    y = m(ember.randn(*shape))
    t = getattr(torch.nn, lazy)(*args)
    ty = t(torch.randn(*shape))
    assert type(m).__name__ == real == type(t).__name__
    assert tuple(y.shape) == tuple(ty.shape)
    assert [tuple(p.shape) for p in m.parameters()] == [tuple(p.shape) for p in t.parameters()]
    assert all(a is b for a, b in zip(params_before, m.parameters()))
    if opt is not None:
        y.sum().backward()
        before = [p.detach().numpy().copy() for p in m.parameters()]
        opt.step()
        assert any(not np.array_equal(b, p.detach().numpy()) for b, p in zip(before, m.parameters()))


@pytest.mark.parametrize("build,call", [
    (lambda lib: lib.nn.PixelShuffle(3), lambda lib: lib.zeros(1, 4, 2, 2)),
    (lambda lib: lib.nn.ReflectionPad1d(4), lambda lib: lib.zeros(1, 1, 3)),
    (lambda lib: lib.nn.Fold((4, 4), 2), lambda lib: lib.zeros(1, 4, 5)),
    (lambda lib: lib.nn.ChannelShuffle(3), lambda lib: lib.zeros(1, 4, 2, 2)),
])
def test_errors_like_torch(build, call) -> None:
    with pytest.raises(Exception):
        build(torch)(call(torch))
    with pytest.raises((RuntimeError, ValueError)):
        build(ember)(call(ember))


def test_gumbel_softmax_is_a_distribution_and_hard_is_one_hot() -> None:
    logits = ember.randn(5, 4, requires_grad=True)
    soft = ember.nn.functional.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.sum(dim=-1).detach().numpy(), np.ones(5), rtol=1e-6)
    hard = ember.nn.functional.gumbel_softmax(logits, hard=True)
    assert sorted(set(hard.detach().numpy().ravel().tolist())) == [0.0, 1.0]
    hard.sum().backward()
    assert logits.grad is not None
