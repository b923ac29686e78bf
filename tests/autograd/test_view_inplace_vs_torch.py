"""In-place ops on views of tensors that require grad (PyTorch's CopySlices / view replay).

Each scenario runs the same code on ember and on torch 2.13 (CPU, float64) and compares values
and gradients; a few are also checked against float64 finite differences, to second order.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")


def _run(lib: Any, fn: Callable, arrays: list) -> tuple:
    xs = [lib.tensor(a.copy(), requires_grad=True) for a in arrays]
    out = fn(lib, *xs)
    seed = np.random.default_rng(7).standard_normal(tuple(out.shape))
    (out * lib.tensor(seed)).sum().backward()
    grads = [np.zeros(a.shape) if x.grad is None else np.asarray(x.grad.detach().numpy()) for x, a in zip(xs, arrays)]
    return np.asarray(out.detach().numpy()), grads


def _compare(fn: Callable, *shapes: tuple) -> None:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in shapes]
    got, got_grads = _run(ember, fn, arrays)
    want, want_grads = _run(torch, fn, arrays)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# ---- scenarios, each run on both libraries ---------------------------------------------------------------
def brief_example(lib: Any, x: Any) -> Any:
    y = x * 1
    y[:, 0] = 0
    y[1] += x[1] * 2
    y.diagonal().mul_(3)
    v = y[2:]
    v.relu_()
    return y


def two_views_of_one_base(lib: Any, x: Any) -> Any:
    y = x * 2
    a, b = y[0], y[:, 1]  # overlap at y[0, 1]
    a.mul_(x[1])  # b must now see a's write (its history is re-derived)
    return b * 3 + a.sum()


def view_read_before_base_write(lib: Any, x: Any) -> Any:
    y = x + 1
    row = y[1]
    y.mul_(x)  # the whole base changes: row's history must follow
    return row * row


def untouched_view_keeps_exact_grad(lib: Any, x: Any) -> Any:
    y = x * 1
    top, bottom = y[:2], y[2:]
    bottom.mul_(4)  # does not overlap top
    return top * 1 + y.sum()


def view_of_a_view(lib: Any, x: Any) -> Any:
    y = x * 1
    v = y[:, 1:]
    w = v[1:3]
    w.mul_(x[1:3, 1:] + 1)
    return y * v.sum()


def reshape_view(lib: Any, x: Any) -> Any:
    y = x - 1
    flat = y.view(12)
    flat[::5].mul_(x[0, :3])
    m = y.reshape(3, 4)
    m[1].add_(1.5)
    return y ** 2


def transpose_and_permute(lib: Any, x: Any) -> Any:
    y = x * 1
    y.t()[1].mul_(x[:, 0])
    y.permute(1, 0)[2, 1:].sub_(x[1:, 2] ** 2)
    return y


def narrow_select_squeeze_unsqueeze(lib: Any, x: Any) -> Any:
    y = x * 1
    y.narrow(0, 1, 2).mul_(2)
    y.select(1, 2).add_(x[:, 0])
    y.unsqueeze(0)[0, 3].mul_(-1)
    y[1:2].squeeze(0).div_(x[1].detach().abs() + 1)
    return y


def diagonals(lib: Any, x: Any) -> Any:
    y = (x * 1).reshape(2, 2, 3)
    y.diagonal(0, 0, 1).mul_(2)
    y.diagonal(1, 1, 2)[0].add_(x[0, 0])
    z = x * 1
    z.diagonal(-1).copy_(x[0] * 5)
    return y.reshape(4, 3) + z


def setitem_with_grad_value(lib: Any, x: Any, z: Any) -> Any:
    b = lib.zeros(4, 3, dtype=x.dtype)
    b[1:] = x[1:] * 2
    b.t()[0] = z[0] * z[1]
    b[2:][0, 1:] = z[:2]
    return b * x


def nongrad_base_gets_history(lib: Any, x: Any, z: Any) -> Any:
    buf = lib.zeros(4, 3, dtype=x.dtype)
    first = buf[:2]
    buf[:2] = x[:2] * z
    return first * 1 + buf.sum()


def zero_dim_views(lib: Any, x: Any) -> Any:
    y = x * 1
    y[1, 2].mul_(x[0, 0])
    y[0][1].add_(3.0)
    return y


def fill_zero_copy_clamp(lib: Any, x: Any) -> Any:
    y = x.exp()
    z = y * 1
    z[0].fill_(2.0)
    z[:, 1].zero_()
    z[3].clamp_(-0.5, 0.5)
    z[2, 1:].copy_(x[1, 1:])
    return z * y


def inplace_on_base_then_view(lib: Any, x: Any) -> Any:
    y = x * 1
    v = y[1:]
    y.add_(x)
    v.mul_(v.detach() * 1)
    y[0].sub_(v[0])
    return y * v.sum()


SCENARIOS = [brief_example, two_views_of_one_base, view_read_before_base_write, untouched_view_keeps_exact_grad,
             view_of_a_view, reshape_view, transpose_and_permute, narrow_select_squeeze_unsqueeze, diagonals,
             zero_dim_views, fill_zero_copy_clamp, inplace_on_base_then_view]


@pytest.mark.parametrize("fn", SCENARIOS, ids=lambda f: f.__name__)
def test_matches_torch(fn: Callable) -> None:
    _compare(fn, (4, 3))


@pytest.mark.parametrize("fn", [setitem_with_grad_value, nongrad_base_gets_history], ids=lambda f: f.__name__)
def test_matches_torch_with_grad_values(fn: Callable) -> None:
    _compare(fn, (4, 3), (3,))


def test_brief_example_gradient_is_torchs() -> None:
    a = np.random.default_rng(3).standard_normal((4, 3))
    x = ember.tensor(a.copy(), requires_grad=True)
    y = x * 1
    y[:, 0] = 0
    y[1] += x[1] * 2
    y.diagonal().mul_(3)
    v = y[2:]
    v.relu_()
    y.sum().backward()
    tx = torch.tensor(a.copy(), requires_grad=True)
    ty = tx * 1
    ty[:, 0] = 0
    ty[1] += tx[1] * 2
    ty.diagonal().mul_(3)
    tv = ty[2:]
    tv.relu_()
    ty.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


@pytest.mark.parametrize("fn", [brief_example, view_of_a_view, diagonals, transpose_and_permute,
                                view_read_before_base_write], ids=lambda f: f.__name__)
def test_finite_differences_first_and_second_order(fn: Callable) -> None:
    x = ember.tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True)

    def f(t: Any) -> Any:
        return fn(ember, t) ** 2

    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_setitem_value_gets_grad_finite_differences() -> None:
    rng = np.random.default_rng(2)
    x = ember.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    z = ember.tensor(rng.standard_normal(3), requires_grad=True)
    assert gradcheck(lambda a, b: setitem_with_grad_value(ember, a, b), (x, z))
    assert gradgradcheck(lambda a, b: setitem_with_grad_value(ember, a, b) ** 2, (x, z))


# ---- history bookkeeping -----------------------------------------------------------------------------------
def test_nodes_and_versions_follow_torch() -> None:
    x = ember.randn(4, 3, requires_grad=True)
    y = x * 1
    v = y[1:]
    before = y._version
    v.mul_(2)
    assert y._version == v._version == before + 1
    assert y.grad_fn.name() == "torch::autograd::CopySlices"
    assert v.grad_fn.name() == "AsStridedBackward0"
    assert v.grad_fn.next_functions[0][0] is y.grad_fn
    assert v._base is y and v.requires_grad and not v.is_leaf


def test_views_of_a_nongrad_base_start_requiring_grad() -> None:
    x = ember.randn(3, requires_grad=True)
    buf = ember.zeros(2, 3)
    other = buf[1]
    buf[0] = x  # value requires grad: buf and its live views now have history
    assert buf.requires_grad and buf.grad_fn is not None
    assert other.requires_grad


def test_reshape_that_copies_is_not_a_view() -> None:
    x = ember.randn(3, 4, requires_grad=True)
    y = x * 1
    flat = y.t().reshape(-1)  # NumPy must copy here, as torch does
    flat.add_(1.0)
    np.testing.assert_allclose(y.detach().numpy(), x.detach().numpy())
    assert flat._base is None


def test_element_index_is_a_view() -> None:
    y = ember.zeros(2, 3)
    y[1, 2].add_(5.0)
    assert y[1, 2].item() == 5.0


def test_saved_tensor_check_still_fires_where_torchs_does() -> None:
    for lib in (ember, torch):
        x = lib.randn(4, 3, requires_grad=True)
        y = x.exp()  # exp saves its output
        y[1].mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


def test_slicing_does_not_pin_the_base_version() -> None:
    # torch's SliceBackward keeps no values: changing the base afterwards is fine in both libraries.
    for lib in (ember, torch):
        x = lib.randn(4, 3, requires_grad=True)
        y = x * 1
        b = y[0] + 2
        y.mul_(2)
        b.sum().backward()
        assert x.grad is not None


def test_second_order_through_copy_slices_with_create_graph() -> None:
    a = np.random.default_rng(5).standard_normal((3, 3))
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(a.copy(), requires_grad=True)
        y = x * x
        y.diagonal().mul_(x[0])
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)
        (g * g).sum().backward()
        grads.append(np.asarray(x.grad.detach().numpy()))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


# ---- errors, as torch raises them ----------------------------------------------------------------------------
def _raises_like_torch(fn: Callable, match: str) -> None:
    for lib in (ember, torch):
        with pytest.raises(RuntimeError, match=match):
            fn(lib)


def test_leaf_and_view_of_leaf_errors() -> None:
    _raises_like_torch(lambda lib: lib.randn(3, requires_grad=True).add_(1),
                       "a leaf Variable that requires grad is being used in an in-place operation")
    _raises_like_torch(lambda lib: lib.randn(3, 2, requires_grad=True)[0].mul_(2),
                       "a view of a leaf Variable that requires grad is being used in an in-place operation")

    def setitem(lib: Any) -> None:
        x = lib.randn(3, 2, requires_grad=True)
        x[0] = 1.0

    _raises_like_torch(setitem, "leaf Variable that requires grad is being used in an in-place operation")


def test_no_grad_writes_to_leaf_views_are_allowed() -> None:
    for lib in (ember, torch):
        x = lib.ones(3, 2, requires_grad=True)
        with lib.no_grad():
            x[0].mul_(3)
            x.t()[1] = 5.0
        assert x.is_leaf and x.requires_grad
        np.testing.assert_allclose(x.detach().numpy(), [[3, 5], [1, 5], [1, 5]])


def test_expanded_view_error() -> None:
    _raises_like_torch(lambda lib: (lib.randn(3, requires_grad=True) * 1).expand(2, 3).mul_(2),
                       "more than one element of the written-to tensor refers to a single memory location")
    _raises_like_torch(lambda lib: lib.zeros(3).expand(2, 3).add_(1),
                       "more than one element of the written-to tensor refers to a single memory location")


def test_multi_output_view_error() -> None:
    def chunk(lib: Any) -> None:
        a, _ = (lib.randn(4, requires_grad=True) * 1).chunk(2)
        a.mul_(2)

    def unbind(lib: Any) -> None:
        rows = (lib.randn(2, 3, requires_grad=True) * 1).unbind(0)
        rows[1].add_(1)

    _raises_like_torch(chunk, "Output 0 of Split is a view and is being modified inplace")
    _raises_like_torch(unbind, "Output 1 of Unbind is a view and is being modified inplace")


def test_view_made_under_no_grad_error() -> None:
    def fn(lib: Any) -> None:
        y = lib.randn(3, 2, requires_grad=True) * 1
        with lib.no_grad():
            v = y[0]
        v.mul_(2)

    _raises_like_torch(fn, "A view was created in no_grad mode and is being modified inplace with grad mode enabled")
