"""The rest of PyTorch's KL registry: same-family pairs of the newer families and the closed forms
across families (``kl_divergence(p, q)`` for p, q of different types).

Most cross-family forms are KL = -H(p) - E_p[log q(X)], with E_p[log q] a few moments of p (E[X],
E[X^2], E[log X], E[exp(-X/s)]). Where q's support does not cover p's, KL is +inf; pairs whose
supports never nest (a real-line p against a bounded or positive q) are registered as +inf.

Three deliberate differences from PyTorch 2.13, where its value is not the KL:
- ContinuousBernoulli vs Uniform (both directions): PyTorch returns inf when the uniform's bounds
  touch [0, 1] (e.g. Uniform(0, 1)), where KL is finite; ember returns inf only where one support
  really leaves the other.
- Uniform(0, h) against Beta, Gamma: x log x at x = 0 is 0 (its limit); PyTorch's gives nan.
- ExponentialFamily pairs of the same type use the Bregman divergence (as PyTorch).

Example:
    >>> import ember
    >>> from ember.distributions import Exponential, Normal, kl_divergence
    >>> round(kl_divergence(Exponential(1.0), Normal(1.0, 1.0)).item(), 4)
    0.4189
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.creation import full_like
from ember.ops.elementwise import exp, log, log1p, where
from ember.ops.extra_math import xlogy
from ember.ops.special_ops import digamma, lgamma
from ember.distributions.continuous import Exponential, Laplace, Normal, Uniform
from ember.distributions.discrete import Bernoulli
from ember.distributions.exp_family import ExponentialFamily, bregman_kl
from ember.distributions.gamma_family import Beta, Gamma, Poisson
from ember.distributions.kl import _kl_normal_normal, register_kl
from ember.distributions.more_families import Binomial, Cauchy, Geometric, Gumbel, HalfNormal
from ember.distributions.derived_families import Pareto
from ember.distributions.unit_interval_families import ContinuousBernoulli
from ember.tensor import Tensor

_EULER = float(np.euler_gamma)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _inf_where(condition: Tensor, value: Tensor) -> Tensor:
    return where(condition, full_like(value, math.inf), value)


def _x_log_x(x: Tensor) -> Tensor:
    return xlogy(x, x)  # 0 at x = 0


def _infinite(p: Any, q: Any) -> Tensor:
    """KL = inf: q's support does not contain p's (the mean gives p's batch shape, dtype and device)."""
    return full_like(p.mean, math.inf)

for _p, _q in [(Beta, Pareto), (ContinuousBernoulli, Pareto), (Exponential, Beta), (Exponential, ContinuousBernoulli),
               (Exponential, Pareto), (Exponential, Uniform), (Gamma, Beta), (Gamma, ContinuousBernoulli),
               (Gamma, Pareto), (Gamma, Uniform), (Gumbel, Beta), (Gumbel, ContinuousBernoulli), (Gumbel, Exponential),
               (Gumbel, Gamma), (Gumbel, Pareto), (Gumbel, Uniform), (Laplace, Beta), (Laplace, ContinuousBernoulli),
               (Laplace, Exponential), (Laplace, Gamma), (Laplace, Pareto), (Laplace, Uniform), (Normal, Beta),
               (Normal, ContinuousBernoulli), (Normal, Exponential), (Normal, Gamma), (Normal, Pareto),
               (Normal, Uniform), (Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform),
               (Poisson, Bernoulli), (Poisson, Binomial)]:
    register_kl(_p, _q)(_infinite)


# ---- moments used below ------------------------------------------------------------------------------
def _normal_cross_entropy(mean: Tensor, second_moment: Tensor, q: Normal) -> Tensor:
    """-E_p[log q(X)] for Normal q, from E[X] and E[X^2]."""
    var = q.scale.pow(2)
    return _HALF_LOG_2PI + log(q.scale) + (second_moment - 2 * q.loc * mean + q.loc.pow(2)) / (2 * var)


def _gumbel_cross_entropy(mean: Tensor, exp_moment: Tensor, q: Gumbel) -> Tensor:
    """-E_p[log q(X)] for Gumbel q, from E[X] and E[exp(-(X - loc_q) / scale_q)]."""
    return log(q.scale) + (mean - q.loc) / q.scale + exp_moment


def _gamma_cross_entropy(mean: Tensor, mean_log: Tensor, q: Gamma) -> Tensor:
    """-E_p[log q(X)] for Gamma q, from E[X] and E[log X]."""
    k = q.concentration
    return lgamma(k) - k * log(q.rate) - (k - 1) * mean_log + q.rate * mean


def _cb_cross_entropy(mean: Tensor, q: ContinuousBernoulli) -> Tensor:
    """-E_p[log q(X)] for ContinuousBernoulli q: log q(x) = log C + x logit + log(1 - probs)."""
    return -mean * q.logits - log1p(-q.probs) - q._log_norm()


def _beta_mean_log(p: Beta) -> Tensor:
    return digamma(p.concentration1) - digamma(p.concentration1 + p.concentration0)


def _beta_second_moment(p: Beta) -> Tensor:
    total = p.concentration1 + p.concentration0
    mean = p.concentration1 / total
    return mean * (1 - mean) / (total + 1) + mean.pow(2)


def _uniform_mean_log(p: Uniform) -> Tensor:
    width = p.high - p.low
    return (_x_log_x(p.high) - _x_log_x(p.low) - width) / width


def _pareto_mean(p: Pareto) -> Tensor:
    return p.alpha * p.scale / (p.alpha - 1)


# ---- same family -------------------------------------------------------------------------------------
@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    return bregman_kl(p, q)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    return (p.mean * (p.logits - q.logits) + p._log_norm() + log1p(-p.probs) - q._log_norm() - log1p(-q.probs))


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + log1p(-p.probs) - log1p(-q.probs))
    return _inf_where(p.total_count > q.total_count, kl)  # q cannot reach p's largest counts


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - log1p(-q.probs) / p.probs - q.logits


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ratio = p.scale / q.scale
    shift = (p.loc - q.loc) / q.scale
    # E_p[exp(-(X - loc_q)/scale_q)] = exp(-shift) Gamma(1 + ratio)
    return -log(ratio) + shift + ratio * _EULER + exp(-shift + lgamma(1 + ratio)) - (1 + _EULER)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    return _kl_normal_normal(Normal(0.0 * p.scale, p.scale, validate_args=False),
                             Normal(0.0 * q.scale, q.scale, validate_args=False))


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    return log((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)) - log(4 * p.scale * q.scale)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    # E_p[log X] = log scale_p + 1/alpha_p; inf where q's support starts above p's
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    t1 = q.alpha * log(scale_ratio)
    t2 = -log(alpha_ratio)
    result = t1 + t2 + alpha_ratio - 1
    return _inf_where(p.support.lower_bound < q.support.lower_bound, result)


