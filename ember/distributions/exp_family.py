"""``ExponentialFamily``: the base of families with density h(x) exp(<theta, t(x)> - F(theta)).

A subclass gives its natural parameters theta (``_natural_params``), the log-normalizer F
(``_log_normalizer``) and E[log h(X)] (``_mean_carrier_measure``); then the entropy and the KL
divergence between two members of the same family follow from F alone, by the Bregman divergence
of F (its gradient is the mean of t(X), taken here with ember's autograd):

    H = F(theta) - <theta, grad F(theta)> - E[log h(X)]
    KL(p || q) = F(theta_q) - F(theta_p) - <theta_q - theta_p, grad F(theta_p)>

Example:
    >>> import ember
    >>> from ember.distributions import ContinuousBernoulli, ExponentialFamily
    >>> isinstance(ContinuousBernoulli(probs=ember.tensor(0.3)), ExponentialFamily)
    True
"""
from __future__ import annotations

from typing import Any

from ember.autograd import grad
from ember.autograd.grad_mode import enable_grad
from ember.distributions.distribution import Distribution
from ember.tensor import Tensor

__all__ = ["ExponentialFamily", "bregman_kl"]


class ExponentialFamily(Distribution):
    """Distribution with natural parameters; entropy by the Bregman divergence of the log-normalizer."""

    @property
    def _natural_params(self) -> tuple:
        raise NotImplementedError(f"{type(self).__name__} does not define _natural_params")

    def _log_normalizer(self, *natural_params: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__} does not define _log_normalizer")

    @property
    def _mean_carrier_measure(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define _mean_carrier_measure")

    def _log_normalizer_and_grads(self) -> tuple:
        """F(theta) and grad F(theta) at detached copies of theta (differentiable again: create_graph)."""
        params = [p.detach().requires_grad_() for p in self._natural_params]
        with enable_grad():
            log_norm = self._log_normalizer(*params)
            grads = grad(log_norm.sum(), params, create_graph=True)
        return params, log_norm, grads

    def entropy(self) -> Tensor:
        params, log_norm, grads = self._log_normalizer_and_grads()
        result = log_norm - self._mean_carrier_measure
        batch = tuple(self._batch_shape)
        for theta, g in zip(params, grads):
            result = result - (theta * g).reshape(batch + (-1,)).sum(-1)
        return result


def bregman_kl(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    """KL(p || q) for two members of one exponential family (the Bregman divergence of F)."""
    if type(p) is not type(q):
        raise NotImplementedError("The cross KL-divergence between different exponential families cannot be "
                                  f"computed using Bregman divergences (got {type(p).__name__} and {type(q).__name__})")
    p_params, p_log_norm, grads = p._log_normalizer_and_grads()
    q_params = q._natural_params
    result = q._log_normalizer(*q_params) - p_log_norm
    batch = tuple(p.batch_shape)
    for theta_p, theta_q, g in zip(p_params, q_params, grads):
        result = result - ((theta_q - theta_p) * g).reshape(batch + (-1,)).sum(-1)
    return result
