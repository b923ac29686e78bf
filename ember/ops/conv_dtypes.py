"""Convolutions of integer and complex tensors, which torch computes and ember's kernels (float only) refused.

Complex: torch's ``complex_convolution`` (aten/src/ATen/native/Convolution.cpp) by Gauss's trick, three real
convolutions ``a = conv(xr, wr, br)``, ``b = conv(xi, wi)``, ``c = conv(xr + xi, wr + wi, br + bi)`` and the
result ``(a - b) + i (c - a - b)``, so the rounding is torch's; gradients flow through the real convolutions.
Integers: computed in float64 and cast back (exact while every partial sum stays below 2**53; torch's int64
kernel wraps on overflow where this rounds). Bool and mixed dtypes fall through to the caller's checks.

Example:
    >>> conv_other_dtypes(conv2d, x_int64, w_int64, None, (1, 1, 0, 1, 1))   # int64 result, as torch
"""
from __future__ import annotations

from typing import Any, Callable

from ember import dtypes
from ember.ops import complex_ops


def conv_other_dtypes(fn: Callable[..., Any], input: Any, weight: Any, bias: Any, args: tuple) -> Any:
    """``fn(input, weight, bias, *args)`` for integer/complex operands of one dtype; None for the float path."""
    dt = input.dtype
    if dt.is_floating_point or dt is dtypes.bool_ or weight.dtype is not dt or (bias is not None and bias.dtype is not dt):
        return None
    if dt.is_complex:
        xr, xi, wr, wi = input.real, input.imag, weight.real, weight.imag
        a = fn(xr, wr, None if bias is None else bias.real, *args)
        b = fn(xi, wi, None, *args)
        c = fn(xr + xi, wr + wi, None if bias is None else bias.real + bias.imag, *args)
        return complex_ops.complex(a - b, c - a - b)
    wide = dtypes.float64
    out = fn(input.to(wide), weight.to(wide), None if bias is None else bias.to(wide), *args)
    return out.to(dt)