# ---- p discrete --------------------------------------------------------------------------------------
@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    return -p.entropy() - (p.probs * log(q.rate) - q.rate)


# ---- p Beta ------------------------------------------------------------------------------------------
@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p: Beta, q: ContinuousBernoulli) -> Tensor:
    return -p.entropy() + _cb_cross_entropy(p.mean, q)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p: Beta, q: Exponential) -> Tensor:
    return -p.entropy() - log(q.rate) + q.rate * p.mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p: Beta, q: Gamma) -> Tensor:
    return -p.entropy() + _gamma_cross_entropy(p.mean, _beta_mean_log(p), q)


@register_kl(Beta, Normal)
def _kl_beta_normal(p: Beta, q: Normal) -> Tensor:
    return -p.entropy() + _normal_cross_entropy(p.mean, _beta_second_moment(p), q)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p: Beta, q: Uniform) -> Tensor:
    return _inf_where((q.low > 0) | (q.high < 1), -p.entropy() + log(q.high - q.low))


# ---- p ContinuousBernoulli ---------------------------------------------------------------------------
@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p: ContinuousBernoulli, q: Exponential) -> Tensor:
    return -p.entropy() - log(q.rate) + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p: ContinuousBernoulli, q: Normal) -> Tensor:
    mean = p.mean
    return -p.entropy() + _normal_cross_entropy(mean, p.variance + mean.pow(2), q)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p: ContinuousBernoulli, q: Uniform) -> Tensor:
    return _inf_where((q.low > 0) | (q.high < 1), -p.entropy() + log(q.high - q.low))


# ---- p Exponential -----------------------------------------------------------------------------------
@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Exponential, q: Gumbel) -> Tensor:
    rs = p.rate * q.scale
    # E[exp(-X/s)] for X ~ Exp(r) is rs / (rs + 1)
    return -p.entropy() + _gumbel_cross_entropy(p.mean, exp(q.loc / q.scale) * rs / (rs + 1), q)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p: Exponential, q: Normal) -> Tensor:
    return -p.entropy() + _normal_cross_entropy(p.rate.reciprocal(), 2 * p.rate.pow(-2), q)


