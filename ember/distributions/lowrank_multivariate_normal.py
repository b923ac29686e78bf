"""``LowRankMultivariateNormal``: a Gaussian whose covariance is W W^T + diag(D) (W of shape n x m, m << n).

Nothing of size n x n is factored: the log-determinant uses the matrix determinant lemma and the
Mahalanobis term the Woodbury identity, both through the m x m "capacitance" C = I + W^T D^-1 W:

    log|W W^T + D| = log|C| + sum log D
    (W W^T + D)^-1 = D^-1 - A^T A,   A = L_C^-1 W^T D^-1   (L_C the Cholesky factor of C)

The KL divergences with itself and with MultivariateNormal (both directions) are registered here.

Example:
    >>> import ember
    >>> from ember.distributions import LowRankMultivariateNormal
    >>> d = LowRankMultivariateNormal(ember.zeros(2), ember.tensor([[1.0], [0.0]]), ember.ones(2))
    >>> d.covariance_matrix.tolist()
    [[2.0, 0.0], [0.0, 1.0]]
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import creation
from ember.ops.extra_math import diag_embed
from ember.distributions import constraints
from ember.distributions._linalg import cholesky, solve_triangular
from ember.distributions.continuous import _noise
from ember.distributions.distribution import Distribution
from ember.distributions.kl import register_kl
from ember.distributions.multivariate_normal import MultivariateNormal, _batch_mahalanobis
from ember.distributions.utils import lazy_property
from ember.tensor import Size, Tensor

__all__ = ["LowRankMultivariateNormal"]


def _mT(x: Tensor) -> Tensor:
    return x.transpose(-2, -1)


def _eye_like(n: int, like: Tensor) -> Tensor:
    return creation.eye(n, dtype=like.dtype, device=like.device)


def _capacitance_tril(factor: Tensor, diag: Tensor) -> Tensor:
    """Cholesky factor of I + W^T D^-1 W (..., m, m)."""
    wt_dinv = _mT(factor) / diag.unsqueeze(-2)
    return cholesky(wt_dinv @ factor + _eye_like(factor.shape[-1], factor))


def _lowrank_logdet(factor: Tensor, diag: Tensor, cap_tril: Tensor) -> Tensor:
    return 2 * cap_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + diag.log().sum(-1)


def _woodbury_a(factor: Tensor, diag: Tensor, cap_tril: Tensor) -> Tensor:
    """A = L_C^-1 W^T D^-1 (..., m, n), so that the precision is D^-1 - A^T A."""
    return solve_triangular(cap_tril, _mT(factor) / diag.unsqueeze(-2), upper=False)


def _lowrank_mahalanobis(factor: Tensor, diag: Tensor, x: Tensor, cap_tril: Tensor) -> Tensor:
    """x^T (W W^T + D)^-1 x = x^T D^-1 x - |L_C^-1 W^T D^-1 x|^2 over the last dimension."""
    wt_dinv_x = ((_mT(factor) / diag.unsqueeze(-2)) @ x.unsqueeze(-1)).squeeze(-1)
    return (x.pow(2) / diag).sum(-1) - _batch_mahalanobis(cap_tril, wt_dinv_x)


def _frobenius2(x: Tensor) -> Tensor:
    """trace(X X^T) over the last two dimensions."""
    return x.pow(2).sum((-2, -1))


def _broadcast_batch(*tensors_and_tails: tuple) -> list:
    """Expand each (tensor, number of trailing core dims) to the broadcast batch shape."""
    batch = np.broadcast_shapes(*(tuple(t.shape[:t.dim() - k]) for t, k in tensors_and_tails))
    return [t.expand(batch + tuple(t.shape[t.dim() - k:])) for t, k in tensors_and_tails]


class LowRankMultivariateNormal(Distribution):
    """Gaussian with mean ``loc`` (..., n) and covariance cov_factor cov_factor^T + diag(cov_diag).

    Example:
        >>> import ember
        >>> d = LowRankMultivariateNormal(ember.zeros(3), ember.ones(3, 1), ember.ones(3))
        >>> tuple(d.rsample((4,)).shape)
        (4, 3)
    """

    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor, validate_args: bool | None = None) -> None:
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m, "
                             f"got {tuple(cov_factor.shape)}")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}, got {tuple(cov_diag.shape)}")
        try:
            shape = np.broadcast_shapes(tuple(loc.shape) + (1,), tuple(cov_factor.shape), tuple(cov_diag.shape) + (1,))
        except ValueError:
            raise ValueError(f"Incompatible batch shapes: loc {tuple(loc.shape)}, cov_factor {tuple(cov_factor.shape)}, "
                             f"cov_diag {tuple(cov_diag.shape)}") from None
        self.loc = loc.expand(shape[:-1])
        self.cov_factor = cov_factor.expand(shape)
        self.cov_diag = cov_diag.expand(shape[:-1])
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        # validate first: a non-positive cov_diag would otherwise fail inside the Cholesky factorization
        super().__init__(shape[:-2], event_shape, validate_args=validate_args)
        self._capacitance_tril = _capacitance_tril(cov_factor, cov_diag)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(LowRankMultivariateNormal, _instance)
        batch_shape = Size(batch_shape)
        loc_shape = tuple(batch_shape) + tuple(self.event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _full(self, x: Tensor, core: tuple) -> Tensor:
        return x.expand(tuple(self._batch_shape) + core)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @lazy_property
    def variance(self) -> Tensor:
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return self._full(w.pow(2).sum(-1) + d, tuple(self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        # W W^T + D = D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2: factor the bracket, scale its rows by D^1/2.
        n = self._event_shape[0]
        sqrt_d = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        scaled = self._unbroadcasted_cov_factor / sqrt_d
        lower = sqrt_d * cholesky(scaled @ _mT(scaled) + _eye_like(n, scaled))
        return self._full(lower, (n, n))

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        w = self._unbroadcasted_cov_factor
        n = self._event_shape[0]
        return self._full(w @ _mT(w) + diag_embed(self._unbroadcasted_cov_diag), (n, n))

    @lazy_property
    def precision_matrix(self) -> Tensor:
        a = _woodbury_a(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril)
        n = self._event_shape[0]
        return self._full(diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - _mT(a) @ a, (n, n))

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        eps_w = _noise("normal", Size(shape[:-1] + tuple(self.cov_factor.shape[-1:])), self.loc)
        eps_d = _noise("normal", Size(shape), self.loc)
        low_rank = (self._unbroadcasted_cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1)
        return self.loc + low_rank + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def _logdet(self) -> Tensor:
        return _lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, self._capacitance_tril)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = _lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag, value - self.loc,
                                 self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._logdet() + m)

    def entropy(self) -> Tensor:
        value = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._logdet())
        return value.expand(tuple(self._batch_shape)) if len(self._batch_shape) else value


def _check_events(p: Distribution, q: Distribution) -> None:
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two (Low Rank) Multivariate Normals with different event shapes "
                         f"cannot be computed: {tuple(p.event_shape)} vs {tuple(q.event_shape)}")


def _mvn_logdet(d: MultivariateNormal) -> Tensor:
    return 2 * d._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


def _gaussian_kl(logdet_p: Tensor, logdet_q: Tensor, trace: Tensor, mahalanobis: Tensor, n: int) -> Tensor:
    """0.5 (log|S_q| - log|S_p| + tr(S_q^-1 S_p) + (m_q - m_p)^T S_q^-1 (m_q - m_p) - n)."""
    return 0.5 * (logdet_q - logdet_p + trace + mahalanobis - n)


def _trace_lowrank_q(q: LowRankMultivariateNormal, root: Tensor, extra_diag: Tensor | None = None) -> Tensor:
    """tr(S_q^-1 (R R^T + diag(extra_diag))) with S_q^-1 = D_q^-1 - A^T A."""
    wq, dq = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    a = _woodbury_a(wq, dq, q._capacitance_tril)
    trace = _frobenius2(root * dq.rsqrt().unsqueeze(-1)) - _frobenius2(a @ root)
    if extra_diag is not None:
        trace = trace + (extra_diag / dq).sum(-1) - _frobenius2(a * extra_diag.sqrt().unsqueeze(-2))
    return trace


def _q_lowrank_mahalanobis(p: Distribution, q: LowRankMultivariateNormal) -> Tensor:
    return _lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, q.loc - p.loc,
                                q._capacitance_tril)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_events(p, q)
    trace = _trace_lowrank_q(q, p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag)
    return _gaussian_kl(p._logdet(), q._logdet(), trace, _q_lowrank_mahalanobis(p, q), p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    _check_events(p, q)
    trace = _trace_lowrank_q(q, p._unbroadcasted_scale_tril)
    return _gaussian_kl(_mvn_logdet(p), q._logdet(), trace, _q_lowrank_mahalanobis(p, q), p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    _check_events(p, q)
    n = p.event_shape[0]
    q_tril, p_factor, p_sqrt_diag = _broadcast_batch((q._unbroadcasted_scale_tril, 2), (p._unbroadcasted_cov_factor, 2),
                                                     (diag_embed(p._unbroadcasted_cov_diag.sqrt()), 2))
    trace = (_frobenius2(solve_triangular(q_tril, p_factor, upper=False))
             + _frobenius2(solve_triangular(q_tril, p_sqrt_diag, upper=False)))
    mahalanobis = _batch_mahalanobis(q._unbroadcasted_scale_tril, q.loc - p.loc)
    return _gaussian_kl(p._logdet(), _mvn_logdet(q), trace, mahalanobis, n)
