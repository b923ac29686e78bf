"""``kl_divergence(p, q)`` and its registry (``register_kl``), as in ``torch.distributions.kl``.

The implementation for a pair of types is the registered function whose (type_p, type_q) is the
most specific match along both classes' MROs; an ambiguous tie warns, as PyTorch does.

Example:
    >>> import ember
    >>> from ember.distributions import Normal, kl_divergence
    >>> round(kl_divergence(Normal(0.0, 1.0), Normal(1.0, 1.0)).item(), 4)
    0.5
"""
from __future__ import annotations

import math
import warnings
from functools import total_ordering
from typing import Any, Callable

import numpy as np

from ember.creation import full_like, zeros_like
from ember.ops.elementwise import erf, exp, log, where
from ember.distributions._special import digamma, lgamma
from ember.distributions.continuous import Exponential, Laplace, Normal, Uniform
from ember.distributions.discrete import Bernoulli, Categorical, OneHotCategorical
from ember.distributions.distribution import Distribution
from ember.distributions.gamma_family import Beta, Dirichlet, Gamma, Poisson
from ember.distributions.independent import Independent
from ember.distributions.transformed_distribution import TransformedDistribution
from ember.distributions.utils import sum_rightmost
from ember.tensor import Tensor
import ember.nn.functional as F

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p: type, type_q: type) -> Callable:
    """Decorator: register ``fn(p, q)`` as KL(p || q) for instances of ``type_p`` and ``type_q``."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn

    return decorator


@total_ordering
class _Match:
    """A registered pair, ordered by specificity (a subclass sorts before its bases)."""

    def __init__(self, *types: type) -> None:
        self.types = types

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Match) and self.types == other.types

    def __le__(self, other: "_Match") -> bool:
        for x, y in zip(self.types, other.types):
            if not issubclass(x, y):
                return False
            if x is not y:
                break
        return True


def _dispatch_kl(type_p: type, type_q: type) -> Callable | None:
    matches = [(super_p, super_q) for super_p, super_q in _KL_REGISTRY
               if issubclass(type_p, super_p) and issubclass(type_q, super_q)]
    if not matches:
        return None
    left_p, left_q = min(_Match(*m) for m in matches).types
    right_q, right_p = min(_Match(*reversed(m)) for m in matches).types
    left_fun = _KL_REGISTRY[left_p, left_q]
    right_fun = _KL_REGISTRY[right_p, right_q]
    if left_fun is not right_fun:
        warnings.warn(f"Ambiguous kl_divergence({type_p.__name__}, {type_q.__name__}). Please register_kl("
                      f"{left_p.__name__}, {right_q.__name__})", RuntimeWarning)
    return left_fun


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """KL(p || q), batched over the distributions' batch shape.

    Raises NotImplementedError when no implementation is registered for the pair."""
    key = (type(p), type(q))
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fn = _KL_MEMOIZE[key]
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {p.__class__.__name__} and q type "
                                  f"{q.__class__.__name__}")
    return fn(p, q)


def _infinite_like(tensor: Tensor) -> Tensor:
    return full_like(tensor, math.inf)


# ---- same family --------------------------------------------------------------------------------------
@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t1 = where(q.probs == 0, _infinite_like(t1), t1)
    t1 = where(p.probs == 0, zeros_like(t1), t1)
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    t2 = where(q.probs == 1, _infinite_like(t2), t2)
    t2 = where(p.probs == 1, zeros_like(t2), t2)
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    t = where(q.probs.expand(t.shape) == 0, _infinite_like(t), t)
    t = where(p.probs.expand(t.shape) == 0, zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical_onehotcategorical(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return where(outside, _infinite_like(result), result)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * exp(-loc_abs_diff / p.scale)
    return t1 + t2 + t3 - 1


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p: Gamma, q: Gamma) -> Tensor:
    t1 = q.concentration * log(p.rate / q.rate)
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p: Beta, q: Beta) -> Tensor:
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p: Dirichlet, q: Dirichlet) -> Tensor:
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(sum_q)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p: Poisson, q: Poisson) -> Tensor:
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution, q: TransformedDistribution) -> Tensor:
    if p.transforms != q.transforms:
        raise NotImplementedError("KL between TransformedDistributions with different transforms")
    if p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions with different event shapes")
    return kl_divergence(p.base_dist, q.base_dist)


# ---- across families ----------------------------------------------------------------------------------
@register_kl(Uniform, Normal)
def _kl_uniform_normal(p: Uniform, q: Normal) -> Tensor:
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p: Exponential, q: Gamma) -> Tensor:
    ratio = q.rate / p.rate
    t1 = -q.concentration * log(ratio)
    return t1 + ratio + lgamma(q.concentration) + q.concentration * float(np.euler_gamma) - (1 + float(np.euler_gamma))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p: Normal, q: Laplace) -> Tensor:
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = log(scale_ratio)
    t2 = math.sqrt(2 / math.pi) * p.scale * exp(-0.5 * loc_diff_scale_ratio.pow(2))
    t3 = loc_diff * erf(math.sqrt(0.5) * loc_diff_scale_ratio)
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))