# ---- p Gamma -----------------------------------------------------------------------------------------
@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p: Gamma, q: Exponential) -> Tensor:
    return -p.entropy() - log(q.rate) + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Gamma, q: Gumbel) -> Tensor:
    bs = p.rate * q.scale
    # E[exp(-X/s)] for X ~ Gamma(k, b) is (1 + 1/(b s))^(-k)
    exp_moment = exp(q.loc / q.scale) * (1 + bs.reciprocal()).pow(-p.concentration)
    return -p.entropy() + _gumbel_cross_entropy(p.concentration / p.rate, exp_moment, q)


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p: Gamma, q: Normal) -> Tensor:
    k, b = p.concentration, p.rate
    return -p.entropy() + _normal_cross_entropy(k / b, (k.pow(2) + k) / b.pow(2), q)


# ---- p Gumbel, Laplace, Normal -----------------------------------------------------------------------
@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p: Gumbel, q: Normal) -> Tensor:
    mean = p.loc + p.scale * _EULER
    variance = (math.pi * p.scale).pow(2) / 6
    return -p.entropy() + _normal_cross_entropy(mean, variance + mean.pow(2), q)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p: Laplace, q: Normal) -> Tensor:
    return -p.entropy() + _normal_cross_entropy(p.loc, 2 * p.scale.pow(2) + p.loc.pow(2), q)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Normal, q: Gumbel) -> Tensor:
    # E[exp(-(X - m)/s)] for X ~ N(mu, sigma^2): exp(-(mu - m)/s + sigma^2 / (2 s^2))
    exp_moment = exp(-(p.loc - q.loc) / q.scale + 0.5 * (p.scale / q.scale).pow(2))
    return -p.entropy() + _gumbel_cross_entropy(p.loc, exp_moment, q)


# ---- p Pareto (finite only where the needed moments exist) --------------------------------------------
@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Pareto, q: Exponential) -> Tensor:
    return _inf_where(p.alpha <= 1, -p.entropy() - log(q.rate) + q.rate * _pareto_mean(p))


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Pareto, q: Gamma) -> Tensor:
    mean_log = log(p.scale) + p.alpha.reciprocal()
    return _inf_where(p.alpha <= 1, -p.entropy() + _gamma_cross_entropy(_pareto_mean(p), mean_log, q))


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Pareto, q: Normal) -> Tensor:
    mean = _pareto_mean(p)
    variance = p.scale.pow(2) * p.alpha / ((p.alpha - 1).pow(2) * (p.alpha - 2))
    return _inf_where(p.alpha <= 2, -p.entropy() + _normal_cross_entropy(mean, variance + mean.pow(2), q))


# ---- p Uniform ---------------------------------------------------------------------------------------
@register_kl(Uniform, Beta)
def _kl_uniform_beta(p: Uniform, q: Beta) -> Tensor:
    width = p.high - p.low
    a, b = q.concentration1, q.concentration0
    mean_log_1m = (_x_log_x(1 - p.low) - _x_log_x(1 - p.high) - width) / width  # E[log(1 - X)]
    result = (-log(width) - (a - 1) * _uniform_mean_log(p) - (b - 1) * mean_log_1m
              + lgamma(a) + lgamma(b) - lgamma(a + b))
    return _inf_where((p.high > 1) | (p.low < 0), result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p: Uniform, q: ContinuousBernoulli) -> Tensor:
    return _inf_where((p.high > 1) | (p.low < 0), -p.entropy() + _cb_cross_entropy(p.mean, q))


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p: Uniform, q: Exponential) -> Tensor:
    result = q.rate * (p.high + p.low) / 2 - log((p.high - p.low) * q.rate)
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p: Uniform, q: Gamma) -> Tensor:
    result = -log(p.high - p.low) + _gamma_cross_entropy((p.high + p.low) / 2, _uniform_mean_log(p), q)
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Uniform, q: Gumbel) -> Tensor:
    width = p.high - p.low
    z_high, z_low = (p.high - q.loc) / q.scale, (p.low - q.loc) / q.scale
    exp_moment = q.scale / width * (exp(-z_low) - exp(-z_high))
    return -log(width) + _gumbel_cross_entropy((p.high + p.low) / 2, exp_moment, q)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    width = p.high - p.low
    # log q(x) = log alpha + alpha log scale - (alpha + 1) log x
    result = (q.alpha + 1) * _uniform_mean_log(p) - log(q.alpha * q.scale.pow(q.alpha) * width)
    return _inf_where(p.low < q.scale, result)
