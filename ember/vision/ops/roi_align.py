"""RoIAlign (torchvision's ``torchvision.ops.roi_align``): bilinear pooling of box regions to a fixed size.

Each output bin averages ``grid_h x grid_w`` bilinear samples of the feature map (``sampling_ratio`` of them per
side, or ``ceil(box size / output size)`` when it is <= 0), with torchvision's rules at the borders (a sample
more than one pixel outside the map is 0, one within it is clamped to the edge). Bilinear sampling is separable,
so ember writes the op as two matrix products per image, ``A_y @ feature @ A_x^T``, with the sampling matrices
built on the host from the boxes: the result is differentiable in the input through ember's matmul (the boxes
get no gradient, as with torchvision's kernel), and it runs on every device.

Example:
    >>> import ember
    >>> from ember.vision.ops import roi_align
    >>> x = ember.arange(16.).reshape(1, 1, 4, 4)
    >>> roi_align(x, [ember.tensor([[0., 0., 2., 2.]])], output_size=1, aligned=True).item()
    2.5
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.ops._roi_common import pair, rois_on_host

__all__ = ["RoIAlign", "roi_align"]


def _axis_weights(start: np.ndarray, extent: np.ndarray, pooled: int, size: int, grid: np.ndarray) -> np.ndarray:
    """Per box, the ``[pooled, size]`` matrix whose row ``p`` averages the bilinear weights of bin ``p``'s samples
    along one axis (y or x), divided by that axis' sample count."""
    k = start.shape[0]
    most = max(int(grid.max(initial=0)), 1)
    bin_size = extent / pooled
    safe_grid = np.maximum(grid, 1).astype(np.float64)
    p = np.arange(pooled, dtype=np.float64)[None, :, None]
    i = np.arange(most, dtype=np.float64)[None, None, :]
    pos = start[:, None, None] + p * bin_size[:, None, None] + (i + 0.5) * (bin_size / safe_grid)[:, None, None]
    used = (i < grid[:, None, None]) & (pos >= -1.0) & (pos <= size)
    pos = np.clip(pos, 0.0, None)
    low = np.floor(pos).astype(np.int64)
    at_edge = low >= size - 1
    low = np.where(at_edge, size - 1, low)
    high = np.where(at_edge, size - 1, low + 1)
    frac = np.where(at_edge, 0.0, pos - low)
    share = used / safe_grid[:, None, None]
    weights = np.zeros((k, pooled, size), dtype=np.float64)
    rows = (np.arange(k)[:, None, None] * pooled + np.arange(pooled)[None, :, None]) * size
    flat = weights.reshape(-1)
    np.add.at(flat, (rows + low).reshape(-1), ((1.0 - frac) * share).reshape(-1))
    np.add.at(flat, (rows + high).reshape(-1), (frac * share).reshape(-1))
    return weights


def roi_align(input: Tensor, boxes: Tensor | Sequence[Tensor], output_size: int | Sequence[int],
              spatial_scale: float = 1.0, sampling_ratio: int = -1, aligned: bool = False) -> Tensor:
    """Pool each box of ``boxes`` (``[K, 5]`` with the image index first, or a list of ``[L, 4]`` per image, in
    input coordinates scaled by ``spatial_scale``) from ``input`` ``[N, C, H, W]`` to ``[K, C, *output_size]``.
    ``aligned=True`` shifts box coordinates by -0.5 pixel (pixel centres), as torchvision's."""
    if not isinstance(input, Tensor) or input.ndim != 4:
        raise ValueError(f"roi_align: input must be a [N, C, H, W] tensor, got "
                         f"{list(input.shape) if isinstance(input, Tensor) else type(input).__name__}")
    ph, pw = pair(output_size, "roi_align")
    rois = rois_on_host("roi_align", input, boxes)
    n_img, channels, height, width = input.shape
    k = rois.shape[0]
    if k == 0:  # an empty result still hangs off the input, so the input gets a (zero) gradient as in torch
        return input.reshape(-1)[:0].reshape(0, channels, ph, pw)
    offset = 0.5 if aligned else 0.0
    x1, y1 = rois[:, 1] * spatial_scale - offset, rois[:, 2] * spatial_scale - offset
    roi_w, roi_h = rois[:, 3] * spatial_scale - offset - x1, rois[:, 4] * spatial_scale - offset - y1
    if not aligned:  # the legacy behaviour: boxes are at least one pixel
        roi_w, roi_h = np.maximum(roi_w, 1.0), np.maximum(roi_h, 1.0)
    if sampling_ratio > 0:
        grid_h = grid_w = np.full(k, sampling_ratio, dtype=np.int64)
    else:
        grid_h = np.ceil(roi_h / ph).astype(np.int64)
        grid_w = np.ceil(roi_w / pw).astype(np.int64)
    weights_y = _axis_weights(y1, roi_h, ph, height, grid_h)
    weights_x = _axis_weights(x1, roi_w, pw, width, grid_w)

    image_of = rois[:, 0].astype(np.int64)
    order = np.argsort(image_of, kind="stable")
    parts = []
    for img in np.unique(image_of):
        members = order[image_of[order] == img]
        m = members.shape[0]
        a_y = ember.tensor(weights_y[members].reshape(m * ph, height), dtype=input.dtype, device=input.device)
        a_xt = ember.tensor(weights_x[members].transpose(0, 2, 1), dtype=input.dtype, device=input.device)
        feature = input[int(img)].permute(1, 0, 2).reshape(height, channels * width)
        rows = (a_y @ feature).reshape(m, ph * channels, width)             # sample along y
        pooled = (rows @ a_xt).reshape(m, ph, channels, pw)                  # then along x
        parts.append(pooled.permute(0, 2, 1, 3))
    out = ember.cat(parts, dim=0) if len(parts) > 1 else parts[0]
    if len(parts) > 1 or not np.array_equal(order, np.arange(k)):
        inverse = np.empty(k, dtype=np.int64)
        inverse[order] = np.arange(k)
        out = out[ember.tensor(inverse, device=input.device)]
    return out.contiguous()


class RoIAlign(nn.Module):
    """``roi_align`` as a module (``RoIAlign(output_size, spatial_scale, sampling_ratio, aligned=False)``)."""

    def __init__(self, output_size: int | Sequence[int], spatial_scale: float, sampling_ratio: int,
                 aligned: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.spatial_scale = spatial_scale
        self.sampling_ratio = sampling_ratio
        self.aligned = aligned

    def forward(self, input: Tensor, rois: Any) -> Tensor:
        return roi_align(input, rois, self.output_size, self.spatial_scale, self.sampling_ratio, self.aligned)

    def __repr__(self) -> str:
        return (f"{self.__class__.__name__}(output_size={self.output_size}, spatial_scale={self.spatial_scale}, "
                f"sampling_ratio={self.sampling_ratio}, aligned={self.aligned})")

