"""fbgemm's ``ChooseQuantizationParams`` (PyTorch's QuantUtils.h), vectorized over channels.

PyTorch's fused QAT kernel (``fused_moving_avg_obs_fake_quant``) and its dynamic linear choose scale and zero point
this way, not with the Python observers' float32 formula: the range is widened to hold 0, made symmetric when
``preserve_sparsity``, the scale computed in double, replaced by 0.1 when its float reciprocal overflows and raised
to 6.1e-5 (widening the range) when smaller, and the zero point picked from the end with the smaller error, then
rounded half to even. The precision of each step (float or double) follows the C++ source.

Example:
    >>> import numpy as np
    >>> scale, zp = choose_qparams_fbgemm(np.array([-1.0]), np.array([3.0]), 0, 255, False)
    >>> float(scale[0]), int(zp[0])
    (0.01568627450980392, 64)
"""
from __future__ import annotations

from typing import Any

import numpy as np

f32 = np.float32
SMALL_SCALE = f32(6.1e-5)


def choose_qparams_fbgemm(lo: Any, hi: Any, qmin: int, qmax: int, preserve_sparsity: bool,
                          reduce_range: bool = False) -> tuple:
    """(scale float64 array, zero point int64 array) per element of the float32 ``lo``/``hi`` arrays."""
    lo = np.atleast_1d(np.asarray(lo, dtype=f32)).copy()
    hi = np.atleast_1d(np.asarray(hi, dtype=f32)).copy()
    if reduce_range:
        qmin, qmax = int(qmin / 2), int(qmax / 2)  # C++ integer division truncates toward 0
    straddles = (lo < 0) & (hi > 0)
    if preserve_sparsity:
        sym_min = -((qmax - qmin) // 2 + 1)
        sym_max = (qmax - qmin) // 2
        max_scale = np.maximum(np.abs(lo / f32(sym_min)), np.abs(hi / f32(sym_max))).astype(np.float64)
        lo = np.where(straddles, (max_scale * sym_min).astype(f32), lo)
        hi = np.where(straddles, (max_scale * sym_max).astype(f32), hi)
    lo, hi = np.minimum(lo, f32(0)), np.maximum(hi, f32(0))
    scale = (hi.astype(np.float64) - lo.astype(np.float64)) / (qmax - qmin)
    with np.errstate(divide="ignore", over="ignore"):
        degenerate = (scale.astype(f32) == 0) | np.isinf(f32(1) / scale.astype(f32))
    scale = np.where(degenerate, 0.1, scale)
    small = scale < np.float64(SMALL_SCALE)
    if small.any():
        original = scale.astype(f32)
        with np.errstate(divide="ignore"):
            amplifier = SMALL_SCALE / original
        span = f32(qmax - qmin)
        new_hi = np.where(lo == 0, SMALL_SCALE * span, np.where(hi == 0, hi, hi * amplifier))
        new_lo = np.where(lo == 0, lo, np.where(hi == 0, -SMALL_SCALE * span, lo * amplifier))
        lo, hi = np.where(small, new_lo, lo).astype(f32), np.where(small, new_hi, hi).astype(f32)
        scale = np.where(small, np.float64(SMALL_SCALE), scale)
    lo64, hi64 = lo.astype(np.float64), hi.astype(np.float64)
    from_min, from_max = qmin - lo64 / scale, qmax - hi64 / scale
    error_min = abs(qmin) - np.abs(lo64 / scale)
    error_max = abs(qmax) - np.abs(hi64 / scale)
    initial = np.where(error_min < error_max, from_min, from_max)
    if preserve_sparsity:
        initial = np.where((lo < 0) & (hi > 0), (qmin + qmax) / 2, initial)
    zero_point = np.where(initial < qmin, qmin, np.where(initial > qmax, qmax, np.rint(initial))).astype(np.int64)
    return scale, zero_point


def choose_qparams_fused(running_min: Any, running_max: Any, qmin: int, qmax: int, symmetric: bool) -> tuple:
    """Scale (float32) and zero point (int32) arrays as the fused fake-quant kernel stores them."""
    lo = np.atleast_1d(np.asarray(running_min, dtype=f32))
    hi = np.atleast_1d(np.asarray(running_max, dtype=f32))
    scale, zero_point = choose_qparams_fbgemm(np.minimum(lo, f32(0)), np.maximum(hi, f32(0)), qmin, qmax, symmetric)
    return scale.astype(f32), zero_point.astype(np.int32)
