"""More families: Cauchy, Gumbel, HalfNormal, StudentT, Chi2, Geometric, Binomial.

Example:
    >>> import ember
    >>> from ember.distributions import Cauchy
    >>> round(Cauchy(0.0, 1.0).cdf(ember.tensor(1.0)).item(), 4)
    0.75
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ember.creation import arange, full, full_like, zeros_like
from ember.ops.elementwise import erf, exp, log, log1p, rsqrt, where
from ember.ops.extra_math import atan, erfinv, tan
import ember.nn.functional as F
from ember.distributions import constraints
from ember.distributions._gamma_rsample import standard_gamma
from ember.distributions._special import digamma, lgamma
from ember.distributions.continuous import _LocScale, _noise
from ember.distributions.distribution import Distribution
from ember.distributions.gamma_family import Gamma, _expand_params, _host, _rng, _to_tensor
from ember.distributions.utils import (broadcast_all, finfo_eps, finfo_tiny, lazy_property,
                                       logits_to_probs, probs_to_logits)
from ember.tensor import Size, Tensor

__all__ = ["Binomial", "Cauchy", "Chi2", "Geometric", "Gumbel", "HalfNormal", "StudentT"]

_EULER = float(np.euler_gamma)


class Cauchy(_LocScale):
    """Cauchy (Lorentz) distribution; mean and variance are undefined (nan / inf, as torch)."""

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), float("nan"), dtype=self.loc.dtype)

    @property
    def variance(self) -> Tensor:
        return full(tuple(self._extended_shape()), float("inf"), dtype=self.loc.dtype)

    @property
    def stddev(self) -> Tensor:
        return self.variance

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = _noise("cauchy", shape, self.loc, median=0.0, sigma=1.0)  # as torch: loc.new(shape).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class Gumbel(_LocScale):
    """Gumbel (type-I extreme value) distribution: cdf exp(-exp(-(x - loc) / scale))."""

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * _EULER

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        tiny, eps = finfo_tiny(self.loc.dtype), finfo_eps(self.loc.dtype)
        u = _noise("uniform", shape, self.loc).clamp(min=tiny, max=1 - eps)
        return self.loc - self.scale * log(-log(u))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (self.loc - value) / self.scale
        return -self.scale.log() + z - exp(z)

    def cdf(self, value: Tensor) -> Tensor:
        return exp(-exp(-(value - self.loc) / self.scale))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc - self.scale * log(-log(value))

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + _EULER)


class HalfNormal(Distribution):
    """|X| for X ~ Normal(0, scale)."""

    _repr_hidden = ("scale",)  # (torch prints HalfNormal())

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        (self.scale,) = broadcast_all(scale)
        super().__init__(Size() if isinstance(scale, numbers.Number) else self.scale.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expand_params(self, HalfNormal, ("scale",), batch_shape, _instance)

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        return (_noise("normal", self._extended_shape(sample_shape), self.scale) * self.scale).abs()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob = math.log(2) - 0.5 * math.log(2 * math.pi) - self.scale.log() - value ** 2 / (2 * self.scale ** 2)
        return where(value >= 0, log_prob, full_like(log_prob, -math.inf))

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return erf(value / (self.scale * math.sqrt(2)))

    def icdf(self, prob: Tensor) -> Tensor:
        return self.scale * erfinv(prob) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 * math.log(math.pi * math.e / 2) + self.scale.log()


class Chi2(Gamma):
    """Chi-squared with ``df`` degrees of freedom: Gamma(df / 2, 1/2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, full_like(df, 0.5), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom, location ``loc`` and scale ``scale``."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0, validate_args: bool | None = None) -> None:
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        scalar = all(isinstance(v, numbers.Number) for v in (df, loc, scale))
        super().__init__(Size() if scalar else self.df.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expand_params(self, StudentT, ("df", "loc", "scale"), batch_shape, _instance)

    @property
    def mean(self) -> Tensor:
        m = self.loc.clone()
        return where(self.df <= 1, full_like(m, float("nan")), m)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        var = self.scale.pow(2) * self.df / (self.df - 2)
        var = where((self.df <= 2) & (self.df > 1), full_like(var, math.inf), var)
        return where(self.df <= 1, full_like(var, float("nan")), var)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        # Y = X / sqrt(Z / df) with X ~ Normal(0, 1), Z ~ Chi2(df) = 2 Gamma(df / 2): reparameterized in all three
        shape = tuple(self._extended_shape(sample_shape))
        x = _noise("normal", Size(shape), self.df)
        z = 2 * standard_gamma(0.5 * self.df, shape)
        return self.loc + self.scale * x * rsqrt(z / self.df)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + lgamma(0.5 * self.df) \
            - lgamma(0.5 * (self.df + 1.0))
        return -0.5 * (self.df + 1.0) * log1p(y ** 2.0 / self.df) - z

    def entropy(self) -> Tensor:
        half_df = 0.5 * self.df
        log_beta = lgamma(half_df) + math.lgamma(0.5) - lgamma(half_df + 0.5)
        return (self.scale.log() + (self.df + 1) * (digamma(half_df + 0.5) - digamma(half_df))
                / 2 + 0.5 * self.df.log() + log_beta)


class _ProbsLogits(Distribution):
    """``probs``/``logits`` handling shared by Geometric and Binomial (binary probabilities)."""

    @lazy_property
    def logits(self) -> Tensor:
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        return logits_to_probs(self.logits, is_binary=True)


class Geometric(_ProbsLogits):
    """Number of failures before the first success in Bernoulli(probs) trials (support 0, 1, 2, ...)."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Any = None, logits: Any = None, validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        (param,) = broadcast_all(given)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        super().__init__(Size() if isinstance(given, numbers.Number) else param.shape, validate_args=validate_args)
        if self._validate_args and probs is not None and not bool((self.probs > 0).all()):
            raise ValueError(f"Expected parameter probs (Tensor of shape {tuple(self.probs.shape)}) of distribution "
                             f"{self!r} to satisfy the constraint Interval(lower_bound=0.0, upper_bound=1.0), but "
                             f"found invalid values:\n{self.probs}")

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        names = tuple(n for n in ("probs", "logits") if n in self.__dict__)
        return _expand_params(self, Geometric, names, batch_shape, _instance)

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        # as torch: failures before the first success by inversion of one uniform on [tiny, 1)
        u = _noise("uniform", shape, self.probs, low=finfo_tiny(self.probs.dtype), high=1.0)
        return (log(u) / log1p(-self.probs.detach())).floor()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone()
        probs = where((probs == 1) & (value == 0), zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class Binomial(_ProbsLogits):
    """Number of successes in ``total_count`` Bernoulli(probs) trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        given = probs if probs is not None else logits
        self.total_count, param = broadcast_all(total_count, given)
        self.total_count = self.total_count.to(param.dtype)
        if probs is not None:
            self.probs = param
        else:
            self.logits = param
        super().__init__(param.shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        names = ("total_count",) + tuple(n for n in ("probs", "logits") if n in self.__dict__)
        return _expand_params(self, Binomial, names, batch_shape, _instance)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        n = np.broadcast_to(_host(self.total_count), shape).astype(np.int64)
        return _to_tensor(_rng().binomial(n, np.broadcast_to(_host(self.probs), shape)).astype(np.float64), self.probs)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_factorial_n = lgamma(self.total_count + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(self.total_count - value + 1)
        # k log p + (n - k) log(1 - p) in the stable logits form PyTorch uses
        normalize_term = (self.total_count * _clamp_by_zero(self.logits)
                          + self.total_count * log1p(exp(-self.logits.abs())) - log_factorial_n)
        return value * self.logits - log_factorial_k - log_factorial_nmk - normalize_term

    def entropy(self) -> Tensor:
        """By enumeration over 0..total_count (a homogeneous total_count, as torch requires)."""
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `entropy`.")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(exp(log_prob) * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total = int(self.total_count.max().item())
        if not bool((self.total_count == total).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        values = arange(1 + total, dtype=self._param_dtype(), device=self.total_count.device)
        values = values.reshape((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

    def _param_dtype(self) -> Any:
        return self.total_count.dtype


def _clamp_by_zero(x: Tensor) -> Tensor:
    # max(x, 0) with gradient 1/2 at 0, as PyTorch's helper
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


