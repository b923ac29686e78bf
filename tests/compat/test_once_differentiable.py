"""``torch.autograd.function.once_differentiable`` on a custom Function's backward, against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _cube_function(lib):
    from_module = __import__(f"{lib.__name__}.autograd.function", fromlist=["once_differentiable"])

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @from_module.once_differentiable
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            assert not lib.is_grad_enabled()  # the decorator's point: backward runs without recording
            return 3 * x ** 2 * grad

    return Cube


@pytest.mark.parametrize("values", [[-2.0, 0.0, 0.5, 3.0], [1e-20, -1e20, 1.0, 2.0]])
def test_gradients_match_torch(values) -> None:
    grads = []
    for lib in (torch, ember):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        (_cube_function(lib).apply(x) * lib.tensor([1.0, 2.0, 3.0, 4.0], dtype=lib.float64)).sum().backward()
        grads.append(np.asarray(x.grad.tolist()))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_backward_result_does_not_record() -> None:
    x = ember.tensor([2.0], requires_grad=True)
    (g,) = ember.autograd.grad(_cube_function(ember).apply(x).sum(), x, create_graph=True)
    assert g.tolist() == [12.0] and not g.requires_grad
