"""Families on [0, 1] and on the simplex: ContinuousBernoulli, Kumaraswamy, LogisticNormal.

ContinuousBernoulli (Loaiza-Ganem & Cunningham 2019) has density C(p) p^x (1-p)^(1-x) on [0, 1]; its
normalizer C(p) = 2 atanh(1 - 2p) / (1 - 2p) is 0/0 at p = 1/2, so inside ``lims`` (PyTorch's
default (0.499, 0.501)) log C, the mean and the variance use their Taylor series in (p - 1/2)^2,
derived from atanh(u)/u = 1 + u^2/3 + u^4/5 + ... with u = 1 - 2p. Sampling inverts the CDF, so
``rsample`` carries gradients to ``probs``/``logits``.

Example:
    >>> import ember
    >>> from ember.distributions import ContinuousBernoulli, Kumaraswamy
    >>> round(ContinuousBernoulli(probs=ember.tensor(0.5)).mean.item(), 6)
    0.5
    >>> round(Kumaraswamy(1.0, 1.0).log_prob(ember.tensor(0.3)).item(), 6)  # Uniform(0, 1)
    0.0
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ember.creation import full_like, ones_like, zeros_like
from ember.ops.elementwise import exp, log, log1p, where
from ember.ops.extra_math import expm1
from ember.ops.special_ops import digamma, lgamma
import ember.nn.functional as F
from ember.distributions import constraints
from ember.distributions.continuous import Normal, Uniform, _noise
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.transforms import AffineTransform, PowerTransform, StickBreakingTransform
from ember.distributions.utils import (broadcast_all, expand_cached_parameters, clamp_probs, lazy_property,
    logits_to_probs, probs_to_logits)
from ember.tensor import Size, Tensor

__all__ = ["ContinuousBernoulli", "Kumaraswamy", "LogisticNormal"]

_EULER = float(np.euler_gamma)


class ContinuousBernoulli(ExponentialFamily):
    """Continuous Bernoulli on [0, 1], given ``probs`` in (0, 1) or real ``logits`` (not both).

    ``probs`` is not a probability here (the mean is not ``probs``); the names follow Bernoulli's.

    Example:
        >>> import ember
        >>> d = ContinuousBernoulli(logits=ember.tensor([0.0, 2.0]))
        >>> tuple(d.rsample((3,)).shape)
        (3, 2)
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    _mean_carrier_measure = 0
    has_rsample = True

    def __init__(self, probs: Any = None, logits: Any = None, lims: tuple = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            # probs are clamped away from 0 and 1 below, so they are checked before the clamp
            # (PyTorch checks them only when validate_args is passed explicitly; ember whenever validation is on).
            validate = self._validate_args if validate_args is None else validate_args
            if validate and not bool(constraints.unit_interval.check(param).all()):
                raise ValueError(f"Expected parameter probs ({type(param).__name__} of shape {tuple(param.shape)}) "
                                 f"of distribution ContinuousBernoulli to satisfy the constraint "
                                 f"{constraints.unit_interval!r}, but found invalid values:\n{param}")
            self.probs = param = clamp_probs(param)
        else:
            self.logits = param
        self._param = param
        self._lims = lims
        super().__init__(Size() if isinstance(given, numbers.Number) else param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = Size(batch_shape)
        expand_cached_parameters(self, new, ("probs", "logits"), tuple(batch_shape))
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    @property
    def param_shape(self) -> Size:
        return self._param.shape

    # ---- the 0/0 region around probs = 1/2 -------------------------------------------------------
    def _stable(self) -> Tensor:
        """True where probs is outside (lims[0], lims[1]]: the closed forms are accurate there."""
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        """probs where stable, else lims[0] (so the unused closed-form branch stays finite)."""
        return where(self._stable(), self.probs, full_like(self.probs, self._lims[0]))

    def _log_norm(self) -> Tensor:
        """log C(p) = log|log(1-p) - log p| - log|1-2p|; near 1/2, log 2 + 4x/3 + 104x^2/45 with x = (p-1/2)^2."""
        p = self._cut_probs()
        closed = log((log1p(-p) - log(p)).abs()) - log((1.0 - 2.0 * p).abs())
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._stable(), closed, taylor)

    @property
    def mean(self) -> Tensor:
        p = self._cut_probs()
        closed = p / (2.0 * p - 1.0) + 1.0 / (log1p(-p) - log(p))
        y = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * y.pow(2)) * y
        return where(self._stable(), closed, taylor)

    @property
    def variance(self) -> Tensor:
        p = self._cut_probs()
        closed = p * (p - 1.0) / (1.0 - 2.0 * p).pow(2) + 1.0 / (log1p(-p) - log(p)).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._stable(), closed, taylor)

    @property
    def stddev(self) -> Tensor:
        return self.variance.sqrt()

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        return self.icdf(_noise("uniform", self._extended_shape(sample_shape), self.probs))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none") + self._log_norm()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        p = self._cut_probs()
        closed = (p.pow(value) * (1.0 - p).pow(1.0 - value) + p - 1.0) / (2.0 * p - 1.0)
        inside = where(self._stable(), closed, value)  # at p = 1/2 the density is uniform
        return where(value <= 0.0, zeros_like(inside), where(value >= 1.0, ones_like(inside), inside))

    def icdf(self, value: Tensor) -> Tensor:
        p = self._cut_probs()
        closed = (log1p(-p + value * (2.0 * p - 1.0)) - log1p(-p)) / (log(p) - log1p(-p))
        return where(self._stable(), closed, value)

    def entropy(self) -> Tensor:
        log_q, log_p = log1p(-self.probs), log(self.probs)
        return self.mean * (log_q - log_p) - self._log_norm() - log_q

    @property
    def _natural_params(self) -> tuple:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """F(eta) = log((e^eta - 1) / eta); near 0 (the same lims, shifted by 1/2) its series eta/2 + eta^2/24 - eta^4/2880."""
        stable = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = where(stable, x, full_like(x, self._lims[0] - 0.5))
        closed = log(expm1(cut).abs()) - log(cut.abs())
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(stable, closed, taylor)


