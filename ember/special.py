"""``torch.special``: special functions under PyTorch's names (aliases of ember's ops where they exist).

Example:
    >>> import ember
    >>> round(ember.special.expit(ember.tensor(0.0)).item(), 3), round(ember.special.entr(ember.tensor(0.5)).item(), 4)
    (0.5, 0.3466)
"""
from __future__ import annotations

from typing import Any

import ember
from ember.autograd import Function
from ember.ops import extra_math as _extra_math
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "i0", "xlogy", "xlog1py", "log_softmax", "softmax", "sinc", "log1p", "expm1", "exp2", "round",
           "logsumexp", "entr", "ndtr", "log_ndtr", "gammainc", "gammaincc", "erfcx"]

expit = ember.sigmoid
logit = ember.logit
erf = ember.erf
erfc = _functions.erfc
erfinv = ember.erfinv
gammaln = _sl.lgamma
digamma = psi = _sl.digamma
polygamma = _sl.polygamma
multigammaln = _sl.mvlgamma
i0 = _sl.i0
xlogy = ember.xlogy
sinc = _functions.sinc
log1p = ember.log1p
expm1 = ember.expm1
exp2 = ember.exp2
round = ember.round  # noqa: A001
logsumexp = ember.logsumexp
gammainc = _sl.igamma
gammaincc = _sl.igammac


class _Xlog1py(Function):
    """x log1p(y), 0 where x == 0 (unless y is NaN), with torch's gradients: log1p(y) in x (0 where x == 0 and
    y <= -1) and x / (1 + y) in y."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return ember.where((x == 0) & ~ember.isnan(y), ember.zeros_like(x * y), x * ember.log1p(y))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        x, y = ctx.saved_tensors
        gx = ember.where((x == 0) & (y <= -1), ember.zeros_like(g * y), g * ember.log1p(y))
        gy = g * x / (y + 1)
        return gx, gy


def xlog1py(input: Any, other: Any) -> Tensor:
    """x * log1p(y), 0 where x == 0 (``torch.special.xlog1py``); NaN in y propagates first."""
    x = input if isinstance(input, Tensor) else ember.tensor(input)
    y = other if isinstance(other, Tensor) else ember.tensor(other)
    if not (x.is_floating_point() or y.is_floating_point()):
        x = x.to(ember.get_default_dtype())
    return _Xlog1py.apply(x, y)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return ember.nn.functional.log_softmax(input, dim=dim, dtype=dtype)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return ember.nn.functional.softmax(input, dim=dim, dtype=dtype)


class _Entr(Function):
    """-x log x with torch's gradient -(log x + 1) everywhere: +inf at 0 (the one-sided slope), NaN below 0
    (a where() composite gave 0 at 0, the slope of its constant branch)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        safe = ember.where(x > 0, x, ember.ones_like(x))
        return ember.where(x > 0, -x * ember.log(safe),
                           ember.where(x == 0, ember.zeros_like(x),
                                       ember.where(x < 0, ember.full_like(x, -float("inf")), x)))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * -(ember.log(x) + 1)


def entr(input: Tensor) -> Tensor:
    """-x log x elementwise (0 at 0, -inf for negative x, NaN for NaN).

    Example: ``ember.special.entr(ember.tensor([0.5]))`` is ``tensor([0.3466])``."""
    return _Entr.apply(_sl._float(input))


def erfcx(input: Tensor) -> Tensor:
    """exp(x^2) erfc(x): finite where erfc underflows (``erfcx(30.0)`` is 0.0188)."""
    return _extra_math.erfcx(_sl._float(input))


_SQRT_HALF = 0.5 ** 0.5


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF as 0.5 erfc(-x / sqrt 2): the lower tail keeps its digits (ndtr(-30) = 4.9e-198)."""
    return 0.5 * _extra_math.erfc(_sl._float(input) * -_SQRT_HALF)


def log_ndtr(input: Tensor) -> Tensor:
    """log of the normal CDF, PyTorch's split: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1 (no underflow:
    log_ndtr(-40) = -804.6), log1p(-erfc(x / sqrt 2) / 2) above (no cancellation near 0)."""
    x = _sl._float(input)
    low = ember.clamp(x, max=-1.0)
    high = ember.clamp(x, min=-1.0)
    lower = ember.log(_extra_math.erfcx(low * -_SQRT_HALF) * 0.5) - low * low * 0.5
    upper = ember.log1p(_extra_math.erfc(high * _SQRT_HALF) * -0.5)
    return ember.where(x < -1.0, lower, upper)
