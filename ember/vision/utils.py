"""``torchvision.utils`` on ember: ``make_grid`` and ``save_image`` (GAN and VAE programs save samples with them).

Example:
    >>> import ember, ember.vision.utils as vutils
    >>> vutils.make_grid(ember.zeros(5, 1, 28, 28), nrow=4).shape
    ember.Size([3, 62, 122])
"""
from __future__ import annotations

import math
import os
from typing import Any, BinaryIO

import ember
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.transforms._image import require_pillow

from ember.vision.drawing import (  # noqa: E402,F401
    draw_bounding_boxes, draw_keypoints, draw_segmentation_masks, flow_to_image,
)

__all__ = ["make_grid", "save_image", "draw_bounding_boxes", "draw_segmentation_masks", "draw_keypoints",
           "flow_to_image"]


def _normalized(images: Tensor, value_range: tuple | None, scale_each: bool) -> Tensor:
    """Clamp to ``value_range`` (default: the images' own min and max) and map it onto [0, 1]."""
    if value_range is not None and not isinstance(value_range, tuple):
        raise TypeError(f"make_grid: value_range must be a tuple (low, high), got {type(value_range).__name__}")
    if scale_each:
        return ember.stack([_normalized(img, value_range, False) for img in images])
    low, high = value_range if value_range is not None else (float(images.min()), float(images.max()))
    return (images.clamp(low, high) - low) / max(high - low, 1e-5)


def make_grid(tensor: Tensor | list, nrow: int = 8, padding: int = 2, normalize: bool = False,
              value_range: tuple | None = None, scale_each: bool = False, pad_value: float = 0.0,
              **kwargs: Any) -> Tensor:
    """Tile a batch ``[B, C, H, W]`` (or a list of ``[C, H, W]`` images) into one ``[C, H', W']`` image,
    ``nrow`` images per row with ``padding`` pixels of ``pad_value`` around each, as torchvision's does.
    One-channel images become three-channel; a single image comes back as it is (after ``normalize``)."""
    if kwargs:
        raise TypeError(f"make_grid: unexpected keyword arguments {sorted(kwargs)}")
    images = ember.stack(list(tensor)) if isinstance(tensor, (list, tuple)) else tensor
    if not isinstance(images, Tensor):
        raise TypeError(f"make_grid: expected a Tensor or a list of Tensors, got {type(tensor).__name__}")
    if images.ndim == 2:
        images = images.unsqueeze(0)
    if images.ndim == 3:
        images = images.unsqueeze(0)
    if images.ndim != 4:
        raise ValueError(f"make_grid: expected images [B, C, H, W], [C, H, W] or [H, W], got shape "
                         f"{tuple(images.shape)}")
    if images.shape[1] == 1:
        images = images.repeat(1, 3, 1, 1)
    if normalize:
        images = _normalized(images, value_range, scale_each)
    count, channels, height, width = images.shape
    if count == 1:
        return images[0]
    columns = min(nrow, count)
    rows = math.ceil(count / columns)
    if rows * columns > count:  # empty slots show the padding colour
        blank = images.new_full((rows * columns - count, channels, height, width), pad_value)
        images = ember.cat([images, blank])
    # padding above and left of every image, then one more strip below and right of the whole grid
    cells = F.pad(images, (padding, 0, padding, 0), value=pad_value)
    cells = cells.reshape(rows, columns, channels, height + padding, width + padding)
    grid = cells.permute(2, 0, 3, 1, 4).reshape(channels, rows * (height + padding), columns * (width + padding))
    return F.pad(grid, (0, padding, 0, padding), value=pad_value)


def save_image(tensor: Tensor | list, fp: str | os.PathLike | BinaryIO, format: str | None = None,  # noqa: A002
               **kwargs: Any) -> None:
    """Write ``make_grid(tensor, **kwargs)`` (values in [0, 1]) as an 8-bit image file (Pillow picks the format
    from the name unless ``format`` is given)."""
    image = require_pillow("save_image")
    grid = make_grid(tensor, **kwargs).detach().cpu()
    pixels = (grid * 255 + 0.5).clamp(0, 255).to(ember.uint8).permute(1, 2, 0).numpy()
    image.fromarray(pixels).save(fp, format=format)
