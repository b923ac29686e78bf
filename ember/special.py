"""``torch.special``: special functions under PyTorch's names (aliases of ember's ops where they exist).

Example:
    >>> import ember
    >>> round(ember.special.expit(tensor(0.0)).item(), 3), round(ember.special.entr(tensor(0.5)).item(), 4)
    (0.5, 0.3466)
"""
from __future__ import annotations

from typing import Any

from ember.autograd import Function
from ember.creation import full_like, ones_like, tensor, zeros_like
from ember.ops import elementwise, extra_math, nn_ops, reductions
from ember.ops.elementwise import log, sigmoid, where
from ember.dtypes import get_default_dtype
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "i0", "xlogy", "xlog1py", "log_softmax", "softmax", "sinc", "log1p", "expm1", "exp2", "round",
           "logsumexp", "entr", "ndtr", "log_ndtr", "gammainc", "gammaincc", "erfcx"]

expit = sigmoid
logit = extra_math.logit
erf = elementwise.erf
erfc = _functions.erfc
erfinv = extra_math.erfinv
gammaln = _sl.lgamma
digamma = psi = _sl.digamma
polygamma = _sl.polygamma
multigammaln = _sl.mvlgamma
i0 = _sl.i0
xlogy = extra_math.xlogy
sinc = _functions.sinc
log1p = elementwise.log1p
expm1 = extra_math.expm1
exp2 = extra_math.exp2
round = elementwise.round  # noqa: A001
logsumexp = reductions.logsumexp
gammainc = _sl.igamma
gammaincc = _sl.igammac


class _Xlog1py(Function):
    """x log1p(y), 0 where x == 0 (unless y is NaN), with torch's gradients: log1p(y) in x (0 where x == 0 and
    y <= -1) and x / (1 + y) in y."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor) -> Tensor:
        ctx.save_for_backward(x, y)
        return where((x == 0) & ~elementwise.isnan(y), zeros_like(x * y), x * elementwise.log1p(y))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        x, y = ctx.saved_tensors
        gx = where((x == 0) & (y <= -1), zeros_like(g * y), g * elementwise.log1p(y))
        gy = g * x / (y + 1)
        return gx, gy


def xlog1py(input: Any, other: Any) -> Tensor:
    """x * log1p(y), 0 where x == 0 (``torch.special.xlog1py``); NaN in y propagates first."""
    x = input if isinstance(input, Tensor) else tensor(input)
    y = other if isinstance(other, Tensor) else tensor(other)
    if not (x.is_floating_point() or y.is_floating_point()):
        x = x.to(get_default_dtype())
    return _Xlog1py.apply(x, y)


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return nn_ops.log_softmax(input, dim=dim, dtype=dtype)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return nn_ops.softmax(input, dim=dim, dtype=dtype)


class _Entr(Function):
    """-x log x with torch's gradient -(log x + 1) everywhere: +inf at 0 (the one-sided slope), NaN below 0
    (a where() composite gave 0 at 0, the slope of its constant branch)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        safe = where(x > 0, x, ones_like(x))
        return where(x > 0, -x * log(safe),
                           where(x == 0, zeros_like(x),
                                       where(x < 0, full_like(x, -float("inf")), x)))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * -(log(x) + 1)


def entr(input: Tensor) -> Tensor:
    """-x log x elementwise (0 at 0, -inf for negative x, NaN for NaN).

    Example: ``ember.special.entr(tensor([0.5]))`` is ``tensor([0.3466])``."""
    return _Entr.apply(_sl._float(input))


def erfcx(input: Tensor) -> Tensor:
    """exp(x^2) erfc(x): finite where erfc underflows (``erfcx(30.0)`` is 0.0188)."""
    return extra_math.erfcx(_sl._float(input))


_SQRT_HALF = 0.5 ** 0.5


def ndtr(input: Tensor) -> Tensor:
    """The standard normal CDF as 0.5 erfc(-x / sqrt 2): the lower tail keeps its digits (ndtr(-30) = 4.9e-198)."""
    return 0.5 * extra_math.erfc(_sl._float(input) * -_SQRT_HALF)


def log_ndtr(input: Tensor) -> Tensor:
    """log of the normal CDF, PyTorch's split: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 below -1 (no underflow:
    log_ndtr(-40) = -804.6), log1p(-erfc(x / sqrt 2) / 2) above (no cancellation near 0)."""
    x = _sl._float(input)
    low = elementwise.clamp(x, max=-1.0)
    high = elementwise.clamp(x, min=-1.0)
    lower = log(extra_math.erfcx(low * -_SQRT_HALF) * 0.5) - low * low * 0.5
    upper = elementwise.log1p(extra_math.erfc(high * _SQRT_HALF) * -0.5)
    return where(x < -1.0, lower, upper)
