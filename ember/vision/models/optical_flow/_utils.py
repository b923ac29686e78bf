"""RAFT's sampling helpers (torchvision's ``models.optical_flow._utils``): pixel-coordinate grids, bilinear
sampling at absolute pixel coordinates, and flow upsampling (bilinear, or RAFT's learned convex combination).

Example:
    >>> from ember.vision.models.optical_flow._utils import make_coords_grid
    >>> make_coords_grid(1, 2, 3)[0, :, 1, 2].tolist()  # (x, y) of row 1, column 2
    [2.0, 1.0]
"""
from __future__ import annotations

import ember
import ember.nn.functional as F
from ember.tensor import Tensor


def grid_sample(img: Tensor, absolute_grid: Tensor, mode: str = "bilinear", align_corners: bool | None = None) -> Tensor:
    """``F.grid_sample`` with the grid's last axis in pixels ``(x, y)`` instead of [-1, 1]."""
    h, w = img.shape[-2:]
    xgrid, ygrid = absolute_grid.split([1, 1], dim=-1)
    xgrid = 2 * xgrid / (w - 1) - 1
    if h > 1:  # torchvision keeps a height-1 map's y as given (RAFT-Stereo reuses this helper)
        ygrid = 2 * ygrid / (h - 1) - 1
    return F.grid_sample(img, ember.cat([xgrid, ygrid], dim=-1), mode=mode, align_corners=align_corners)


def make_coords_grid(batch_size: int, h: int, w: int, device: str = "cpu") -> Tensor:
    """``(batch_size, 2, h, w)`` float32: channel 0 holds each pixel's x (column), channel 1 its y (row)."""
    rows, cols = ember.meshgrid(ember.arange(h, device=device), ember.arange(w, device=device), indexing="ij")
    coords = ember.stack([cols, rows], dim=0).float()
    return coords[None].repeat(batch_size, 1, 1, 1)


def upsample_flow(flow: Tensor, up_mask: Tensor | None = None, factor: int = 8) -> Tensor:
    """Flow at ``factor`` times the resolution, its vectors scaled by ``factor``: bilinear (corners aligned)
    without a mask; with one, each output pixel is a softmax-weighted mix of the 3x3 coarse neighbours."""
    batch_size, num_channels, h, w = flow.shape
    if up_mask is None:
        return factor * F.interpolate(flow, size=(h * factor, w * factor), mode="bilinear", align_corners=True)
    weights = ember.softmax(up_mask.view(batch_size, 1, 9, factor, factor, h, w), dim=2)
    neighbours = F.unfold(factor * flow, kernel_size=3, padding=1).view(batch_size, num_channels, 9, 1, 1, h, w)
    mixed = ember.sum(weights * neighbours, dim=2)  # (N, C, factor, factor, h, w)
    return mixed.permute(0, 1, 4, 2, 5, 3).reshape(batch_size, num_channels, h * factor, w * factor)
