"""``interpolate``: PyTorch's resizing modes as separable per-axis resampling.

Every mode PyTorch offers is separable: output pixel ``i`` along an axis is a weighted sum of a
few input pixels along that axis (``nearest``: one, ``linear``: two, ``bicubic``: four, ``area``
and antialiased modes: a window). So each axis is resampled by gathering ``K`` taps with
``index_select`` and summing them with per-output weights; the index/weight tables are computed
in NumPy with PyTorch's own source-index formulas (``area_pixel_compute_source_index``), and
autograd gets the backward (a scatter-add of the weighted gradient) from the gathers for free.

Example:
    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.arange(4.0).reshape(1, 1, 4)
    >>> F.interpolate(x, scale_factor=2, mode="linear", align_corners=True).shape
    ember.Size([1, 1, 8])
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember.ops.opmath_composite import float32_composite
from ember import dtypes
from ember.creation import tensor
from ember.ops import views
from ember.ops.pooling import _adaptive_windows
from ember.nn._interpolate_uint8 import resize_uint8

_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")


# ---- index / weight tables (NumPy, float64) --------------------------------------------------------
def _scale(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None) -> float:
    """PyTorch's ``area_pixel_compute_scale``: input pixels per output pixel."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale_factor is not None and scale_factor > 0:
        return 1.0 / scale_factor
    return in_size / out_size


def _nearest_table(in_size: int, out_size: int, scale_factor: float | None, exact: bool) -> tuple:
    if out_size == in_size and not exact:
        src = np.arange(out_size)
    elif out_size == 2 * in_size and not exact:
        src = np.arange(out_size) >> 1
    else:
        # PyTorch computes this scale and the products in float32; doing the same keeps the picks equal.
        scale = np.float32(1.0 / scale_factor) if scale_factor else np.float32(in_size) / np.float32(out_size)
        dst = np.arange(out_size, dtype=np.float32) + (np.float32(0.5) if exact else np.float32(0.0))
        src = np.minimum(np.floor(dst * scale).astype(np.int64), in_size - 1)
    return src[:, None].astype(np.int64), np.ones((out_size, 1))


def _source(scale: float, out_size: int, align_corners: bool, cubic: bool, coord: Any = np.float64) -> np.ndarray:
    """Source coordinates of the output positions; ``coord=np.float32`` computes them as PyTorch's kernels do for
    float16/bfloat16 (and float32) inputs (in float32: a 1000-wide row's coordinates drift from float64's)."""
    dst = np.arange(out_size, dtype=coord)
    scale = coord(scale)
    if align_corners:
        return scale * dst
    src = scale * (dst + coord(0.5)) - coord(0.5)
    return src if cubic else np.maximum(src, coord(0.0))


def _linear_table(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None,
                  coord: Any = np.float64) -> tuple:
    src = _source(_scale(in_size, out_size, align_corners, scale_factor), out_size, align_corners, False, coord)
    i0 = np.minimum(np.floor(src).astype(np.int64), in_size - 1)
    lam = np.clip(src - i0.astype(coord), 0.0, 1.0).astype(np.float64)
    i1 = np.where(i0 < in_size - 1, i0 + 1, i0)
    return np.stack([i0, i1], 1), np.stack([1.0 - lam, lam], 1)


def _cubic_table(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None,
                 coord: Any = np.float64) -> tuple:
    a = -0.75  # PyTorch's (and OpenCV's) cubic convolution constant

    def near(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    src = _source(_scale(in_size, out_size, align_corners, scale_factor), out_size, align_corners, True, coord)
    base = np.floor(src).astype(np.int64)
    t = (src - base.astype(coord)).astype(np.float64)
    weights = np.stack([far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)], 1)
    index = np.clip(base[:, None] + np.arange(-1, 3)[None, :], 0, in_size - 1)  # edge pixels repeat
    return index, weights


def _antialias_table(in_size: int, out_size: int, align_corners: bool, scale_factor: float | None,
                     cubic: bool) -> tuple:
    """PyTorch's antialiased kernels (PIL's): the filter widens by the downscale factor."""

    def bilinear(x: np.ndarray) -> np.ndarray:
        return np.maximum(1.0 - np.abs(x), 0.0)

    def bicubic(x: np.ndarray) -> np.ndarray:
        a = -0.5
        x = np.abs(x)
        return np.where(x < 1.0, ((a + 2.0) * x - (a + 3.0)) * x * x + 1,
                        np.where(x < 2.0, (((x - 5) * x + 8) * x - 4) * a, 0.0))

    kernel, interp_size = (bicubic, 4) if cubic else (bilinear, 2)
    scale = _scale(in_size, out_size, align_corners, scale_factor)
    support = interp_size * 0.5 * scale if scale >= 1.0 else interp_size * 0.5
    invscale = 1.0 / scale if scale >= 1.0 else 1.0
    rows = []
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)  # int() truncates toward zero, as the C++ cast does
        hi = min(int(center + support + 0.5), in_size)
        taps = np.arange(lo, hi)
        w = kernel((taps - center + 0.5) * invscale)
        total = w.sum()
        rows.append((taps, w / total if total != 0.0 else w))
    width = max(len(t) for t, _ in rows)
    index = np.zeros((out_size, width), dtype=np.int64)
    weights = np.zeros((out_size, width))
    for i, (taps, w) in enumerate(rows):
        index[i, :len(taps)] = taps
        weights[i, :len(taps)] = w
    return index, weights


