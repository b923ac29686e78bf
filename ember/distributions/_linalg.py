"""Cholesky factorization and triangular solves for the distributions: aliases of ``ember.linalg``'s op records.

They were autograd Functions here until ``ember.linalg`` gained op records (issue 16); the records
have PyTorch's backward formulas (differentiable again), broadcast batch dimensions and raise
``ember.linalg.LinAlgError`` (a RuntimeError) naming the failing leading minor.

Example:
    >>> import ember
    >>> from ember.distributions._linalg import cholesky
    >>> cholesky(ember.tensor([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
"""
from __future__ import annotations

from ember import linalg
from ember.tensor import Tensor

cholesky = linalg.cholesky


def solve_triangular(a: Tensor, b: Tensor, upper: bool = False) -> Tensor:
    """``a^-1 b`` for triangular ``a`` (..., n, n) and ``b`` (..., n, k); batch dims broadcast."""
    return linalg.solve_triangular(a, b, upper=upper)
