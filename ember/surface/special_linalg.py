"""Special functions and basic linear algebra with PyTorch's names, as autograd Functions whose backward
is written in ember ops (so second derivatives work): lgamma, digamma, polygamma, mvlgamma, i0, igamma,
igammac; inverse, det, slogdet, logdet, solve (``torch.linalg.solve``), cholesky, cholesky_solve,
cholesky_inverse, triangular_solve, matrix_exp.

Forward values come from NumPy (linear algebra) and SciPy's special functions (the optional ``scipy``
extra: ``pip install 'ember[special]'``); without SciPy the special functions raise naming the extra.

Example:
    >>> import ember
    >>> a = ember.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    >>> ember.det(a).backward(); [[round(v, 4) for v in row] for row in a.grad.tolist()]  # det * A^-T
    [[3.0, -1.0], [-1.0, 2.0]]
"""
from __future__ import annotations

import math
from collections import namedtuple
from typing import Any

import numpy as np

from ember import creation
from ember.creation import full_like, ones_like, tensor, zeros_like
from ember.dtypes import get_default_dtype
from ember.ops.elementwise import exp, log, where
from ember.ops.extra_math import diag_embed, diagonal
from ember.ops.views import cat, stack, tril, triu
from ember.autograd import Function
from ember.tensor import Tensor

__all__ = ["lgamma", "digamma", "polygamma", "mvlgamma", "i0", "igamma", "igammac"]


def _scipy_special() -> Any:
    try:
        import scipy.special

        return scipy.special
    except ImportError:
        raise ImportError("this special function needs SciPy, an optional dependency of ember: "
                          "pip install 'ember[special]' (or pip install scipy)") from None


def _float(x: Tensor) -> Tensor:
    return x if x.is_floating_point() else x.to(get_default_dtype())


def _out(values: np.ndarray, like: Tensor) -> Tensor:
    return tensor(np.asarray(values).astype(like.dtype.np), device=like.device)


def _host(x: Tensor) -> np.ndarray:
    """The values for SciPy/NumPy on the host: an explicit copy for device tensors (``_out`` puts the
    result back on ``x``'s device)."""
    return x.detach().cpu().numpy()


# ---- special functions --------------------------------------------------------------------------------------
class _Polygamma(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, n: int) -> Tensor:
        ctx.save_for_backward(x)
        ctx.n = n
        sp = _scipy_special()
        values = sp.digamma(_host(x)) if n == 0 else sp.polygamma(n, _host(x))
        return _out(values, x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        (x,) = ctx.saved_tensors
        return g * _Polygamma.apply(x, ctx.n + 1), None


class _Lgamma(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        host = _host(x)
        values = np.asarray(_scipy_special().gammaln(host))
        # SciPy's gammaln gives -inf at -inf and inf for float64 denormals; torch (and the limit) give +inf and
        # -log|x| (lgamma(x) = -log|x| - 0.577 x + O(x^2) near 0).
        tiny = (host != 0) & (np.abs(host) < np.finfo(host.dtype).tiny)
        with np.errstate(divide="ignore"):
            values = np.where(tiny, -np.log(np.abs(host)), np.where(host == -np.inf, np.inf, values))
        return _out(values, x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _Polygamma.apply(x, 0)


class _I0(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _out(np.i0(_host(x)), x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * _I1.apply(x)


class _I1(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _out(_scipy_special().i1(_host(x)), x)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors  # I1'(x) = I0(x) - I1(x)/x
        safe = where(x == 0, ones_like(x), x)
        return g * where(x == 0, full_like(x, 0.5), _I0.apply(x) - _I1.apply(x) / safe)


class _Igamma(Function):
    """Regularized lower (``upper=False``) or upper incomplete gamma; differentiable in ``x`` only (as torch)."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, x: Tensor, upper: bool) -> Tensor:
        ctx.save_for_backward(a, x)
        ctx.upper = upper
        sp = _scipy_special()
        fn = sp.gammaincc if upper else sp.gammainc
        a_, x_ = np.broadcast_arrays(_host(a), _host(x))
        return _out(fn(a_, x_), x if x.is_floating_point() else a)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        a, x = ctx.saved_tensors
        # d/dx P(a, x) = x^(a-1) e^-x / Gamma(a)
        density = exp((a - 1) * log(x) - x - _Lgamma.apply(a))
        grad_x = g * (-density if ctx.upper else density)
        return None, grad_x, None


def lgamma(input: Tensor) -> Tensor:
    return _Lgamma.apply(_float(input))


def digamma(input: Tensor) -> Tensor:
    return _Polygamma.apply(_float(input), 0)


def polygamma(n: int, input: Tensor) -> Tensor:
    if n < 0:
        raise RuntimeError(f"polygamma(n, x) does not support negative n. Got n={n}")
    return _Polygamma.apply(_float(input), int(n))


def mvlgamma(input: Tensor, p: int) -> Tensor:
    """Multivariate log-gamma: sum_j lgamma(x - j/2) + p(p-1)/4 log(pi)."""
    x = _float(input)
    if bool((x <= (p - 1) / 2).any()):
        raise RuntimeError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    terms = stack([lgamma(x - j / 2) for j in range(p)]).sum(dim=0)
    return terms + p * (p - 1) / 4 * math.log(math.pi)


def i0(input: Tensor) -> Tensor:
    return _I0.apply(_float(input))


def igamma(input: Tensor, other: Tensor) -> Tensor:
    return _Igamma.apply(_float(input), _float(other), False)


def igammac(input: Tensor, other: Tensor) -> Tensor:
    return _Igamma.apply(_float(input), _float(other), True)
