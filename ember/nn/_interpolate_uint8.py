"""uint8 ``bilinear``/``bicubic`` interpolation with PyTorch's CPU arithmetic (Pillow's fixed-point resampler).

torch resizes uint8 images (``torchvision.transforms.v2.Resize`` on uint8 tensors) with a separable fixed-point
kernel: per output pixel along an axis, float64 filter weights normalized to sum 1 (``bilinear``: the triangle,
``bicubic``: Keys' cubic with a = -0.75, or a = -0.5 with ``antialias``; a window widened by the scale when
antialiasing a downscale), turned into int16 with the most precision bits that keep the largest weight under
2**15; each pass sums ``weight * pixel`` in integers, adds half a unit, shifts right and saturates to [0, 255].
The width is resampled first, into a uint8 buffer (so a bicubic overshoot is clipped between the passes), then
the height. The results differ from rounding the float result by 1 (bilinear) and up to ~20 (bicubic, the
intermediate clip), so ember follows the integer algorithm exactly.

Example:
    >>> import numpy as np
    >>> x = np.arange(0, 256, 16, dtype=np.uint8).reshape(1, 1, 4, 4)
    >>> resize_uint8(x, (2, 2), "bilinear", False, (None, None), False)[0, 0].tolist()
    [[40, 72], [168, 200]]
"""
from __future__ import annotations

from typing import Any

import numpy as np


def _filter(mode: str, antialias: bool) -> Any:
    if mode == "bilinear":
        return lambda x: np.where(np.abs(x) < 1.0, 1.0 - np.abs(x), 0.0)
    a = -0.5 if antialias else -0.75

    def cubic(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        near = ((a + 2) * x - (a + 3)) * x * x + 1
        far = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
    return cubic


def _scale(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> float:
    """ATen's ``area_pixel_compute_scale``."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size


def _float_weights_aa(in_size: int, out_size: int, s: float, interp: int, filt: Any) -> tuple:
    """ATen's ``_compute_indices_min_size_weights_aa``: a window of the filter widened by the scale, normalized."""
    support = (interp * 0.5) * s if s >= 1.0 else interp * 0.5
    width = int(np.ceil(support)) * 2 + 1
    invscale = 1.0 / s if s >= 1.0 else 1.0
    center = s * (np.arange(out_size, dtype=np.float64) + 0.5)
    xmin = np.maximum((center - support + 0.5).astype(np.int64), 0)  # C's truncation toward zero
    xsize = np.clip(np.minimum((center + support + 0.5).astype(np.int64), in_size) - xmin, 0, width)
    j = np.arange(width)
    w = np.where(j[None, :] < xsize[:, None], filt((j[None, :] + xmin[:, None] - center[:, None] + 0.5) * invscale),
                 0.0)
    total = np.zeros(out_size)
    for k in range(width):  # summed left to right, as the C loop (not NumPy's pairwise sum)
        total += w[:, k]
    w = np.where(total[:, None] != 0.0, w / np.where(total != 0.0, total, 1.0)[:, None], w)
    return xmin, w, float(w.max()) if w.size else 0.0


def _float_weights(in_size: int, out_size: int, s: float, interp: int, filt: Any, align_corners: bool) -> tuple:
    """ATen's ``_compute_indices_min_size_weights`` (no antialias): the float kernels' source index and lambda, the
    taps that fall outside the image added onto the first/last valid one."""
    i = np.arange(out_size, dtype=np.float64)
    if align_corners:
        real = s * i
    else:
        real = s * (i + 0.5) - 0.5
        if interp == 2:
            real = np.maximum(real, 0.0)  # linear clamps negative source indices; cubic keeps them
    index = np.minimum(np.floor(real.astype(np.float32)).astype(np.int64), in_size - 1)  # floorf: float32
    lam = np.minimum(np.maximum(real - index, 0.0), 1.0)
    support = interp // 2
    low = index - support + 1
    xmin = np.maximum(low, 0)
    xsize = np.clip(np.minimum(index + support + 1, in_size) - xmin, 0, interp)
    w = np.zeros((out_size, interp))
    largest = 0.0
    for o in range(out_size):
        slot = 0
        for k in range(interp):
            value = float(filt(np.float64(k + 1 - support) - lam[o]))
            if low[o] + k <= 0:
                slot = 0
            elif low[o] + k >= in_size - 1:
                slot = int(xsize[o]) - 1
            w[o, slot] += value
            largest = max(largest, w[o, slot])
            slot += 1
    return xmin, w, largest


def int16_weights(in_size: int, out_size: int, mode: str, align_corners: bool, scale: float | None,
                  antialias: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """(first input index per output (out,), int16 weights (out, K), precision bits): ATen's
    ``_compute_index_ranges_int16_weights``."""
    interp = 2 if mode == "bilinear" else 4
    s = _scale(in_size, out_size, align_corners, scale)
    filt = _filter(mode, antialias)
    if antialias:
        xmin, w, largest = _float_weights_aa(in_size, out_size, s, interp, filt)
    else:
        xmin, w, largest = _float_weights(in_size, out_size, s, interp, filt, align_corners)
    precision = 0
    while precision < 22 and int(0.5 + largest * (1 << (precision + 1))) < (1 << 15):
        precision += 1
    v = w * (1 << precision)
    ints = np.where(v < 0, np.trunc(v - 0.5), np.trunc(v + 0.5)).astype(np.int64)
    return xmin, ints, precision


def _pass(x: np.ndarray, axis: int, xmin: np.ndarray, weights: np.ndarray, precision: int) -> np.ndarray:
    """One separable pass along ``axis`` in integers: sum, half a unit, arithmetic shift, saturate."""
    n = x.shape[axis]
    index = np.clip(xmin[:, None] + np.arange(weights.shape[1])[None, :], 0, n - 1)  # (zero weights past xsize)
    taps = np.take(x.astype(np.int64), index, axis=axis)  # axis -> (out, K)
    shape = [1] * taps.ndim
    shape[axis], shape[axis + 1] = weights.shape
    acc = (taps * weights.reshape(shape)).sum(axis=axis + 1) + ((1 << precision) >> 1)
    return np.clip(acc >> precision, 0, 255).astype(np.uint8)


def resize_uint8(x: np.ndarray, size: tuple, mode: str, align_corners: bool, scales: tuple,
                 antialias: bool) -> np.ndarray:
    """(N, C, H, W) uint8 ``x`` resized to ``size`` (H', W'): the width first, then the height, as torch."""
    out = np.ascontiguousarray(x)
    for axis in (3, 2):
        in_size, out_size = x.shape[axis], size[axis - 2]
        if in_size == out_size:
            continue  # torch skips a pass whose size does not change, whatever the scale factor
        xmin, weights, precision = int16_weights(in_size, out_size, mode, align_corners, scales[axis - 2],
                                                 antialias)
        out = _pass(out, axis, xmin, weights, precision)
    return out
