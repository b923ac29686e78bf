"""``torch.special``: special functions under PyTorch's names (aliases of ember's ops where they exist).

Example:
    >>> import ember
    >>> round(ember.special.expit(ember.tensor(0.0)).item(), 3), round(ember.special.entr(ember.tensor(0.5)).item(), 4)
    (0.5, 0.3466)
"""
from __future__ import annotations

from typing import Any

import ember
from ember.surface import functions as _functions, special_linalg as _sl
from ember.tensor import Tensor

__all__ = ["expit", "logit", "erf", "erfc", "erfinv", "gammaln", "digamma", "psi", "polygamma", "multigammaln",
           "i0", "xlogy", "xlog1py", "log_softmax", "softmax", "sinc", "log1p", "expm1", "exp2", "round",
           "logsumexp", "entr", "ndtr", "log_ndtr", "gammainc", "gammaincc"]

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


def xlog1py(input: Any, other: Any) -> Tensor:
    x = input if isinstance(input, Tensor) else ember.tensor(input)
    y = other if isinstance(other, Tensor) else ember.tensor(other)
    return ember.where(x == 0, ember.zeros_like(x * y), x * ember.log1p(y))


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return ember.nn.functional.log_softmax(input, dim=dim, dtype=dtype)


def softmax(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
    return ember.nn.functional.softmax(input, dim=dim, dtype=dtype)


def entr(input: Tensor) -> Tensor:
    """-x log x elementwise (0 at 0, -inf for negative x)."""
    safe = ember.where(input > 0, input, ember.ones_like(input))
    return ember.where(input > 0, -input * ember.log(safe),
                       ember.where(input == 0, ember.zeros_like(input), ember.full_like(input, -float("inf"))))


def ndtr(input: Tensor) -> Tensor:
    return 0.5 * (1 + ember.erf(input / 2 ** 0.5))


def log_ndtr(input: Tensor) -> Tensor:
    return ember.log(ndtr(input))
