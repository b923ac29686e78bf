"""lgamma, digamma and trigamma as differentiable ember functions, for the distributions' densities.

The values come from ``ember.backends.special_function`` (SciPy when installed, else ember's
vectorized NumPy versions in :mod:`ember.ops.special_math`, CuPy's on GPU); trigamma, which neither
table has, is computed here on the tensor's own array namespace. The derivative chain is
lgamma' = digamma, digamma' = trigamma (trigamma is not differentiated further). When ember gains
lgamma/digamma op records (issue 16's ``ember.special``), these become aliases of them.

Example:
    >>> import ember
    >>> from ember.distributions._special import lgamma
    >>> round(lgamma(ember.tensor(5.0)).item(), 6)  # log(4!)
    3.178054
"""
from __future__ import annotations

import math
from typing import Any

from ember.creation import tensor
from ember.dtypes import get_default_dtype
from ember.autograd import Function
from ember.backends import special_function
from ember.tensor import Tensor

# Asymptotic series of trigamma in 1/z: 1/z + 1/(2z^2) + sum B_2k / z^(2k+1).
_TRIGAMMA_ASYM = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6)


def _trigamma_array(xp: Any, x: Any) -> Any:
    """psi_1(x) elementwise: reflection for x < 0.5, recurrence up to x >= 12, then the series."""
    x = x.astype(xp.float64)
    reflect = x < 0.5
    z = xp.where(reflect, 1.0 - x, x)
    acc = xp.zeros_like(z)
    for _ in range(12):  # psi_1(z) = 1/z^2 + psi_1(z + 1)
        small = z < 12.0
        acc = acc + xp.where(small, 1.0 / (z * z), 0.0)
        z = xp.where(small, z + 1.0, z)
    inv = 1.0 / z
    inv2 = inv * inv
    series = xp.zeros_like(z)
    for coeff in reversed(_TRIGAMMA_ASYM):
        series = series * inv2 + coeff
    value = acc + inv + 0.5 * inv2 + inv * inv2 * series
    with xp.errstate(divide="ignore", invalid="ignore") if hasattr(xp, "errstate") else _nothing():
        with_reflection = (math.pi / xp.sin(math.pi * x)) ** 2 - value  # psi_1(1-x) + psi_1(x) = pi^2/sin^2(pi x)
    poles = (x <= 0) & (x == xp.floor(x))
    return xp.where(poles, xp.inf, xp.where(reflect, with_reflection, value))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _apply(fn_name: str, x: Tensor) -> Tensor:
    data = x.detach()._data
    xp = x.device.xp
    if fn_name == "trigamma":
        values = _trigamma_array(xp, data)
    else:
        values = special_function(xp, fn_name)(data)
    return Tensor._make(xp.asarray(values).astype(data.dtype, copy=False), x.device, False)


class _Trigamma(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return _apply("trigamma", x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Any:
        raise RuntimeError("trigamma: the derivative of trigamma (polygamma(2, x)) is not implemented in ember")


class _Digamma(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _apply("digamma", x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * _Trigamma.apply(x)


class _Lgamma(Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        return _apply("lgamma", x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return grad * _Digamma.apply(x)


def _floating(x: Any) -> Tensor:
    x = x if isinstance(x, Tensor) else tensor(x)
    return x if x.is_floating_point() else x.to(get_default_dtype())


def lgamma(x: Any) -> Tensor:
    """log|Gamma(x)| elementwise, differentiable (gradient digamma(x))."""
    return _Lgamma.apply(_floating(x))


def digamma(x: Any) -> Tensor:
    """d/dx log Gamma(x) elementwise, differentiable (gradient trigamma(x))."""
    return _Digamma.apply(_floating(x))


def trigamma(x: Any) -> Tensor:
    """polygamma(1, x) elementwise (not differentiable further)."""
    return _Trigamma.apply(_floating(x))
