"""Cholesky factorization and triangular solves as differentiable ember functions, for MultivariateNormal.

Forward values come from the tensor's array namespace (``xp.linalg``); the backward passes are
written in ember ops (PyTorch's formulas), so gradients flow to covariance, precision and
scale_tril parameters. When ``ember.linalg`` lands (issue 16), these become aliases of it.

Example:
    >>> import ember
    >>> from ember.distributions._linalg import cholesky
    >>> cholesky(ember.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
"""
from __future__ import annotations

from typing import Any

from ember import creation
from ember.ops.extra_math import diag_embed
from ember.autograd import Function
from ember.tensor import Tensor


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _wrap(array: Any, like: Tensor) -> Tensor:
    return Tensor._make(array.astype(like._data.dtype, copy=False), like.device, False)


class _SolveTriangular(Function):
    """X = A^-1 B for a lower (or upper) triangular A of shape (..., n, n) and B (..., n, k), same batch."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor, upper: bool) -> Tensor:
        xp = a.device.xp
        a_data = a.detach()._data
        mask = xp.triu(xp.ones(a_data.shape[-2:], dtype=bool)) if upper else xp.tril(xp.ones(a_data.shape[-2:], dtype=bool))
        x = _wrap(xp.linalg.solve(xp.where(mask, a_data, 0), b.detach()._data), a)
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        a, x = ctx.saved_tensors
        grad_b = _SolveTriangular.apply(_mT(a), grad, not ctx.upper)  # A^-T g
        grad_a = -(grad_b @ _mT(x))
        grad_a = grad_a.triu() if ctx.upper else grad_a.tril()
        return grad_a, grad_b, None


class _Cholesky(Function):
    """L with A = L L^T for symmetric positive-definite A (..., n, n)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor) -> Tensor:
        xp = a.device.xp
        try:
            lower = xp.linalg.cholesky(a.detach()._data)
        except Exception as error:  # numpy.linalg.LinAlgError
            raise RuntimeError(f"cholesky: the input of shape {tuple(a.shape)} is not positive-definite "
                               f"({error}); check that the covariance/precision matrix is symmetric "
                               "positive-definite") from None
        out = _wrap(lower, a)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (lower,) = ctx.saved_tensors
        # PyTorch's formula: gA = L^-T Phi(L^T gL) L^-1, symmetrized; Phi keeps the lower triangle, halves the diagonal.
        phi = (_mT(lower) @ grad).tril()
        phi = phi - 0.5 * diag_embed(phi.diagonal(dim1=-2, dim2=-1))
        eye = creation.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand(lower.shape)
        lower_inv = _SolveTriangular.apply(lower, eye, False)
        grad_a = _mT(lower_inv) @ phi @ lower_inv
        return 0.5 * (grad_a + _mT(grad_a))


def cholesky(a: Tensor) -> Tensor:
    """Lower Cholesky factor of symmetric positive-definite ``a`` (batched), differentiable."""
    return _Cholesky.apply(a)


def solve_triangular(a: Tensor, b: Tensor, upper: bool = False) -> Tensor:
    """``a^-1 b`` for triangular ``a`` (..., n, n) and ``b`` (..., n, k); batch dims broadcast."""
    import numpy as np

    batch = np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    a = a.expand(batch + tuple(a.shape[-2:])) if tuple(a.shape[:-2]) != batch else a
    b = b.expand(batch + tuple(b.shape[-2:])) if tuple(b.shape[:-2]) != batch else b
    return _SolveTriangular.apply(a, b, upper)
