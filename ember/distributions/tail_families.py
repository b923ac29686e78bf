"""Heavy-tailed positive families: FisherSnedecor (the F distribution) and GeneralizedPareto.

FisherSnedecor(d1, d2) is the ratio (X1/d1) / (X2/d2) of chi-squared variables, sampled as a ratio of
Gamma draws (so ``rsample`` carries Gamma's implicit gradients). GeneralizedPareto(loc, scale, xi)
is sampled by inverting its CDF; xi = 0 is the exponential tail (the formulas' limit, taken
where xi is within ``isclose`` of 0, as PyTorch does).

Example:
    >>> import ember
    >>> from ember.distributions import FisherSnedecor, GeneralizedPareto
    >>> FisherSnedecor(4.0, 6.0).mean.item()
    1.5
    >>> round(GeneralizedPareto(0.0, 1.0, 0.0).log_prob(ember.tensor(1.0)).item(), 6)  # Exponential(1)
    -1.0
"""
from __future__ import annotations

import math
import numbers
from typing import Any

from ember.creation import full_like, ones_like
from ember.ops.elementwise import exp, log, log1p, where
from ember.ops.extra_math import expm1
from ember.ops.special_ops import lgamma
from ember.distributions import constraints
from ember.distributions.continuous import _noise
from ember.distributions.distribution import Distribution
from ember.distributions.gamma_family import Gamma, _expand_params
from ember.distributions.utils import broadcast_all, finfo_tiny
from ember.tensor import Size, Tensor

__all__ = ["FisherSnedecor", "GeneralizedPareto"]


def _scalar_batch(values: tuple, like: Tensor) -> Size:
    return Size() if all(isinstance(v, numbers.Number) for v in values) else like.shape


def _nan_where(condition: Tensor, value: Tensor) -> Tensor:
    return where(condition, full_like(value, math.nan), value)


class FisherSnedecor(Distribution):
    """F distribution with ``df1`` and ``df2`` degrees of freedom.

    Example:
        >>> import ember
        >>> tuple(FisherSnedecor(ember.ones(3), 2.0).sample((2,)).shape)
        (2, 3)
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Any, df2: Any, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        # Gamma(d/2, rate d) is chi2(d) / (2d): in the ratio the factors 2 cancel.
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False)
        super().__init__(_scalar_batch((df1, df2), self.df1), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        new = _expand_params(self, FisherSnedecor, ("df1", "df2"), batch_shape, _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return _nan_where(self.df2 <= 2, self.df2 / (self.df2 - 2))

    @property
    def mode(self) -> Tensor:
        return _nan_where(self.df1 <= 2, (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2))

    @property
    def variance(self) -> Tensor:
        d1, d2 = self.df1, self.df2
        value = 2 * d2.pow(2) * (d1 + d2 - 2) / (d1 * (d2 - 2).pow(2) * (d2 - 4))
        return _nan_where(d2 <= 4, value)

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape)
        tiny = finfo_tiny(x2.dtype)
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        half1, half2 = self.df1 * 0.5, self.df2 * 0.5
        ratio = self.df1 / self.df2
        log_beta_inv = lgamma(half1 + half2) - lgamma(half1) - lgamma(half2)
        return log_beta_inv + half1 * log(ratio) + (half1 - 1) * log(value) - (half1 + half2) * log1p(ratio * value)


class GeneralizedPareto(Distribution):
    """Generalized Pareto with ``loc``, ``scale`` and shape ``concentration`` (xi).

    Support [loc, inf) for xi >= 0, [loc, loc - scale/xi] for xi < 0.

    Example:
        >>> import ember
        >>> round(GeneralizedPareto(0.0, 2.0, 0.25).mean.item(), 4)
        2.6667
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive, "concentration": constraints.real}
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(_scalar_batch((loc, scale, concentration), self.loc), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        return _expand_params(self, GeneralizedPareto, ("loc", "scale", "concentration"), batch_shape, _instance)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> constraints.Constraint:
        xi = self.concentration
        safe = where(xi < 0, xi, -ones_like(xi))
        upper = where(xi < 0, self.loc - self.scale / safe, full_like(xi, math.inf))
        return constraints.interval(self.loc, upper)

    def _xi_zero_and_safe(self) -> tuple:
        """(xi == 0 within isclose, xi with those entries replaced by 1 so the closed forms stay finite)."""
        xi = self.concentration
        zero = (xi.abs() <= 1e-8)  # isclose(xi, 0) with PyTorch's default atol
        return zero, where(zero, ones_like(xi), xi)

    def _z(self, value: Tensor) -> Tensor:
        return (value - self.loc) / self.scale

    def rsample(self, sample_shape: Any = Size()) -> Tensor:
        return self.icdf(_noise("uniform", self._extended_shape(sample_shape), self.loc))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        zero, xi = self._xi_zero_and_safe()
        power = 1 / xi + 1
        # (1/xi + 1) log(1 + xi z); when 1/xi + 1 == 0 (xi = -1: uniform) the term is 0 even at the upper end
        nonzero = where(power == 0, power, power * log1p(xi * z))
        return -log(self.scale) - where(zero, z, nonzero)

    def log_survival_function(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        zero, xi = self._xi_zero_and_safe()
        return where(zero, -z, -log1p(xi * z) / xi)

    def log_cdf(self, value: Tensor) -> Tensor:
        return log1p(-exp(self.log_survival_function(value)))

    def cdf(self, value: Tensor) -> Tensor:
        return exp(self.log_cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        zero, xi = self._xi_zero_and_safe()
        log_u = log1p(-value)
        return where(zero, self.loc - self.scale * log_u, self.loc + self.scale / xi * expm1(-xi * log_u))

    @property
    def mean(self) -> Tensor:
        xi = self.concentration
        valid = xi < 1
        safe = where(valid, xi, full_like(xi, 0.5))
        return _nan_where(~valid, self.loc + self.scale / (1 - safe))

    @property
    def variance(self) -> Tensor:
        xi = self.concentration
        valid = xi < 0.5
        safe = where(valid, xi, full_like(xi, 0.25))
        return _nan_where(~valid, self.scale.pow(2) / ((1 - safe).pow(2) * (1 - 2 * safe)))

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        value = log(self.scale) + self.concentration + 1
        return value.expand(tuple(self._batch_shape))
