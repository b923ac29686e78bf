"""``randn``'s block fill: PyTorch turns 16 uniforms at a time into 16 normals by Box-Muller (the first 8
give the radii, the last 8 the angles). For float32 its x86 kernel evaluates log, sin and cos with Cephes
polynomials in float32 (``avx_mathfun.h``) and the compiler fuses multiply-adds; this module evaluates the
same polynomials in the same order with the same fusions, so ``randn`` agrees bit for bit (checked on
millions of values). Float64 calls the C library's log/sin/cos as PyTorch's scalar loop does.
"""
from __future__ import annotations

import numpy as np

from ember.mt_random import libm
from ember.ops.fma import fma_arrays

F32 = np.float32


def _fma(a: np.ndarray, b: object, c: object) -> np.ndarray:
    """a * b + c rounded once to float32: the float64 product of two float32 values is exact."""
    return (np.asarray(a, np.float64) * np.float64(b) + np.asarray(c, np.float64)).astype(F32)


_LOG_POLY = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
             -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
_MIN_NORMAL = np.array(0x00800000, np.int32).view(F32)


def cephes_log(x: np.ndarray) -> np.ndarray:
    """Natural log of positive float32 values: exponent split, then a degree-9 polynomial on [sqrt(1/2), sqrt(2))."""
    x = np.maximum(x.astype(F32), _MIN_NORMAL)
    bits = x.view(np.int32)
    e = ((bits >> 23) - 0x7F).astype(F32) + F32(1)
    x = ((bits & np.int32(~0x7F800000)) | np.array(0.5, F32).view(np.int32)).view(F32)  # mantissa in [0.5, 1)
    small = x < F32(0.707106781186547524)
    x = (x - F32(1)) + np.where(small, x, F32(0))
    e = e - small.astype(F32)
    z = x * x
    y = np.full_like(x, F32(_LOG_POLY[0]))
    for c in _LOG_POLY[1:]:
        y = _fma(y, x, F32(c))
    y = _fma(y * x, z, e * F32(-2.12194440e-4))
    y = _fma(z, F32(-0.5), y)
    return _fma(e, F32(0.693359375), x + y)


def cephes_sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sin, cos) of non-negative float32 angles: reduction by pi/4 in three parts, two polynomials."""
    x = np.abs(x.astype(F32))
    octant = x * F32(1.27323954473516)
    j = (octant.astype(np.int32) + 1) & ~1
    y = j.astype(F32)
    sin_negative = (j & 4) != 0
    cos_negative = (~(j - 2) & 4) != 0
    use_sin_poly = (j & 2) == 0
    x = _fma(y, F32(-0.78515625), x)
    x = _fma(y, F32(-2.4187564849853515625e-4), x)
    x = _fma(y, F32(-3.77489497744594108e-8), x)
    z = x * x
    cos_poly = _fma(F32(2.443315711809948e-5), z, F32(-1.388731625493765e-3))
    cos_poly = _fma(cos_poly, z, F32(4.166664568298827e-2))
    cos_poly = _fma(cos_poly * z, z, -(z * F32(0.5))) + F32(1)
    sin_poly = _fma(F32(-1.9515295891e-4), z, F32(8.3321608736e-3))
    sin_poly = _fma(sin_poly, z, F32(-1.6666654611e-1))
    sin_poly = _fma(sin_poly * z, x, x)
    sin = np.where(use_sin_poly, sin_poly, cos_poly)
    cos = np.where(use_sin_poly, cos_poly, sin_poly)
    return np.where(sin_negative, -sin, sin), np.where(cos_negative, -cos, cos)


def fill16_float32(data: np.ndarray, mean: float, std: float) -> None:
    """Turn whole blocks of 16 uniforms (float32, in place) into normals."""
    blocks = data[: data.size // 16 * 16].reshape(-1, 2, 8)
    radius = np.sqrt(F32(-2) * cephes_log(F32(1) - blocks[:, 0]))
    sin, cos = cephes_sincos(F32(2.0 * np.pi) * blocks[:, 1])
    blocks[:, 0] = _fma(radius * cos, F32(std), F32(mean))
    blocks[:, 1] = _fma(radius * sin, F32(std), F32(mean))


def fill16_float64(data: np.ndarray, mean: float, std: float) -> None:
    """Whole blocks of 16 doubles: PyTorch's scalar loop with the C library's log/cos/sin (ember/mt_random/libm.py)
    and ``value * std + mean`` as one fused multiply-add (the kernel is compiled with contraction)."""
    blocks = data[: data.size // 16 * 16].reshape(-1, 2, 8)
    radius = np.sqrt(-2.0 * libm.log(1.0 - blocks[:, 0]))
    theta = 2.0 * np.pi * blocks[:, 1]
    if std == 1.0 and mean == 0.0:  # fma(x, 1, 0) is x
        blocks[:, 0] = radius * libm.cos(theta)
        blocks[:, 1] = radius * libm.sin(theta)
        return
    blocks[:, 0] = fma_arrays(np, radius * libm.cos(theta), float(std), float(mean))
    blocks[:, 1] = fma_arrays(np, radius * libm.sin(theta), float(std), float(mean))