# ---- resampling one axis -----------------------------------------------------------------------------
def _resample_axis(x: Any, axis: int, index: np.ndarray, weights: np.ndarray) -> Any:
    """out[..., i, ...] = sum_k weights[i, k] * x[..., index[i, k], ...] along ``axis``."""
    trailing = (1,) * (x.ndim - 1 - axis)
    out = None
    for k in range(index.shape[1]):
        w = weights[:, k]
        if not w.any():
            continue
        taps = x.index_select(axis, tensor(index[:, k], dtype=dtypes.int64, device=x.device))
        if not np.all(w == 1.0):
            taps = taps * tensor(w.reshape((-1,) + trailing), dtype=x.dtype, device=x.device)
        out = taps if out is None else out + taps
    if out is None:  # every weight zero (cannot happen for valid sizes); keep the shape right
        out = x.index_select(axis, tensor(index[:, 0], dtype=dtypes.int64, device=x.device)) * 0.0
    return out


# ---- the public function --------------------------------------------------------------------------
def _output_size(input: Any, size: Any, scale_factor: Any, dim: int) -> tuple[list, list | None]:
    spatial = list(input.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate: only one of size or scale_factor should be defined")
    if size is not None:
        if isinstance(size, (list, tuple)):
            if len(size) != dim:
                raise ValueError(f"interpolate: Input and output must have the same number of spatial dimensions, but "
                                 f"got input with spatial dimensions of {spatial} and output size of {list(size)}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            sizes = [int(s) for s in size]
        else:
            sizes = [int(size)] * dim
        if any(s <= 0 for s in sizes):
            raise ValueError(f"interpolate: output size must be positive, got {sizes}")
        return sizes, None
    if scale_factor is None:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if isinstance(scale_factor, (list, tuple)):
        if len(scale_factor) != dim:
            raise ValueError(f"interpolate: Input and scale_factor must have the same number of spatial dimensions, "
                             f"but got input with spatial dimensions of {spatial} and scale_factor of shape "
                             f"{list(scale_factor)}. Please provide input tensor in (N, C, d1, d2, ...,dK) format "
                             "and scale_factor in (s1, s2, ...,sK) format.")
        factors = [float(f) for f in scale_factor]
    else:
        factors = [float(scale_factor)] * dim
    sizes = [int(math.floor(s * f)) for s, f in zip(spatial, factors)]
    if any(s <= 0 for s in sizes):
        raise RuntimeError(f"interpolate: scale_factor {factors} gives an empty output for input of shape "
                         f"{tuple(input.shape)}")
    return sizes, factors


def _half_linear_weights(weights: np.ndarray, low: Any) -> np.ndarray:
    """PyTorch's CPU linear kernels store a float16/bfloat16 input's interpolation weights in its dtype:
    ``lambda1`` rounded, ``lambda0 = 1 - lambda1`` rounded again (the products and their sum stay float32)."""
    lam1 = weights[:, 1].astype(np.float32).astype(low.np).astype(np.float64)
    lam0 = (1.0 - lam1).astype(np.float32).astype(low.np).astype(np.float64)
    return np.stack([lam0, lam1], 1)


def interpolate(input: Any, size: int | Sequence[int] | None = None,
                scale_factor: float | Sequence[float] | None = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Any:
    """Resize the spatial dims of (N, C, *spatial) ``input``, as ``torch.nn.functional.interpolate``.

    Modes: ``nearest``, ``nearest-exact``, ``area`` (any of 1-3 spatial dims), ``linear`` (3-D
    input), ``bilinear`` / ``bicubic`` (4-D; ``antialias`` smooths downscaling), ``trilinear``
    (5-D). ``align_corners=True`` maps corner pixel centres onto each other. float16/bfloat16 inputs are
    computed in float32 and rounded once, with the linear weights in the input's dtype as PyTorch's kernels.

    Example:
        >>> ember.nn.functional.interpolate(ember.tensor([[[0.0, 1.0]]]), scale_factor=2, mode="linear")
        tensor([[[0.0000, 0.2500, 0.7500, 1.0000]]])
    """
    low = input.dtype if input.dtype.is_floating_point and input.dtype.itemsize == 2 else None
    out = _interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias, low)
    # PyTorch's upsampling kernels write a channels-last input's result channels-last (5-D 'area' excepted: it is
    # adaptive_avg_pool3d there), every other result row-major; programs then permute to NHWC and .view(). The
    # per-axis gathers above leave a permuted input's layout in between, so the result is laid out here.
    layout = views.suggest_memory_format(input)
    if layout is not None and not (mode == "area" and input.ndim == 5):
        return views.contiguous(out, layout)
    return views.contiguous(out)


@float32_composite
def _interpolate(input: Any, size: Any, scale_factor: Any, mode: str, align_corners: Any,
                 recompute_scale_factor: Any, antialias: bool, low: Any) -> Any:
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; use one of {', '.join(_MODES)}")
    dim = input.ndim - 2
    if dim not in (1, 2, 3):
        raise NotImplementedError(f"interpolate: input must be 3-D, 4-D or 5-D (N, C, *spatial), got shape "
                                  f"{tuple(input.shape)}")
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    needed = _MODE_DIMS.get(mode)
    if needed is not None and needed != dim:
        raise NotImplementedError(f"interpolate: got {input.ndim}D input, but {mode} mode needs {needed + 2}D input "
                                  f"(N, C{', D' if needed == 3 else ''}{', H' if needed >= 2 else ''}, W)")
    if antialias and not (mode in ("bilinear", "bicubic") and dim == 2):
        raise NotImplementedError("interpolate: anti-alias option is restricted to bilinear and bicubic modes and "
                                  "requires a 4-D tensor as input")
    if recompute_scale_factor and size is not None:
        raise ValueError("interpolate: recompute_scale_factor is not meaningful with an explicit size.")
    sizes, factors = _output_size(input, size, scale_factor, dim)
    if mode == "area" and size is None:
        recompute_scale_factor = True
    if recompute_scale_factor:
        factors = None  # the kernels then use in/out, as PyTorch does
    if mode in ("bilinear", "bicubic") and input.dtype == dtypes.uint8:  # torch's fixed-point image resampler
        return _uint8_image(input, sizes, mode, align_corners, factors, antialias)
    if mode != "nearest" and mode != "nearest-exact" and not input.dtype.is_floating_point:
        raise RuntimeError(f"interpolate: mode {mode!r} needs a floating-point input, got {input.dtype}")
    out = input
    for axis in range(dim):
        in_size, out_size = input.shape[2 + axis], sizes[axis]
        factor = None if factors is None else factors[axis]
        if mode in ("nearest", "nearest-exact"):
            index, weights = _nearest_table(in_size, out_size, factor, mode == "nearest-exact")
        elif mode == "area":  # torch's adaptive average pooling: each window summed alone (no 0 * inf = NaN)
            if out_size != in_size:
                out = _adaptive_windows(out, 2 + axis, in_size, out_size)
            continue
        elif antialias:
            index, weights = _antialias_table(in_size, out_size, align_corners, factor, mode == "bicubic")
        elif mode == "bicubic":
            index, weights = _cubic_table(in_size, out_size, align_corners, factor,
                                          np.float32 if low is not None else np.float64)
            if low is not None:  # PyTorch's cubic kernel keeps a half input's 4 weights in its dtype too
                weights = weights.astype(np.float32).astype(low.np).astype(np.float64)
        else:
            coord = np.float32 if low is not None and mode in ("linear", "trilinear") else np.float64
            index, weights = _linear_table(in_size, out_size, align_corners, factor, coord)
            if low is not None and mode in ("linear", "trilinear"):  # bilinear's 2-d kernel keeps float32 weights
                weights = _half_linear_weights(weights, low)
        if out_size == in_size and index.shape[1] == 1 and np.array_equal(index[:, 0], np.arange(in_size)):
            continue  # identity along this axis
        out = _resample_axis(out, 2 + axis, index, weights)
    return input.clone() if out is input else out  # a new tensor even when no axis changes, as PyTorch


def _uint8_image(input: Any, sizes: list, mode: str, align_corners: bool, factors: list | None,
                 antialias: bool) -> Any:
    """uint8 bilinear/bicubic: ember/nn/_interpolate_uint8.py (integers carry no gradient)."""
    scales = (None, None) if factors is None else tuple(factors)
    out = resize_uint8(input.detach().cpu().numpy(), tuple(sizes), mode, bool(align_corners), scales, antialias)
    return tensor(out, device=input.device)
