"""``torch.special``: special functions under PyTorch's names (aliases of ember's ops where they exist).

Example:
    >>> import ember
    >>> round(ember.special.expit(ember.tensor(0.0)).item(), 3), round(ember.special.entr(ember.tensor(0.5)).item(), 4)
    (0.5, 0.3466)
"""
from __future__ import annotations

from typing import Any

from ember.creation import full_like, ones_like, tensor, zeros_like
from ember.ops import elementwise, extra_math, nn_ops, reductions
from ember.ops.elementwise import log, sigmoid, where
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "i0", "xlogy", "xlog1py", "log_softmax", "softmax", "sinc", "log1p", "expm1", "exp2", "round",
           "logsumexp", "entr", "ndtr", "log_ndtr", "gammainc", "gammaincc"]

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


def xlog1py(input: Any, other: Any) -> Tensor:
    x = input if isinstance(input, Tensor) else tensor(input)
    y = other if isinstance(other, Tensor) else tensor(other)
    return where(x == 0, zeros_like(x * y), x * elementwise.log1p(y))


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return nn_ops.log_softmax(input, dim=dim, dtype=dtype)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return nn_ops.softmax(input, dim=dim, dtype=dtype)


def entr(input: Tensor) -> Tensor:
    """-x log x elementwise (0 at 0, -inf for negative x)."""
    safe = where(input > 0, input, ones_like(input))
    return where(input > 0, -input * log(safe),
                       where(input == 0, zeros_like(input), full_like(input, -float("inf"))))


def ndtr(input: Tensor) -> Tensor:
    return 0.5 * (1 + elementwise.erf(input / 2 ** 0.5))


def log_ndtr(input: Tensor) -> Tensor:
    return log(ndtr(input))
