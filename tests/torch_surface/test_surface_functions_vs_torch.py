"""Every top-level function added for PyTorch's surface, checked against torch from one table
(``surface_cases.py``): values, dtypes, gradients (float64, where differentiable) and errors."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from surface_cases import CASES, ERRORS, FACTORIES

torch = pytest.importorskip("torch")


def _convert(value, lib, leaves):
    if isinstance(value, np.ndarray):
        t = lib.tensor(value)
        if value.dtype == np.float64:
            t.requires_grad_(True)
            leaves.append(t)
        return t
    if isinstance(value, np.generic):
        return lib.tensor(value)
    if isinstance(value, list):
        return [_convert(v, lib, leaves) for v in value]
    if isinstance(value, tuple) and any(isinstance(v, np.ndarray) for v in value):
        return tuple(_convert(v, lib, leaves) for v in value)
    return value


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _numpy(t):
    if hasattr(t, "detach"):
        t = t.detach()
    return np.asarray(t.numpy() if hasattr(t, "numpy") else t)


def _dtype_name(t) -> str:
    return str(t.dtype).split(".")[-1]


def _run(name, args, kwargs, lib, owner=None):
    leaves: list = []
    call_args = [_convert(a, lib, leaves) for a in args]
    call_kwargs = {k: _convert(v, lib, leaves) for k, v in kwargs.items()}
    return getattr(owner if owner is not None else lib, name)(*call_args, **call_kwargs), leaves


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_values_dtypes_gradients(case) -> None:
    name, args, kwargs, differentiable = case
    e_out, e_leaves = _run(name, args, kwargs, ember)
    t_out, t_leaves = _run(name, args, kwargs, torch)
    e_flat, t_flat = _flat(e_out), _flat(t_out)
    assert len(e_flat) == len(t_flat), name
    for a, b in zip(e_flat, t_flat):
        if isinstance(b, torch.Tensor):
            assert _dtype_name(a) == _dtype_name(b), (name, a.dtype, b.dtype)
            assert tuple(a.shape) == tuple(b.shape), (name, a.shape, b.shape)
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-7, atol=1e-10, equal_nan=True, err_msg=name)
    if not differentiable:
        return
    rng = np.random.default_rng(3)
    e_total, t_total = 0, 0
    for a, b in zip(e_flat, t_flat):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            w = rng.standard_normal(tuple(b.shape))
            e_total = e_total + (a * ember.tensor(w)).sum()
            t_total = t_total + (b * torch.tensor(w)).sum()
    t_total.backward()
    e_total.backward()
    for a, b in zip(e_leaves, t_leaves):  # no gradient and a zero gradient are the same answer
        ga = a.grad.numpy() if a.grad is not None else np.zeros(tuple(a.shape))
        gb = b.grad.numpy() if b.grad is not None else np.zeros(tuple(b.shape))
        np.testing.assert_allclose(ga, gb, rtol=1e-6, atol=1e-9, err_msg=f"{name} grad")


@pytest.mark.parametrize("case", FACTORIES, ids=[f"{c[0]}-{k}" for k, c in enumerate(FACTORIES)])
def test_factories(case) -> None:
    name, args, kwargs = case
    a = getattr(ember, name)(*[ember.tensor(x) if isinstance(x, np.ndarray) else x for x in args], **kwargs)
    b = getattr(torch, name)(*[torch.tensor(x) if isinstance(x, np.ndarray) else x for x in args], **kwargs)
    if isinstance(b, tuple) and b and isinstance(b[0], torch.Tensor):
        for x, y in zip(a, b):
            assert _dtype_name(x) == _dtype_name(y)
            np.testing.assert_array_equal(x.numpy(), y.numpy())
        return
    if isinstance(b, torch.Tensor):
        assert _dtype_name(a) == _dtype_name(b), (name, a.dtype, b.dtype)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    else:
        assert tuple(a) == tuple(b)


@pytest.mark.parametrize("case", ERRORS, ids=[f"{c[0]}-{k}" for k, c in enumerate(ERRORS)])
def test_errors_like_torch(case) -> None:
    name, args, kwargs = case
    with pytest.raises(Exception) as theirs:
        _run(name, args, kwargs, torch)
    with pytest.raises(type(theirs.value) if type(theirs.value) in (TypeError, IndexError, ValueError)
                       else (RuntimeError, ValueError, TypeError, IndexError)):
        _run(name, args, kwargs, ember)


from surface_cases import NAMESPACED  # noqa: E402


@pytest.mark.parametrize("case", NAMESPACED, ids=[f"{c[0]}.{c[1]}-{k}" for k, c in enumerate(NAMESPACED)])
def test_linalg_special_namespaces(case) -> None:
    namespace, name, args, kwargs, differentiable = case
    e_out, e_leaves = _run(name, args, kwargs, ember, getattr(ember, namespace))
    t_out, t_leaves = _run(name, args, kwargs, torch, getattr(torch, namespace))
    e_flat, t_flat = _flat(e_out), _flat(t_out)
    for a, b in zip(e_flat, t_flat):
        assert _dtype_name(a) == _dtype_name(b) and tuple(a.shape) == tuple(b.shape), (name, a.shape, b.shape)
        np.testing.assert_allclose(_numpy(a), _numpy(b), rtol=1e-7, atol=1e-10, equal_nan=True, err_msg=name)
    if differentiable:
        w = [np.random.default_rng(k).standard_normal(tuple(b.shape)) for k, b in enumerate(t_flat)]
        sum((a * ember.tensor(x)).sum() for a, x, b in zip(e_flat, w, t_flat) if b.requires_grad).backward()
        sum((b * torch.tensor(x)).sum() for b, x in zip(t_flat, w) if b.requires_grad).backward()
        for a, b in zip(e_leaves, t_leaves):
            ga = a.grad.numpy() if a.grad is not None else np.zeros(tuple(a.shape))
            gb = b.grad.numpy() if b.grad is not None else np.zeros(tuple(b.shape))
            np.testing.assert_allclose(ga, gb, rtol=1e-6, atol=1e-9, err_msg=f"{name} grad")


def test_testing_assert_close_like_torch() -> None:
    pairs = [([1.0], [1.0 + 1e-7], {}), ([1.0], [1.001], {}), ([1.0], [1.001], {"rtol": 1e-2, "atol": 0.0}),
             ([np.nan], [np.nan], {}), ([np.nan], [np.nan], {"equal_nan": True})]
    for a, b, kw in pairs:
        outcomes = []
        for lib in (torch, ember):
            try:
                lib.testing.assert_close(lib.tensor(a), lib.tensor(b), **kw)
                outcomes.append(True)
            except AssertionError:
                outcomes.append(False)
        assert outcomes[0] == outcomes[1], (a, b, kw)
    with pytest.raises(AssertionError, match="dtype"):
        ember.testing.assert_close(ember.tensor([1.0]), ember.tensor([1.0], dtype=ember.float64))


def test_checkpoint_same_values_and_gradients() -> None:
    from ember.utils.checkpoint import checkpoint

    x = ember.tensor([0.5, -1.0], requires_grad=True)
    y = checkpoint(lambda t: (t.sin() * t).sum(), x, use_reentrant=False)
    y.backward()
    tx = torch.tensor([0.5, -1.0], requires_grad=True)
    import torch.utils.checkpoint as tcp

    tcp.checkpoint(lambda t: (t.sin() * t).sum(), tx, use_reentrant=False).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


from surface_cases import METHODS  # noqa: E402


@pytest.mark.parametrize("case", METHODS, ids=[f"{c[0]}-{k}" for k, c in enumerate(METHODS)])
def test_methods(case) -> None:
    name, data, args, kwargs, differentiable = case
    e_leaves: list = []
    t_leaves: list = []
    e_x, t_x = _convert(data, ember, e_leaves), _convert(data, torch, t_leaves)
    e_out = getattr(e_x, name)(*[_convert(a, ember, e_leaves) for a in args], **kwargs)
    t_out = getattr(t_x, name)(*[_convert(a, torch, t_leaves) for a in args], **kwargs)
    assert tuple(e_out.shape) == tuple(t_out.shape) and _dtype_name(e_out) == _dtype_name(t_out)
    if name != "new" or isinstance(args[0], list):  # new(sizes) is uninitialized memory
        np.testing.assert_allclose(_numpy(e_out), _numpy(t_out), rtol=1e-7, atol=1e-10)
    if differentiable:
        w = np.random.default_rng(0).standard_normal(tuple(t_out.shape))
        (e_out * ember.tensor(w)).sum().backward()
        (t_out * torch.tensor(w)).sum().backward()
        for a, b in zip(e_leaves, t_leaves):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((5, 3), False), ((7, 3), True), ((2, 2, 2), False)])
def test_fill_diagonal_like_torch(shape, wrap) -> None:
    e, t = ember.zeros(*shape), torch.zeros(*shape)
    e.fill_diagonal_(2.5, wrap=wrap)
    t.fill_diagonal_(2.5, wrap=wrap)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_apply_map_put_inplace_like_torch() -> None:
    data = np.arange(6.0).reshape(2, 3)
    e, t = ember.tensor(data), torch.tensor(data)
    e.apply_(lambda v: v * v + 1)
    t.apply_(lambda v: v * v + 1)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    e.map_(ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64), lambda a, b: a - b)
    t.map_(torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), lambda a, b: a - b)
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    e.put_(ember.tensor([0, 4]), ember.tensor([9.0, 8.0], dtype=ember.float64))
    t.put_(torch.tensor([0, 4]), torch.tensor([9.0, 8.0], dtype=torch.float64))
    np.testing.assert_array_equal(e.numpy(), t.numpy())
    with pytest.raises(RuntimeError):
        ember.arange(3.0).unfold(0, 4, 1)
