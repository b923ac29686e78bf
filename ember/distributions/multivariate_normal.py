"""``MultivariateNormal``: a Gaussian over vectors, given by exactly one of covariance_matrix,
precision_matrix or scale_tril (lower-triangular L with covariance L L^T), with PyTorch's semantics.

Example:
    >>> import ember
    >>> from ember.distributions import MultivariateNormal
    >>> d = MultivariateNormal(ember.zeros(2), covariance_matrix=ember.eye(2))
    >>> tuple(d.sample((3,)).shape), round(d.log_prob(ember.zeros(2)).item(), 4)
    ((3, 2), -1.8379)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import creation
from ember.distributions import constraints
from ember.distributions._linalg import cholesky, solve_triangular
from ember.distributions.continuous import _noise
from ember.distributions.distribution import Distribution
from ember.distributions.kl import register_kl
from ember.distributions.utils import lazy_property
from ember.tensor import Size, Tensor

__all__ = ["MultivariateNormal"]


def _batch_mahalanobis(lower: Tensor, diff: Tensor) -> Tensor:
    """diff^T (L L^T)^-1 diff over the last dimension, broadcasting L's and diff's batch dims."""
    solved = solve_triangular(lower, diff.unsqueeze(-1), upper=False).squeeze(-1)
    return solved.pow(2).sum(-1)


def _half_log_det(lower: Tensor) -> Tensor:
    return lower.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _precision_to_scale_tril(precision: Tensor) -> Tensor:
    """L with L L^T = P^-1, lower triangular, without inverting P (PyTorch's flip trick)."""
    flipped = cholesky(precision.flip((-2, -1)))
    lower_inv = flipped.flip((-2, -1)).transpose(-2, -1)
    eye = creation.eye(precision.shape[-1], dtype=precision.dtype, device=precision.device).expand(precision.shape)
    return solve_triangular(lower_inv, eye, upper=False)


class MultivariateNormal(Distribution):
    """Gaussian with mean ``loc`` (..., n) and one of ``covariance_matrix``/``precision_matrix``/``scale_tril``."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None, precision_matrix: Tensor | None = None,
                 scale_tril: Tensor | None = None, validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        name = "scale_tril" if scale_tril is not None else "covariance_matrix" if covariance_matrix is not None \
            else "precision_matrix"
        if given.dim() < 2:
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = np.broadcast_shapes(tuple(given.shape[:-2]), tuple(loc.shape[:-1]))
        event_shape = tuple(loc.shape[-1:])
        setattr(self, name, given.expand(batch_shape + (-1, -1)))
        self.loc = loc.expand(batch_shape + (-1,))
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        cov_shape = loc_shape + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(cov_shape))
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def scale_tril(self) -> Tensor:
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.transpose(-2, -1)).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self) -> Tensor:
        lower = self._unbroadcasted_scale_tril
        eye = creation.eye(lower.shape[-1], dtype=lower.dtype, device=lower.device).expand(lower.shape)
        lower_inv = solve_triangular(lower, eye, upper=False)
        return (lower_inv.transpose(-2, -1) @ lower_inv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) + tuple(self._event_shape))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _noise("normal", shape, self.loc)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        mahalanobis = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + mahalanobis) - _half_log_det(self._unbroadcasted_scale_tril)

    def entropy(self) -> Tensor:
        n = self._event_shape[0]
        value = 0.5 * n * (1.0 + math.log(2 * math.pi)) + _half_log_det(self._unbroadcasted_scale_tril)
        return value.expand(tuple(self._batch_shape)) if len(self._batch_shape) else value


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes cannot be computed")
    half_term1 = _half_log_det(q._unbroadcasted_scale_tril) - _half_log_det(p._unbroadcasted_scale_tril)
    n = p.event_shape[0]
    solved = solve_triangular(q._unbroadcasted_scale_tril, p._unbroadcasted_scale_tril, upper=False)
    term2 = solved.pow(2).sum((-2, -1))  # trace(Sigma_q^-1 Sigma_p)
    term3 = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)
