"""Custom ``autograd.Function`` edge rules against torch 2.13: ``mark_dirty`` (the input comes back as itself with
the Function as its history; a view's base gets CopySlices), ``set_materialize_grads(False)`` on a two-output
Function, and the errors torch raises (dirty leaf, dirty input not returned, a gradient for a non-tensor input,
``save_for_backward`` of a non-tensor, calling an instance). Found by the autograd audit (func24)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _double_in_place(lib, return_copy: bool = False):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x * 1 if return_copy else x

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return Double


def _case_dirty(lib):
    x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
    a = x.clone()
    y = _double_in_place(lib).apply(a)
    same, name = y is a, a.grad_fn.name()
    (y * y).sum().backward()
    return same, name, x.grad.numpy().tolist()


def _case_dirty_view(lib):
    x = lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64, requires_grad=True)
    a = x.clone()
    _double_in_place(lib).apply(a[:2])
    name = a.grad_fn.name()
    (a * a).sum().backward()
    return name, x.grad.numpy().tolist()


def test_mark_dirty_returns_the_input_with_new_history() -> None:
    assert _case_dirty(ember) == _case_dirty(torch) == (True, "DoubleBackward", [8.0, 16.0, 24.0])


def test_mark_dirty_view_gives_base_copyslices() -> None:
    # d/dx sum(a*a) with a[:2] = 2 * x[:2]: 2 * a * 2 = 8x on the doubled part (ember gave 4x before: no rebase)
    want = ("torch::autograd::CopySlices", [8.0, 16.0, 6.0, 8.0])
    assert _case_dirty_view(torch) == want
    assert _case_dirty_view(ember) == want


def _materialize_false(lib):
    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + (gb * 3 if gb is not None else 100)  # 100 marks "gb arrived as None"
    x = lib.ones(3, dtype=lib.float64, requires_grad=True)
    a, _ = Two.apply(x)
    a.sum().backward()
    return x.grad.numpy().tolist()


def test_set_materialize_grads_false_keeps_none() -> None:
    assert _materialize_false(ember) == _materialize_false(torch) == [102.0, 102.0, 102.0]


def _err_dirty_leaf(lib):
    _double_in_place(lib).apply(lib.ones(3, requires_grad=True))


def _err_dirty_not_returned(lib):
    _double_in_place(lib, return_copy=True).apply(lib.ones(3, requires_grad=True).clone())


def _err_grad_for_number(lib):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g, g
    Scale.apply(lib.ones(3, requires_grad=True), 2.0).sum().backward()


def _err_save_int(lib):
    class Save(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g
    Save.apply(lib.ones(3, requires_grad=True))


def _err_instance_call(lib):
    class Plain(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g
    Plain()(lib.ones(3, requires_grad=True))


@pytest.mark.parametrize("case,message", [
    (_err_dirty_leaf, "leaf Variable that requires grad"),
    (_err_dirty_not_returned, "Some elements marked as dirty during the forward method were not returned"),
    (_err_grad_for_number, "returned a gradient different than None at position 2, but the corresponding forward"),
    (_err_save_int, "save_for_backward can only save variables, but argument 1 is of type int"),
    (_err_instance_call, "Legacy autograd function with non-static forward method is deprecated"),
])
def test_errors_as_torch(case, message: str) -> None:
    with pytest.raises(Exception, match=message) as want:
        case(torch)
    with pytest.raises(want.type, match=message):
        case(ember)


def test_mark_dirty_gradient_matches_finite_differences() -> None:
    """Independent of torch: f(x) = sum((2 * clone(x)[:2] in place)**2) + sum(x[2:]**2)."""
    x0 = np.array([0.5, -1.5, 2.0, 3.0])

    def f(v: np.ndarray) -> float:
        w = v.copy()
        w[:2] *= 2
        return float((w * w).sum())
    eps = 1e-6
    fd = [(f(x0 + eps * e) - f(x0 - eps * e)) / (2 * eps) for e in np.eye(4)]
    x = ember.tensor(x0, requires_grad=True)
    a = x.clone()
    _double_in_place(ember).apply(a[:2])
    (a * a).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-7)
