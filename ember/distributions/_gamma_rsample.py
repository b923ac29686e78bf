"""Reparameterized Gamma samples: draws whose gradient to the concentration is the implicit one,
dx/da = -(dP(a, x)/da) / pdf(x; a), with P the regularized lower incomplete gamma function.

dP/da comes from the power series P(a, x) = sum_k x^(a+k) e^-x / Gamma(a+k+1), differentiated term
by term (each term times log x - digamma(a+k+1)); the series is summed on the host in float64 until
its terms are below 1e-17 of the sum. Beta and Dirichlet reparameterize through normalized gammas.

Example:
    >>> import ember
    >>> from ember.distributions._gamma_rsample import standard_gamma
    >>> a = ember.tensor([2.0], requires_grad=True)
    >>> standard_gamma(a, (3,)).sum().backward(); tuple(a.grad.shape)
    (1,)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.creation import tensor
from ember import dtypes, random as ember_random
from ember.autograd import Function
from ember.backends import special_function
from ember.tensor import Tensor

_MAX_TERMS = 200_000


def standard_gamma_grad(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """dx/da for x ~ Gamma(a, 1) held at a fixed quantile (float64 NumPy arrays of one shape)."""
    lgamma, digamma = special_function(np, "lgamma"), special_function(np, "digamma")
    x = np.maximum(x, np.finfo(np.float64).tiny)
    log_x = np.log(x)
    log_pdf = (a - 1) * log_x - x - lgamma(a)
    term = np.exp(a * log_x - x - lgamma(a + 1))  # k = 0 term of P's series
    psi = digamma(a + 1)
    total = term.copy()
    d_total = term * (log_x - psi)
    active = np.ones(x.shape, dtype=bool)
    k = 0
    while active.any() and k < _MAX_TERMS:
        denom = a + k + 1
        term = term * x / denom
        psi = psi + 1.0 / denom
        total += np.where(active, term, 0.0)
        d_total += np.where(active, term * (log_x - psi), 0.0)
        k += 1
        # terms shrink once k > x - a; stop where they no longer change the sum
        active &= ~((k > x - a) & (term <= 1e-17 * total))
    return -d_total / np.exp(log_pdf)


class _StandardGamma(Function):
    @staticmethod
    def forward(ctx: Any, concentration: Tensor, shape: tuple) -> Tensor:
        alpha = np.broadcast_to(concentration.detach().cpu().numpy().astype(np.float64), shape)
        draws = ember_random.default_generator.numpy_rng.standard_gamma(alpha)
        draws = np.maximum(draws, dtypes.finfo_np(concentration.dtype.np).tiny)
        out = tensor(draws.astype(concentration.dtype.np), device=concentration.device)
        ctx.save_for_backward(out)
        ctx.alpha = alpha
        ctx.shape_in = tuple(concentration.shape)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        dx_da = standard_gamma_grad(out.detach().cpu().numpy().astype(np.float64), np.asarray(ctx.alpha))
        total = grad * tensor(dx_da.astype(grad.dtype.np), device=grad.device)
        # sum over the dimensions the concentration was broadcast along
        extra = total.dim() - len(ctx.shape_in)
        if extra:
            total = total.sum(tuple(range(extra)))
        keep = tuple(i for i, n in enumerate(ctx.shape_in) if n == 1 and total.shape[i] != 1)
        if keep:
            total = total.sum(keep, keepdim=True)
        return total, None


def standard_gamma(concentration: Tensor, shape: tuple) -> Tensor:
    """Gamma(concentration, 1) draws of ``shape`` (concentration broadcasts), differentiable in concentration."""
    return _StandardGamma.apply(concentration, tuple(shape))
