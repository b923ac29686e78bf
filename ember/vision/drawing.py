"""``torchvision.utils``' drawing functions on ember tensors: boxes with labels, segmentation masks, keypoints
with their skeleton, and optical flow as colours. Boxes, labels and keypoints are drawn with Pillow's
``ImageDraw`` (an optional extra) exactly as torchvision draws them, so the pixels are torchvision's; masks and
flow are plain array arithmetic.

Example:
    >>> import ember
    >>> from ember.vision.utils import draw_bounding_boxes
    >>> image = ember.zeros(3, 20, 20, dtype=ember.uint8)
    >>> drawn = draw_bounding_boxes(image, ember.tensor([[2, 2, 10, 12]]), colors="red")
    >>> drawn[:, 2, 5].tolist()
    [255, 0, 0]
"""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ember import creation, dtypes
from ember.tensor import Tensor
from ember.vision.transforms._image import require_pillow


def _check_image(op: str, image: Any, channels: tuple) -> None:
    if not isinstance(image, Tensor):
        raise TypeError(f"{op}: the image must be a tensor, got {type(image).__name__}")
    if not (image.dtype == dtypes.uint8 or image.is_floating_point()):
        raise ValueError(f"{op}: the image dtype must be uint8 or float, got {image.dtype}")
    if image.dim() != 3:
        raise ValueError(f"{op}: pass individual images (C, H, W), not batches; got shape {tuple(image.shape)}")
    if image.shape[0] not in channels:
        raise ValueError(f"{op}: expected {' or '.join(map(str, channels))} channels, got {image.shape[0]} "
                         f"(shape {tuple(image.shape)})")


def _palette(count: int) -> list:
    """torchvision's default colours: object i gets ``(i * (2^25-1, 2^15-1, 2^21-1)) % 255``."""
    steps = np.array([2 ** 25 - 1, 2 ** 15 - 1, 2 ** 21 - 1], dtype=np.int64)
    return [tuple(int(v) for v in (i * steps) % 255) for i in range(count)]


def _colors(colors: Any, count: int, floating: bool = False) -> list:
    from PIL import ImageColor  # Pillow is an optional extra: imported where used

    if colors is None:
        colors = _palette(count)
    elif isinstance(colors, list):
        if len(colors) < count:
            raise ValueError(f"Number of colors must be equal or larger than the number of objects, but got "
                             f"{len(colors)} < {count}.")
    elif not isinstance(colors, (tuple, str)):
        raise ValueError(f"colors must be a tuple or a string, or a list thereof, but got {colors}.")
    elif isinstance(colors, tuple) and len(colors) != 3:
        raise ValueError(f"If passed as tuple, colors should be an RGB triplet, but got {colors}.")
    else:
        colors = [colors] * count
    colors = [ImageColor.getrgb(c) if isinstance(c, str) else tuple(c) for c in colors]
    return [tuple(v / 255 for v in c) for c in colors] if floating else colors


def _as_uint8_pixels(image: Tensor) -> np.ndarray:
    """HWC uint8 pixels (float images in [0, 1] scaled as ``to_dtype(..., scale=True)`` does)."""
    pixels = image.detach().cpu().numpy()
    if image.is_floating_point():
        # transforms.v2's to_dtype(uint8, scale=True): x * (256 - 1e-3), truncated, so 1.0 maps to 255 and the 256
        # buckets have equal width
        pixels = (pixels * (256.0 - 1e-3)).astype(np.float32).clip(0, 255).astype(np.uint8)
    if pixels.shape[0] == 1:
        pixels = np.repeat(pixels, 3, axis=0)
    return np.ascontiguousarray(pixels.transpose(1, 2, 0))


def _back(pixels: np.ndarray, like: Tensor) -> Tensor:
    chw = np.ascontiguousarray(np.asarray(pixels).transpose(2, 0, 1))
    if like.is_floating_point():
        return creation.tensor(chw.astype(np.float32) / 255.0, dtype=like.dtype)
    return creation.tensor(chw)


def draw_bounding_boxes(image: Tensor, boxes: Tensor, labels: list | None = None, colors: Any = None,
                        fill: bool | None = False, width: int = 1, font: str | None = None,
                        font_size: int | None = None, label_colors: Any = None, label_background_colors: Any = None,
                        fill_labels: bool = False) -> Tensor:
    """Draw ``(xmin, ymin, xmax, ymax)`` boxes (and optional labels) on a uint8 or float ``(C, H, W)`` image."""
    image_module = require_pillow("draw_bounding_boxes")
    from PIL import ImageDraw, ImageFont

    _check_image("draw_bounding_boxes", image, (1, 3))
    if boxes.shape[-1] != 4:
        raise ValueError(f"draw_bounding_boxes: boxes must be (N, 4) in (xmin, ymin, xmax, ymax) format, got shape "
                         f"{tuple(boxes.shape)} (oriented 8-coordinate boxes are not drawn by ember)")
    corners = boxes.detach().cpu().numpy()
    if corners.size and ((corners[:, 0] > corners[:, 2]).any() or (corners[:, 1] > corners[:, 3]).any()):
        raise ValueError("Boxes need to be in (xmin, ymin, xmax, ymax) format. Use torchvision.ops.box_convert to "
                         "convert them")
    count = corners.shape[0]
    if count == 0:
        warnings.warn("boxes doesn't contain any box. No box was drawn")
        return image
    if labels is None:
        labels = [None] * count
    elif len(labels) != count:
        raise ValueError(f"Number of boxes ({count}) and labels ({len(labels)}) mismatch. Please specify labels for "
                         "each box.")
    outline = _colors(colors, count)
    text_colors = _colors(label_colors if label_colors else "black", count) if (label_colors or fill_labels) \
        else list(outline)
    backgrounds = _colors(label_background_colors, count) if (fill_labels and label_background_colors) \
        else list(outline)
    if font is None:
        if font_size is not None:
            warnings.warn("Argument 'font_size' will be ignored since 'font' is not set.")
        text_font = ImageFont.load_default()
    else:
        text_font = ImageFont.truetype(font=font, size=font_size or 10)
    canvas = image_module.fromarray(_as_uint8_pixels(image))
    draw = ImageDraw.Draw(canvas, "RGBA") if fill else ImageDraw.Draw(canvas)
    boxes_int = corners.astype(np.int64).tolist()  # torchvision draws at integer (truncated) corners
    for box, color, label, text_color, background in zip(boxes_int, outline, labels, text_colors, backgrounds):
        draw.rectangle(box, width=width, outline=color, fill=color + (100,) if fill else None)
        if label is not None:
            margin = width + 1
            if fill_labels:
                left, top, right, bottom = draw.textbbox((box[0] + margin, box[1] + margin), label, font=text_font)
                draw.rectangle((left - 1, top - 1, right + 1, bottom + 1), fill=background)
            draw.text((box[0] + margin, box[1] + margin), label, fill=text_color, font=text_font)
    return _back(np.asarray(canvas), image)


def draw_segmentation_masks(image: Tensor, masks: Tensor, alpha: float = 0.8, colors: Any = None) -> Tensor:
    """Blend boolean masks ``(N, H, W)`` (or ``(H, W)``) onto an RGB image: ``image * (1 - alpha) + painted *
    alpha``, pixels covered by two or more masks painted black (torchvision's rule)."""
    _check_image("draw_segmentation_masks", image, (3,))
    if masks.ndim == 2:
        masks = masks[None]
    if masks.ndim != 3:
        raise ValueError("masks must be of shape (H, W) or (batch_size, H, W)")
    if masks.dtype != dtypes.bool_:
        raise ValueError(f"The masks must be of dtype bool. Got {masks.dtype}")
    if tuple(masks.shape[-2:]) != tuple(image.shape[-2:]):
        raise ValueError("The image and the masks must have the same height and width")
    count = masks.shape[0]
    if count == 0:
        warnings.warn("masks doesn't contain any mask. No mask was drawn")
        return image
    floating = image.is_floating_point()
    palette = _colors(colors, count, floating)
    source = image.detach().cpu().numpy()
    painted = source.copy()
    mask_array = masks.detach().cpu().numpy()
    for mask, color in zip(mask_array, palette):
        painted[:, mask] = np.asarray(color, dtype=source.dtype)[:, None]
    painted[:, mask_array.sum(axis=0) > 1] = 0
    # torchvision's arithmetic: uint8 images promote to float32 with the python-float alpha, then truncate back.
    compute = source.dtype if floating else np.float32
    blended = source.astype(compute) * (1 - alpha) + painted.astype(compute) * alpha
    return creation.tensor(blended.astype(source.dtype), dtype=image.dtype)


def draw_keypoints(image: Tensor, keypoints: Tensor, connectivity: list | None = None, colors: Any = None,
                   radius: int = 2, width: int = 3, visibility: Tensor | None = None) -> Tensor:
    """Draw ``(num_instances, K, 2)`` keypoints as filled circles, and the ``connectivity`` pairs as lines,
    skipping keypoints whose ``visibility`` is False."""
    image_module = require_pillow("draw_keypoints")
    from PIL import ImageDraw

    _check_image("draw_keypoints", image, (3,))
    if keypoints.ndim != 3:
        raise ValueError("keypoints must be of shape (num_instances, K, 2)")
    visible = np.ones(tuple(keypoints.shape[:-1]), dtype=bool) if visibility is None else \
        visibility.detach().cpu().numpy().astype(bool)
    if visible.ndim == 3:
        visible = visible.squeeze(-1)
    if visible.ndim != 2:
        raise ValueError(f"visibility must be of shape (num_instances, K). Got ndim={visible.ndim}")
    if visible.shape != tuple(keypoints.shape[:-1]):
        raise ValueError(f"keypoints and visibility must have the same dimensionality for num_instances and K. Got "
                         f"visibility.shape={visible.shape} and keypoints.shape={tuple(keypoints.shape)}")
    canvas = image_module.fromarray(_as_uint8_pixels(image))
    draw = ImageDraw.Draw(canvas)
    points = keypoints.detach().cpu().numpy().astype(np.int64).tolist()
    for instance, shown in zip(points, visible.tolist()):
        for (x, y), on in zip(instance, shown):
            if on:
                draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=colors, outline=None, width=0)
        for start, end in connectivity or ():
            if shown[start] and shown[end]:
                draw.line(((instance[start][0], instance[start][1]), (instance[end][0], instance[end][1])),
                          width=width)
    return _back(np.asarray(canvas), image)


def _colorwheel() -> np.ndarray:
    """The 55-colour wheel of Baker et al.'s flow visualisation: six segments, each holding one channel at 255
    and ramping another up or down (red-yellow-green-cyan-blue-magenta)."""
    def ramp(length: int) -> np.ndarray:
        return np.floor(255 * np.arange(length) / length)

    # (length, channel held at 255, channel ramped, ramping up?)
    segments = ((15, 0, 1, True), (6, 1, 0, False), (4, 1, 2, True), (11, 2, 1, False), (13, 2, 0, True),
                (6, 0, 2, False))
    blocks = []
    for length, held, ramped, up in segments:
        block = np.zeros((length, 3))
        block[:, held] = 255
        block[:, ramped] = ramp(length) if up else 255 - ramp(length)
        blocks.append(block)
    return np.concatenate(blocks)


def flow_to_image(flow: Tensor) -> Tensor:
    """An optical flow ``(2, H, W)`` or ``(N, 2, H, W)`` (float32) as a uint8 RGB image: hue from the direction,
    saturation from the magnitude relative to the largest."""
    if flow.dtype != dtypes.float32:
        raise ValueError(f"Flow should be of dtype torch.float, got {flow.dtype}.")
    data = flow.detach().cpu().numpy()
    single = data.ndim == 3
    if single:
        data = data[None]
    if data.ndim != 4 or data.shape[1] != 2:
        raise ValueError(f"Input flow should have shape (2, H, W) or (N, 2, H, W), got {tuple(flow.shape)}.")
    max_norm = np.sqrt((data ** 2).sum(axis=1)).max()
    normalized = data / (max_norm + np.finfo(np.float32).eps)
    wheel = _colorwheel().astype(np.float32)
    columns = wheel.shape[0]
    norm = np.sqrt((normalized ** 2).sum(axis=1))
    angle = np.arctan2(-normalized[:, 1], -normalized[:, 0]) / np.float32(math.pi)
    position = (angle + 1) / 2 * (columns - 1)
    k0 = np.floor(position).astype(np.int64)
    k1 = np.where(k0 + 1 == columns, 0, k0 + 1)
    f = position - k0
    out = np.zeros((data.shape[0], 3, data.shape[2], data.shape[3]), dtype=np.uint8)
    for c in range(3):
        col = (1 - f) * (wheel[k0, c] / 255.0) + f * (wheel[k1, c] / 255.0)
        col = 1 - norm * (1 - col)
        out[:, c] = np.floor(255 * col).astype(np.uint8)
    return creation.tensor(out[0] if single else out)