def _kumaraswamy_moment(a: Tensor, b: Tensor, n: int) -> Tensor:
    """E[X^n] = b B(1 + n/a, b)."""
    arg = 1.0 + n / a
    return b * exp(lgamma(arg) + lgamma(b) - lgamma(arg + b))


class Kumaraswamy(TransformedDistribution):
    """Kumaraswamy(a, b) on (0, 1): density a b x^(a-1) (1 - x^a)^(b-1); X = (1 - U^(1/b))^(1/a).

    Example:
        >>> import ember
        >>> round(Kumaraswamy(2.0, 3.0).mean.item(), 4)
        0.4571
    """

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any, validate_args: bool | None = None) -> None:
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(zeros_like(self.concentration0), ones_like(self.concentration0), validate_args=validate_args)
        super().__init__(base, self._transforms(), validate_args=validate_args)

    def _transforms(self) -> list:
        return [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                PowerTransform(exponent=self.concentration1.reciprocal())]

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Kumaraswamy, _instance)
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        new = TransformedDistribution.expand(self, batch_shape, _instance=new)
        new.transforms = new._transforms()  # the exponents follow the expanded parameters
        return new

    @property
    def mean(self) -> Tensor:
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        """((a-1) / (ab-1))^(1/a) where a >= 1 and b >= 1 (not both 1), else nan.

        PyTorch 2.13 returns nan for every parameter here (its log-mode takes log1p(-b)); ember gives
        the mode of the density."""
        a, b = self.concentration1, self.concentration0
        defined = (a >= 1) & (b >= 1) & ((a > 1) | (b > 1))
        safe_a = where(defined, a, full_like(a, 2.0))
        safe_b = where(defined, b, full_like(b, 2.0))
        mode = ((safe_a - 1) / (safe_a * safe_b - 1)).pow(safe_a.reciprocal())
        return where(defined, mode, full_like(mode, math.nan))

    @property
    def variance(self) -> Tensor:
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        harmonic_b = digamma(b + 1) + _EULER  # H_b, the b-th harmonic number
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * harmonic_b - log(a) - log(b)


class LogisticNormal(TransformedDistribution):
    """A point of the K-simplex from a Normal in R^(K-1) by stick breaking (``StickBreakingTransform``).

    Example:
        >>> import ember
        >>> tuple(LogisticNormal(ember.zeros(3), ember.ones(3)).sample((2,)).shape)
        (2, 4)
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(LogisticNormal, _instance)
        return TransformedDistribution.expand(self, batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale
