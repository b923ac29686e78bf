"""Separable resampling with PIL's / torch's antialiasing filter, as weight matrices.

Downscaling by ``s`` widens the filter by ``s`` (each output pixel averages the input pixels under
it); without antialiasing the filter keeps its width (plain bilinear / bicubic interpolation with
``align_corners=False``). Output pixel ``i`` is centred at ``(i + 0.5) * scale`` of the input; the
weights of the in-range pixels are normalised to sum to 1, which at the borders gives the same
result as clamping the source coordinate.
"""
from __future__ import annotations

import functools

import numpy as np


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(x))


def _cubic(a: float):
    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))

    return kernel


@functools.lru_cache(maxsize=256)
def weight_matrix(in_size: int, out_size: int, mode: str, antialias: bool) -> np.ndarray:
    """The (out_size, in_size) float64 matrix mapping one axis of the input to the output."""
    scale = in_size / out_size
    if mode == "bilinear":
        support, kernel = 1.0, _triangle
    elif mode == "bicubic":
        # torch's antialiased bicubic (like PIL) uses a = -0.5; its plain bicubic uses a = -0.75.
        support, kernel = 2.0, _cubic(-0.5 if antialias else -0.75)
    else:
        raise ValueError(f"resize: unsupported interpolation {mode!r} for the resampling filter")
    stretch = scale if (antialias and scale > 1.0) else 1.0
    weights = np.zeros((out_size, in_size))
    for i in range(out_size):
        center = (i + 0.5) * scale
        if antialias:
            lo = max(int(center - support * stretch + 0.5), 0)
            hi = min(int(center + support * stretch + 0.5), in_size)
            taps = np.arange(lo, hi)
            w = kernel((taps - center + 0.5) / stretch)
            total = w.sum()
            weights[i, lo:hi] = w / total if total != 0.0 else 0.0
        else:
            source = center - 0.5
            base = int(np.floor(source))
            taps = np.arange(base - int(support) + 1, base + int(support) + 1)
            w = kernel(taps - source)
            if mode == "bilinear":
                source = max(source, 0.0)  # torch clamps negative coordinates for (bi)linear
                base = int(np.floor(source))
                taps = np.array([base, base + 1])
                w = np.array([1.0 - (source - base), source - base])
            for t, wt in zip(np.clip(taps, 0, in_size - 1), w):  # replicate the border
                weights[i, t] += wt
    return weights


def resample(array: np.ndarray, size: tuple[int, int], mode: str, antialias: bool) -> np.ndarray:
    """Resize the last two axes of ``array`` (any dtype) to ``size``; integers are rounded and clipped."""
    h, w = array.shape[-2:]
    out_h, out_w = size
    rows = weight_matrix(h, out_h, mode, antialias)
    cols = weight_matrix(w, out_w, mode, antialias)
    work = np.float64 if array.dtype.kind != "f" else np.promote_types(array.dtype, np.float32)
    out = np.matmul(np.matmul(rows.astype(work), array.astype(work)), cols.T.astype(work))
    if array.dtype.kind in "ui":
        info = np.iinfo(array.dtype)
        return np.clip(np.round(out), info.min, info.max).astype(array.dtype)
    return out.astype(array.dtype)


def nearest(array: np.ndarray, size: tuple[int, int], exact: bool) -> np.ndarray:
    """Nearest neighbour: source index ``floor(i * scale)`` (torch's "nearest") or ``floor((i + 0.5) * scale)``
    ("nearest-exact", which is PIL's)."""
    h, w = array.shape[-2:]
    out_h, out_w = size
    offset = 0.5 if exact else 0.0
    rows = np.minimum(np.floor((np.arange(out_h) + offset) * (h / out_h)).astype(np.int64), h - 1)
    cols = np.minimum(np.floor((np.arange(out_w) + offset) * (w / out_w)).astype(np.int64), w - 1)
    return array[..., rows[:, None], cols[None, :]]
