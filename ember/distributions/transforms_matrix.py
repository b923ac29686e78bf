"""Transforms onto matrix sets: CorrCholeskyTransform (R^(D(D-1)/2) -> Cholesky factors of correlation
matrices), LowerCholeskyTransform (square matrices -> lower triangular with positive diagonal) and
PositiveDefiniteTransform (square matrices -> positive-definite matrices). Re-exported by
:mod:`ember.distributions.transforms`.

CorrCholeskyTransform maps each entry into (-1, 1) by tanh, places the values below the diagonal
row by row, then scales row i so its squared entries stick-break the unit norm: entry (i, j) is
r_ij sqrt(1 - sum_{k<j} y_ik^2), and the diagonal takes what is left. Its log-det is that of tanh
plus 1/2 sum log(1 - cumulative squared row sums) below the second diagonal.

Example:
    >>> import ember
    >>> from ember.distributions.transforms import CorrCholeskyTransform
    >>> L = CorrCholeskyTransform()(ember.tensor([0.3, -0.5, 1.2]))
    >>> [round(v, 6) for v in (L * L).sum(-1).tolist()]
    [1.0, 1.0, 1.0]
"""
from __future__ import annotations

import math

from ember import creation
from ember.ops.extra_math import diag_embed
import ember.nn.functional as F
from ember.distributions import constraints
from ember.distributions._linalg import cholesky
from ember.distributions.transform_base import Transform
from ember.distributions.utils import finfo_eps, tril_matrix_to_vec, vec_to_tril_matrix
from ember.tensor import Tensor

__all__ = ["CorrCholeskyTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"]


class CorrCholeskyTransform(Transform):
    """Unconstrained vector of length D(D-1)/2 -> lower Cholesky factor of a D x D correlation matrix."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CorrCholeskyTransform)

    def __hash__(self) -> int:
        return hash(CorrCholeskyTransform)

    def _call(self, x: Tensor) -> Tensor:
        eps = finfo_eps(x.dtype)
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + eps, max=1 - eps), diag=-1)
        # the stick left before entry (i, j): prod_{k<j} sqrt(1 - r_ik^2)
        left = (1 - r.pow(2)).sqrt().cumprod(-1)
        eye = creation.eye(r.shape[-1], dtype=r.dtype, device=r.device)
        return (r + eye) * F.pad(left[..., :-1], [1, 0], value=1.0)

    def _inverse(self, y: Tensor) -> Tensor:
        left = 1 - (y * y).cumsum(-1)
        left_before = F.pad(left[..., :-1], [1, 0], value=1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(left_before, diag=-1).sqrt()
        return 0.5 * (t.log1p() - (-t).log1p())  # atanh

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        left = 1 - (y * y).cumsum(-1)
        stick_breaking = 0.5 * tril_matrix_to_vec(left, diag=-2).log().sum(-1)
        tanh = -2 * (x + F.softplus(-2 * x) - math.log(2.0)).sum(-1)  # log(1 - tanh^2 x), stably
        return stick_breaking + tanh

    def forward_shape(self, shape: tuple) -> tuple:
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError(f"Input is not a flattened lower-diagonal number: last dimension {n}")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape: tuple) -> tuple:
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError(f"Input is not square: {tuple(shape[-2:])}")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


class LowerCholeskyTransform(Transform):
    """Keep the strictly lower triangle, exponentiate the diagonal (not bijective onto all matrices; no log-det)."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    def __hash__(self) -> int:
        return hash(LowerCholeskyTransform)

    def _call(self, x: Tensor) -> Tensor:
        return x.tril(-1) + diag_embed(x.diagonal(dim1=-2, dim2=-1).exp())

    def _inverse(self, y: Tensor) -> Tensor:
        return y.tril(-1) + diag_embed(y.diagonal(dim1=-2, dim2=-1).log())


class PositiveDefiniteTransform(Transform):
    """L L^T for L = LowerCholeskyTransform()(x); the inverse takes the Cholesky factor."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    def __hash__(self) -> int:
        return hash(PositiveDefiniteTransform)

    def _call(self, x: Tensor) -> Tensor:
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.transpose(-2, -1)

    def _inverse(self, y: Tensor) -> Tensor:
        return LowerCholeskyTransform().inv(cholesky(y))
