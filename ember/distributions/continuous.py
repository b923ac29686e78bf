"""Location-scale and simple continuous families: Normal, Uniform, Exponential, Laplace.

All four are reparameterizable: ``rsample`` transforms parameter-free noise, so gradients flow to
the parameters.

Example:
    >>> import ember
    >>> from ember.distributions import Normal
    >>> round(Normal(0.0, 1.0).log_prob(ember.tensor(0.0)).item(), 4)
    -0.9189
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from ember.creation import full_like, zeros_like
from ember.ops.elementwise import erf, exp, log, log1p
from ember.ops.extra_math import erfinv, expm1
from ember import random as ember_random
from ember.distributions import constraints
from ember.distributions.distribution import Distribution
from ember.distributions.exp_family import ExponentialFamily
from ember.distributions.utils import broadcast_all, finfo_eps
from ember.tensor import Size, Tensor

__all__ = ["Exponential", "Laplace", "Normal", "Uniform"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _noise(sampler: str, shape: Size, like: Tensor, **kwargs: Any) -> Tensor:
    """Parameter-free noise of ``like``'s dtype and device, from ember's generator."""
    array = getattr(ember_random, "sample_" + sampler)(tuple(shape), like.dtype, like.device, None, **kwargs)
    return Tensor._make(array, like.device, False)


def _batch_shape(*params: Any) -> Size:
    if all(isinstance(p, numbers.Number) for p in params):
        return Size()
    return None  # type: ignore[return-value]


class _LocScale(Distribution):
    """Shared construction and ``expand`` for families with ``loc`` and ``scale``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        batch_shape = _batch_shape(loc, scale) if _batch_shape(loc, scale) is not None else self.loc.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = Size(batch_shape)
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc


class Normal(_LocScale, ExponentialFamily):
    """Normal (Gaussian) distribution with mean ``loc`` and standard deviation ``scale``.

    Example:
        >>> import ember
        >>> Normal(ember.tensor([0.0]), ember.tensor([2.0])).variance.tolist()
        [4.0]
    """

    @property
    def stddev(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.loc + _noise("normal", shape, self.loc) * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_scale = math.log(self.scale) if isinstance(self.scale, numbers.Real) else self.scale.log()
        return -((value - self.loc) ** 2) / (2 * self.scale ** 2) - log_scale - _HALF_LOG_2PI

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Tensor) -> Tensor:
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Tensor:
        return 0.5 + _HALF_LOG_2PI + log(self.scale)

    # exponential-family form (natural parameters, log-normalizer), as torch: used by the Bregman KL
    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple:
        return self.loc / self.scale.pow(2), -0.5 * self.scale.pow(2).reciprocal()

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return -0.25 * x.pow(2) / y + 0.5 * log(-math.pi / y)


class Laplace(_LocScale):
    """Laplace distribution: density exp(-|x - loc| / scale) / (2 scale).

    Example:
        >>> import ember
        >>> Laplace(0.0, 1.0).variance.item()
        2.0
    """

    @property
    def variance(self) -> Tensor:
        return 2 * self.scale.pow(2)

    @property
    def stddev(self) -> Tensor:
        return math.sqrt(2) * self.scale

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = finfo_eps(self.loc.dtype)
        u = _noise("uniform", shape, self.loc, low=eps - 1, high=1.0)  # open at -1 so log1p(-|u|) is finite
        return self.loc - self.scale * u.sign() * log1p(-u.abs())

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return -log(2 * self.scale) - (value - self.loc).abs() / self.scale

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 - 0.5 * (value - self.loc).sign() * expm1(-(value - self.loc).abs() / self.scale)

    def icdf(self, value: Tensor) -> Tensor:
        term = value - 0.5
        return self.loc - self.scale * term.sign() * log1p(-2 * term.abs())

    def entropy(self) -> Tensor:
        return 1 + log(2 * self.scale)


class Uniform(Distribution):
    """Uniform distribution on the half-open interval [low, high).

    Example:
        >>> import ember
        >>> round(Uniform(0.0, 2.0).entropy().item(), 4)  # log 2
        0.6931
    """

    has_rsample = True

    @property
    def arg_constraints(self) -> dict:  # type: ignore[override]
        return {"low": constraints.less_than(self.high), "high": constraints.greater_than(self.low)}

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = broadcast_all(low, high)
        batch_shape = Size() if _batch_shape(low, high) is not None else self.low.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Uniform, _instance)
        batch_shape = Size(batch_shape)
        new.low, new.high = self.low.expand(batch_shape), self.high.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.interval(self.low, self.high)

    @property
    def mean(self) -> Tensor:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Tensor:
        return full_like(self.high, float("nan"))

    @property
    def stddev(self) -> Tensor:
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self) -> Tensor:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.low + _noise("uniform", shape, self.low) * (self.high - self.low)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        inside = (self.low <= value).to(self.low.dtype) * (self.high > value).to(self.low.dtype)
        return log(inside) - log(self.high - self.low)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value: Tensor) -> Tensor:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Tensor:
        return log(self.high - self.low)


class Exponential(ExponentialFamily):
    """Exponential distribution with ``rate`` (density rate * exp(-rate x) on x >= 0).

    Example:
        >>> import ember
        >>> Exponential(ember.tensor([2.0])).mean.tolist()
        [0.5]
    """

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        batch_shape = Size() if isinstance(rate, numbers.Number) else self.rate.shape
        super().__init__(batch_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = self._get_checked_instance(Exponential, _instance)
        batch_shape = Size(batch_shape)
        new.rate = self.rate.expand(batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.rate)

    @property
    def stddev(self) -> Tensor:
        return self.rate.reciprocal()

    @property
    def variance(self) -> Tensor:
        return self.rate.pow(-2)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return _noise("exponential", shape, self.rate) / self.rate

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 1 - exp(-self.rate * value)

    def icdf(self, value: Tensor) -> Tensor:
        return -log1p(-value) / self.rate

    def entropy(self) -> Tensor:
        return 1.0 - log(self.rate)

    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple:
        return (-self.rate,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return -log(-x)
