"""``torch.linalg``: the linear algebra ember has, under PyTorch's names (inv, det, slogdet, solve, cholesky,
matrix_exp, matrix_power, norms, cross, multi_dot, vecdot). Differentiable (see
:mod:`ember.surface.special_linalg`).

Example:
    >>> import ember
    >>> ember.linalg.solve(ember.tensor([[2.0, 0.0], [0.0, 4.0]]), ember.tensor([2.0, 2.0])).tolist()
    [1.0, 0.5]
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.creation import zeros
from ember.dtypes import int32
from ember.ops import extra_math, linalg, reductions
from ember.ops.elementwise import sqrt
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["inv", "det", "slogdet", "solve", "cholesky", "matrix_exp", "matrix_power", "norm", "vector_norm",
           "matrix_norm", "cross", "multi_dot", "vecdot", "diagonal", "matmul", "inv_ex", "cholesky_ex"]

inv = _sl.inverse
det = _sl.det
slogdet = _sl.slogdet
matrix_exp = _sl.matrix_exp
matrix_power = _functions.matrix_power
matmul = linalg.matmul


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    return _sl.cholesky(A, upper=upper)


def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
    """X with A X = B (or X A = B when ``left=False``); a vector B is one right-hand side."""
    inv_a = _sl.inverse(A)
    if not left:
        return B @ inv_a
    if B.ndim == A.ndim - 1:
        return (inv_a @ B.unsqueeze(-1)).squeeze(-1)
    return inv_a @ B


def inv_ex(A: Tensor, *, check_errors: bool = False) -> tuple:
    return _sl.inverse(A), zeros(A.shape[:-2], dtype=int32)


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> tuple:
    return cholesky(A, upper=upper), zeros(A.shape[:-2], dtype=int32)


def vector_norm(x: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    x = x if dtype is None else x.to(dtype)
    if dim is None:
        x, dim = x.reshape(-1), 0
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    return reductions.norm(x, p=ord, dim=dim, keepdim=keepdim)


def matrix_norm(A: Tensor, ord: Any = "fro", dim: tuple = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    A = A if dtype is None else A.to(dtype)
    if ord == "fro":
        return sqrt((A * A).sum(dim=dim, keepdim=keepdim))
    if ord in (1, -1, float("inf"), float("-inf")):
        sum_dim = dim[0] if ord in (1, -1) else dim[1]
        other = dim[1] if ord in (1, -1) else dim[0]
        sums = A.abs().sum(dim=sum_dim, keepdim=True)
        out = sums.amax(dim=other, keepdim=True) if ord in (1, float("inf")) else sums.amin(dim=other, keepdim=True)
        return out if keepdim else out.squeeze(max(dim[0] % A.ndim, dim[1] % A.ndim)).squeeze(
            min(dim[0] % A.ndim, dim[1] % A.ndim))
    raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} (nuclear/spectral norms need an SVD, which ember "
                              "does not have)")


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    if isinstance(ord, str) or (dim is not None and isinstance(dim, (tuple, list)) and len(dim) == 2):
        return matrix_norm(A, "fro" if ord is None else ord, tuple(dim) if dim is not None else (-2, -1), keepdim,
                           dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    return _functions.cross(input, other, dim=dim)


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0], tensors[-1]
    if first.ndim == 1:
        tensors[0] = first.unsqueeze(0)
    if last.ndim == 1:
        tensors[-1] = last.unsqueeze(-1)
    out = _functions.chain_matmul(*tensors)
    if first.ndim == 1:
        out = out.squeeze(0)
    if last.ndim == 1:
        out = out.squeeze(-1)
    return out


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    return (x * y).sum(dim=dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    return extra_math.diagonal(A, offset, dim1, dim2)
