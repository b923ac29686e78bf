"""Sampling grids and grid sampling for the geometric transforms (rotate, affine, perspective, elastic).

torchvision's tensor path builds a normalized sampling grid and calls ``grid_sample`` (zeros padding,
``align_corners=False``); the fill colour comes from an extra all-ones channel sampled alongside the
image. This module does the same on NumPy arrays ``[N, C, H, W]``, with the float32 arithmetic in the
order torch's CPU kernels use (grid: ``x * a + y * b + c``; unnormalizing and the bilinear sum as fused
multiply-adds),
so uint8 results are pixel-equal to torchvision's and float results agree to rounding.

Example:
    >>> import numpy as np
    >>> from ember.vision.transforms import _grid
    >>> grid = _grid.affine_grid([1.0, 0.0, 0.0, 0.0, 1.0, 0.0], 4, 3, 4, 3, np.float32)
    >>> img = np.arange(12, dtype=np.uint8).reshape(1, 3, 4)
    >>> bool((_grid.apply_grid(img, grid, "nearest", None) == img).all())
    True
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def _centered_axis(n: int, dtype: np.dtype) -> np.ndarray:
    """Pixel centres of an ``n``-pixel axis measured from the image centre: ``-n/2 + 0.5 ... n/2 - 0.5``."""
    return np.arange(n, dtype=dtype) - dtype.type(n * 0.5) + dtype.type(0.5)


def affine_grid(matrix: Sequence[float], w: int, h: int, ow: int, oh: int, dtype: Any) -> np.ndarray:
    """The ``(oh, ow, 2)`` grid (x, y in [-1, 1] of the ``w x h`` input) of the inverse affine ``matrix``
    (2x3, row-major, centre-origin coordinates), torchvision's ``_gen_affine_grid``."""
    dtype = np.dtype(dtype)
    theta = np.asarray(matrix, dtype=dtype).reshape(2, 3)
    scaled = theta.T / np.array([0.5 * w, 0.5 * h], dtype=dtype)  # (3, 2)
    x = _centered_axis(ow, dtype)[None, :]
    y = _centered_axis(oh, dtype)[:, None]
    gx = x * scaled[0, 0] + y * scaled[1, 0] + scaled[2, 0]
    gy = x * scaled[0, 1] + y * scaled[1, 1] + scaled[2, 1]
    return np.stack([gx, gy], axis=-1)


def perspective_grid(coeffs: Sequence[float], ow: int, oh: int, dtype: Any) -> np.ndarray:
    """The ``(oh, ow, 2)`` grid of the perspective map ``(a x + b y + c, d x + e y + f) / (g x + h y + 1)``
    (PIL's coefficient convention, pixel-corner origin), torchvision's ``_perspective_grid``."""
    dtype = np.dtype(dtype)
    a, b, c, d, e, f, g, hh = (dtype.type(v) for v in coeffs)
    half_w, half_h = dtype.type(0.5 * ow), dtype.type(0.5 * oh)
    x = (np.arange(ow, dtype=dtype) + dtype.type(0.5))[None, :]
    y = (np.arange(oh, dtype=dtype) + dtype.type(0.5))[:, None]
    denominator = x * g + y * hh + dtype.type(1.0)
    gx = (x * (a / half_w) + y * (b / half_w) + c / half_w) / denominator - dtype.type(1.0)
    gy = (x * (d / half_h) + y * (e / half_h) + f / half_h) / denominator - dtype.type(1.0)
    return np.stack([gx, gy], axis=-1)


