"""lgamma, digamma and trigamma for the distributions' densities: aliases of ember.special's op records.

They were autograd Functions here until ``ember.special`` gained op records (issue 16); now the
distributions use the records (values accurate without SciPy, vjps lgamma' = digamma, digamma' =
polygamma(1), which differentiate again), so one implementation serves both. Python numbers are
accepted and become tensors of the default floating dtype.

Example:
    >>> import ember
    >>> from ember.distributions._special import lgamma
    >>> round(lgamma(ember.tensor(5.0)).item(), 6)  # log(4!)
    3.178054
"""
from __future__ import annotations

from typing import Any

from ember.creation import tensor
from ember.dtypes import get_default_dtype
from ember.ops import special_ops
from ember.tensor import Tensor


def _floating(x: Any) -> Tensor:
    x = x if isinstance(x, Tensor) else tensor(x)
    return x if x.is_floating_point() else x.to(get_default_dtype())


def lgamma(x: Any) -> Tensor:
    """log|Gamma(x)| elementwise, differentiable (gradient digamma(x))."""
    return special_ops.lgamma(_floating(x))


def digamma(x: Any) -> Tensor:
    """d/dx log Gamma(x) elementwise, differentiable (gradient trigamma(x))."""
    return special_ops.digamma(_floating(x))


def trigamma(x: Any) -> Tensor:
    """polygamma(1, x) elementwise, differentiable (gradient polygamma(2, x))."""
    return special_ops.polygamma(1, _floating(x))
