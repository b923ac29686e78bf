"""RoIPool (torchvision's ``torchvision.ops.roi_pool``): max pooling of box regions to a fixed size (Fast R-CNN).

Box corners are rounded to whole pixels (half away from zero) after ``spatial_scale``; bin ``p`` of a box
``r`` pixels tall covers rows ``floor(p * r / P)`` to ``ceil((p + 1) * r / P)`` (clipped to the map); an empty
bin gives 0. The maximum is taken in row-major order, first one wins, so the gradient goes to the same
element as torchvision's argmax. ember gathers each bin's pixels (padded to the largest bin) and takes
``max`` over them, so the op is differentiable in the input and runs on every device.

Example:
    >>> import ember
    >>> from ember.vision.ops import roi_pool
    >>> x = ember.arange(16.).reshape(1, 1, 4, 4)
    >>> roi_pool(x, ember.tensor([[0., 0., 0., 3., 3.]]), output_size=2).flatten().tolist()
    [5.0, 7.0, 13.0, 15.0]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.ops._roi_common import pair, rois_on_host

__all__ = ["RoIPool", "roi_pool"]

_BLOCK_ELEMENTS = 1 << 24  # gather at most this many elements at once (boxes are pooled in blocks)


def _bins(start: np.ndarray, end: np.ndarray, pooled: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """First and one-past-last pixel of each bin along one axis: two ``[K, pooled]`` integer arrays."""
    extent = np.maximum(end - start + 1, 1).astype(np.float64)
    bin_size = extent / pooled
    p = np.arange(pooled, dtype=np.float64)[None, :]
    lo = np.floor(p * bin_size[:, None]).astype(np.int64) + start[:, None]
    hi = np.ceil((p + 1) * bin_size[:, None]).astype(np.int64) + start[:, None]
    return np.clip(lo, 0, size), np.clip(hi, 0, size)


def _round_half_away(values: np.ndarray) -> np.ndarray:
    return (np.sign(values) * np.floor(np.abs(values) + 0.5)).astype(np.int64)


def roi_pool(input: Tensor, boxes: Tensor | Sequence[Tensor], output_size: int | Sequence[int],
             spatial_scale: float = 1.0) -> Tensor:
    """Max-pool each box (``[K, 5]`` with the image index first, or a list of ``[L, 4]`` per image) of ``input``
    ``[N, C, H, W]`` to ``[K, C, *output_size]``."""
    if not isinstance(input, Tensor) or input.ndim != 4:
        raise ValueError(f"roi_pool: input must be a [N, C, H, W] tensor, got "
                         f"{list(input.shape) if isinstance(input, Tensor) else type(input).__name__}")
    ph, pw = pair(output_size, "roi_pool")
    rois = rois_on_host("roi_pool", input, boxes)
    _, channels, height, width = input.shape
    k = rois.shape[0]
    corners = _round_half_away(rois[:, 1:] * spatial_scale)
    row_lo, row_hi = _bins(corners[:, 1], corners[:, 3], ph, height)
    col_lo, col_hi = _bins(corners[:, 0], corners[:, 2], pw, width)
    span_h = int((row_hi - row_lo).max(initial=0))
    span_w = int((col_hi - col_lo).max(initial=0))
    if k == 0:  # an empty result still hangs off the input, so the input gets a (zero) gradient as in torch
        return input.reshape(-1)[:0].reshape(0, channels, ph, pw)
    if span_h <= 0 or span_w <= 0:  # every bin is empty
        return ember.zeros((k, channels, ph, pw), dtype=input.dtype, device=input.device)

    # per box and bin, the rows and columns it reads (padded with the bin's last pixel, masked below)
    rows = row_lo[:, :, None] + np.arange(span_h)[None, None, :]
    row_ok = rows < row_hi[:, :, None]
    cols = col_lo[:, :, None] + np.arange(span_w)[None, None, :]
    col_ok = cols < col_hi[:, :, None]
    rows, cols = np.clip(rows, 0, height - 1), np.clip(cols, 0, width - 1)
    image = rois[:, 0].astype(np.int64)
    channels_last = input.permute(0, 2, 3, 1)  # [N, H, W, C]: one gather takes every channel of a pixel
    block = max(1, _BLOCK_ELEMENTS // max(1, ph * pw * span_h * span_w * channels))
    parts = []
    for s in range(0, k, block):
        sl = slice(s, min(k, s + block))
        m = sl.stop - sl.start
        img = np.broadcast_to(image[sl, None, None, None, None], (m, ph, pw, span_h, span_w))
        r = np.broadcast_to(rows[sl, :, None, :, None], img.shape)
        c = np.broadcast_to(cols[sl, None, :, None, :], img.shape)
        ok = np.broadcast_to(row_ok[sl, :, None, :, None] & col_ok[sl, None, :, None, :], img.shape)
        to_dev = lambda a: ember.tensor(np.ascontiguousarray(a), device=input.device)  # noqa: E731
        values = channels_last[to_dev(img), to_dev(r), to_dev(c)]            # [m, ph, pw, sh, sw, C]
        values = values.reshape(m, ph, pw, span_h * span_w, channels)
        mask = to_dev(ok.reshape(m, ph, pw, span_h * span_w, 1))
        values = ember.where(mask, values, ember.tensor(float("-inf"), dtype=input.dtype, device=input.device))
        best = values.max(dim=3).values                                      # first maximum, as the kernel
        empty = to_dev(~ok.reshape(m, ph, pw, -1).any(axis=-1)[..., None])
        best = ember.where(empty, ember.zeros((), dtype=input.dtype, device=input.device), best)
        parts.append(best.permute(0, 3, 1, 2))
    out = ember.cat(parts, dim=0) if len(parts) > 1 else parts[0]
    return out.contiguous()


class RoIPool(nn.Module):
    """``roi_pool`` as a module (``RoIPool(output_size, spatial_scale)``)."""

    def __init__(self, output_size: int | Sequence[int], spatial_scale: float) -> None:
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale

    def forward(self, input: Tensor, rois: Any) -> Tensor:
        return roi_pool(input, rois, self.output_size, self.spatial_scale)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale})"