def linspace_f32(start: float, end: float, steps: int) -> np.ndarray:
    """``torch.linspace(start, end, steps)`` in float32, bit for bit: torch's CPU kernel computes
    ``start + step * i`` for the first half and ``end - step * (steps - 1 - i)`` for the rest, each as one fused
    multiply-add (a single rounding, which float64 arithmetic reproduces: the product is exact)."""
    f32 = np.float32
    first, last = f32(start), f32(end)
    if steps == 1:
        return np.array([first], dtype=f32)
    step = np.float64((last - first) / f32(steps - 1))
    i = np.arange(steps)
    low = (np.float64(first) + step * i).astype(f32)
    high = (np.float64(last) - step * (steps - 1 - i)).astype(f32)
    return np.where(i < steps // 2, low, high)


def identity_grid(h: int, w: int) -> np.ndarray:
    """The ``(1, h, w, 2)`` float32 grid that samples every pixel at its centre (``elastic_transform``'s base)."""
    axes = [linspace_f32((-s + 1) / s, (s - 1) / s, s) for s in (h, w)]
    grid_y, grid_x = np.meshgrid(*axes, indexing="ij")
    return np.stack([grid_x, grid_y], axis=-1)[None]


def _fma(a: np.ndarray, b: Any, c: Any) -> np.ndarray:
    """``a * b + c`` rounded once, as the fused multiply-adds torch's vectorized CPU kernels compile to. In
    float32 the float64 product is exact, so one rounding of the float64 sum reproduces the FMA."""
    if a.dtype == np.float32:
        return (a.astype(np.float64) * np.float64(b) + np.asarray(c, dtype=np.float64)).astype(np.float32)
    return a * b + c


def grid_sample(batch: np.ndarray, grid: np.ndarray, mode: str) -> np.ndarray:
    """``grid_sample(batch, grid, mode, padding_mode="zeros", align_corners=False)`` for a float ``[N, C, H, W]``
    batch and a ``(H', W', 2)`` or ``(N, H', W', 2)`` grid of the same dtype."""
    n, c, h, w = batch.shape
    grid = np.broadcast_to(grid, (n,) + grid.shape[-3:])
    out_shape = grid.shape[1:3]
    one, half = batch.dtype.type(1.0), batch.dtype.type(0.5)
    ix = _fma(grid[..., 0] + one, batch.dtype.type(w / 2), -half)  # (N, H', W')
    iy = _fma(grid[..., 1] + one, batch.dtype.type(h / 2), -half)
    # Channels last with a one-pixel zero border: every out-of-image neighbour is clipped onto the border, so a
    # gather needs no mask, and each gathered pixel brings all its channels at once.
    # float32 bilinear gathers float64 values (exact copies) so the fused multiply-adds below need no conversion
    gather_dtype = np.float64 if (mode == "bilinear" and batch.dtype == np.float32) else batch.dtype
    padded = np.zeros((n, h + 2, w + 2, c), dtype=gather_dtype)
    padded[:, 1:-1, 1:-1, :] = batch.transpose(0, 2, 3, 1)
    flat = padded.reshape(n, (h + 2) * (w + 2), c)

    def gather(xi: np.ndarray, yi: np.ndarray) -> np.ndarray:
        """Pixels at integer (xi, yi), zero outside the image: (N, H', W', C)."""
        index = (np.clip(yi + 1, 0, h + 1) * (w + 2) + np.clip(xi + 1, 0, w + 1)).reshape(n, -1)
        values = flat[0].take(index[0], axis=0)[None] if n == 1 else flat[np.arange(n)[:, None], index]
        return values.reshape((n,) + out_shape + (c,))

    if mode == "nearest":
        # torch rounds half to even (nearbyint), as np.rint does
        out = gather(np.rint(ix).astype(np.int64), np.rint(iy).astype(np.int64))
        return out.transpose(0, 3, 1, 2)
    if mode != "bilinear":
        raise ValueError(f"grid_sample: interpolation {mode!r} is not supported for tensors; use nearest or bilinear")
    x0, y0 = np.floor(ix), np.floor(iy)
    wx, wy = ix - x0, iy - y0
    ex, sy = one - wx, one - wy
    weights = [(sy * ex, 0, 0), (sy * wx, 1, 0), (wy * ex, 0, 1), (wy * wx, 1, 1)]  # nw, ne, sw, se
    x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
    out = None
    for weight, dx, dy in weights:
        values = gather(x0 + dx, y0 + dy)
        weight = weight[..., None].astype(values.dtype)
        if out is None:  # a plain product, rounded to the image's dtype once
            out = (values * weight).astype(batch.dtype)
        elif values.dtype == batch.dtype:
            out = values * weight + out
        else:  # float32 as FMA: the float64 product is exact, the sum is rounded once
            out = (values * weight + out).astype(batch.dtype)
    return out.transpose(0, 3, 1, 2)


def apply_grid(array: np.ndarray, grid: np.ndarray, mode: str, fill: Any, v2_blend: bool = False) -> np.ndarray:
    """Resample ``array`` (``[..., C, H, W]``, any dtype) on ``grid``; points outside the image get ``fill``
    (a number or one value per channel; ``None`` means 0 without the mask pass), as torchvision's
    ``_apply_grid_transform``. Integer images are computed in float32, rounded and cast back. ``v2_blend``:
    blend the fill as ``transforms.v2`` writes it, ``(img - fill) * mask + fill`` (v1: ``img * mask +
    (1 - mask) * fill``; the two differ in the last bit)."""
    lead, (c, h, w) = array.shape[:-3], array.shape[-3:]
    work_dtype = grid.dtype
    batch = array.reshape((-1, c, h, w)).astype(work_dtype, copy=False)
    if fill is not None:
        batch = np.concatenate([batch, np.ones((batch.shape[0], 1, h, w), dtype=work_dtype)], axis=1)
    out = grid_sample(batch, grid, mode)
    if fill is not None:
        mask, out = out[:, -1:], out[:, :-1]
        values = [float(v) for v in fill] if isinstance(fill, (list, tuple)) else [float(fill)]
        fill_img = np.broadcast_to(np.asarray(values, dtype=work_dtype).reshape(1, -1, 1, 1), out.shape)
        if mode == "nearest":
            out = np.where(mask < 0.5, fill_img, out)
        elif v2_blend:
            out = (out - fill_img) * mask + fill_img
        else:
            out = out * mask + (work_dtype.type(1.0) - mask) * fill_img
    if array.dtype.kind in "uib":
        out = np.round(out)  # torchvision rounds before casting back to integers
    return out.astype(array.dtype).reshape(lead + out.shape[-3:])
