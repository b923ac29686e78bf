"""Affine quantization on arrays, with the rounding of PyTorch's x86/fbgemm CPU kernels (torch 2.13).

Every function takes the array namespace ``xp`` first (NumPy on the CPU) and works on whole arrays: no loop
per element. What the kernels compute, measured against torch 2.13 (tests/ao/test_quantize_numerics_vs_torch.py):

* per tensor, 8-bit (quint8, qint8): fbgemm's vector path, ``rint(fma(x, 1/scale, zero_point))`` in float32
  (one rounding for the multiply-add: :func:`fma_f32`), then clamped; NaN becomes the top of the range
  (``min_ps(NaN, max)`` gives ``max``), -inf the bottom;
* per tensor, qint32, and per channel (every dtype): ``rint(float(zero_point) + x * (1/scale))`` with two
  float32 roundings; a NaN is INT32_MIN for qint32 and 0 for 8-bit per channel;
* ``1/scale`` is float32 division of 1 by the float32 scale; rint is round-half-to-even;
* dequantize: ``float(q - zero_point) * scale`` in float32 (per tensor, float32 scale; the difference in int32
  arithmetic), or the difference in float32 and the product with the float64 scale in float64, rounded to
  float32 (per channel).

Example:
    >>> import numpy as np
    >>> quantize_per_tensor(np, np.array([0.25, 1.0], np.float32), 0.1, 10, -128, 127, fused=True)
    array([12, 20], dtype=int64)
"""
from __future__ import annotations

from typing import Any

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
# The largest float32 below 2**31: fbgemm clips there before converting to int32 (2147483520).
_INT32_FLOAT_MAX = 2147483520.0


def fma_f32(xp: Any, a: Any, b: Any, c: Any) -> Any:
    """float32 ``a * b + c`` rounded once (a fused multiply-add), for float32 arrays ``a``, ``b`` and ``c``.

    The float64 product of two float32 values is exact (24 + 24 bits), so only the float64 sum can round. Rounding
    that sum to float32 is then the correct rounding of the exact ``a * b + c`` except when the sum was inexact and
    landed exactly on a float32 midpoint (double rounding); those rare elements are redone with the sum rounded to
    odd (its last bit forced to 1 when inexact, Boldo and Melquiond), which makes the rounding to float32 correct.
    """
    prod = a.astype(xp.float64) * b.astype(xp.float64)
    addend = xp.asarray(c, dtype=xp.float64)
    total = prod + addend
    out = total.astype(xp.float32)
    # a midpoint between two float32 values has a float64 form ending in a 1 followed by 28 zeros
    tail = total.view(xp.int64) & ((1 << 29) - 1)
    suspects = xp.flatnonzero((tail == (1 << 28)) & xp.isfinite(total))
    if suspects.size:
        p, q, t = (xp.broadcast_to(v, total.shape).reshape(-1)[suspects] for v in (prod, addend, total))
        back = t - p
        error = (p - (t - back)) + (q - back)  # TwoSum: the exact error of the float64 sum
        toward = xp.where(error > 0, xp.inf, -xp.inf)
        odd = xp.where(error != 0, xp.nextafter(t, toward), t)
        out.reshape(-1)[suspects] = odd.astype(xp.float32)
    return out


def inverse_scale(xp: Any, scale: Any) -> Any:
    """``1.0f / float(scale)``: float32 division, as the kernels compute it."""
    return xp.float32(1.0) / xp.asarray(scale, dtype=xp.float32)


def quantize_per_tensor(xp: Any, x: Any, scale: float, zero_point: int, qmin: int, qmax: int, fused: bool) -> Any:
    """Integer values of float32 ``x`` quantized with one scale and zero point (float32 arrays holding integers
    for 8-bit dtypes, int64 for qint32).

    ``fused`` picks the 8-bit vector kernel (one rounding of ``x * inv + zp``); qint32 uses two roundings.
    """
    x = x.astype(xp.float32, copy=False)
    inv = inverse_scale(xp, scale)
    if fused:
        t = xp.rint(fma_f32(xp, x, inv, xp.float32(zero_point)))
        # fmin first: NaN -> qmax (min_ps(NaN, max) answers max), -inf -> qmin; everything is in range after
        return xp.fmax(xp.fmin(t, xp.float32(qmax)), xp.float32(qmin))
    t = xp.float32(zero_point) + x * inv
    return _round_clamp(xp, t, qmin, qmax, nan_value=INT32_MIN)


def quantize_per_channel(xp: Any, x: Any, scales: Any, zero_points: Any, axis: int, qmin: int, qmax: int) -> Any:
    """Integer values (int64) of float32 ``x`` quantized with one scale and zero point per index of ``axis``."""
    x = x.astype(xp.float32, copy=False)
    shape = [1] * x.ndim
    shape[axis] = -1
    inv = inverse_scale(xp, scales).reshape(shape)
    zps = xp.asarray(zero_points, dtype=xp.float32).reshape(shape)
    t = zps + x * inv
    nan_value = INT32_MIN if qmax == INT32_MAX else 0
    return _round_clamp(xp, t, qmin, qmax, nan_value=nan_value)


def _round_clamp(xp: Any, t: Any, qmin: int, qmax: int, nan_value: int) -> Any:
    rounded = xp.rint(t.astype(xp.float64))
    nan = xp.isnan(rounded)
    out = xp.clip(xp.where(nan, 0.0, rounded), qmin, qmax).astype(xp.int64)
    if nan.any():
        out = xp.where(nan, max(qmin, min(qmax, nan_value)), out)
    return out


def dequantize_per_tensor(xp: Any, q: Any, scale: float, zero_point: int) -> Any:
    """float32 ``float(q - zero_point) * scale`` with the difference in int32 arithmetic, as the kernel (qint32's
    extreme values wrap around: INT32_MIN - 5 dequantizes to a large positive number in PyTorch too)."""
    diff = _wrap_int32(xp, q.astype(xp.int64) - zero_point)
    return diff.astype(xp.float32) * xp.float32(scale)


def _wrap_int32(xp: Any, values: Any) -> Any:
    return (values + 2 ** 31) % 2 ** 32 - 2 ** 31


def dequantize_per_channel(xp: Any, q: Any, scales: Any, zero_points: Any, axis: int) -> Any:
    """float32 of ``(float(q) - zero_point) * scale``: the difference in float32, the product with the float64 scale
    in float64, per index of ``axis``."""
    shape = [1] * q.ndim
    shape[axis] = -1
    diff = q.astype(xp.float32) - xp.asarray(zero_points, dtype=xp.float32).reshape(shape)
    return (diff.astype(xp.float64) * xp.asarray(scales, dtype=xp.float64).reshape(shape)).astype(xp.float32)
