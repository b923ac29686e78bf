"""``GeneralizedRCNNTransform``: what detectors do to images before the backbone and to detections after the
heads (torchvision's ``models.detection.transform``).

Before: normalize each image, resize it so its shorter side is ``min_size`` (unless the longer side would then
exceed ``max_size``; or to ``fixed_size``), scale the targets' boxes, masks and keypoints with it, and pad the
batch to a common size divisible by ``size_divisible``. After: scale boxes and keypoints back to the original
image sizes and paste the mask predictions into full images.

Example:
    >>> import ember
    >>> from ember.vision.models.detection.transform import GeneralizedRCNNTransform
    >>> t = GeneralizedRCNNTransform(64, 96, [0.5, 0.5, 0.5], [0.25, 0.25, 0.25]).eval()
    >>> batch, _ = t([ember.rand(3, 40, 50), ember.rand(3, 30, 30)])
    >>> tuple(batch.tensors.shape), batch.image_sizes
    ((2, 3, 64, 96), [(64, 80), (64, 64)])
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models.detection.image_list import ImageList
from ember.vision.models.detection.roi_heads import paste_masks_in_image

__all__ = ["GeneralizedRCNNTransform", "resize_boxes", "resize_keypoints"]


def _ratios(new_size: Sequence[int], original_size: Sequence[int]) -> list[float]:
    # torchvision divides float32 scalars; the quotient is a float32 value
    return [float(np.float32(s) / np.float32(s_orig)) for s, s_orig in zip(new_size, original_size)]


def resize_boxes(boxes: Tensor, original_size: Sequence[int], new_size: Sequence[int]) -> Tensor:
    """Scale ``(x1, y1, x2, y2)`` boxes from an ``original_size`` (h, w) image to ``new_size``."""
    ratio_h, ratio_w = _ratios(new_size, original_size)
    x1, y1, x2, y2 = boxes.unbind(1)
    return ember.stack((x1 * ratio_w, y1 * ratio_h, x2 * ratio_w, y2 * ratio_h), dim=1)


def resize_keypoints(keypoints: Tensor, original_size: Sequence[int], new_size: Sequence[int]) -> Tensor:
    """Scale ``[..., K, 3]`` keypoints ``(x, y, visibility)`` from ``original_size`` (h, w) to ``new_size``."""
    ratio_h, ratio_w = _ratios(new_size, original_size)
    return ember.stack((keypoints[..., 0] * ratio_w, keypoints[..., 1] * ratio_h, keypoints[..., 2]), dim=-1)


def _resize_image_and_masks(image: Tensor, self_min_size: int, self_max_size: int,
                            target: dict[str, Tensor] | None = None,
                            fixed_size: tuple[int, int] | None = None) -> tuple[Tensor, dict[str, Tensor] | None]:
    if fixed_size is not None:
        size, scale, recompute = [fixed_size[1], fixed_size[0]], None, None
    else:
        h, w = image.shape[-2:]
        size, scale, recompute = None, min(self_min_size / min(h, w), self_max_size / max(h, w)), True
    image = F.interpolate(image[None], size=size, scale_factor=scale, mode="bilinear",
                          recompute_scale_factor=recompute, align_corners=False)[0]
    if target is not None and "masks" in target:
        masks = F.interpolate(target["masks"][:, None].float(), size=size, scale_factor=scale,
                              recompute_scale_factor=recompute)[:, 0]
        target["masks"] = masks.byte()
    return image, target


class GeneralizedRCNNTransform(nn.Module):
    """Normalize, resize and batch images (and their targets) for a detector; map detections back.

    In training a size is drawn from ``min_size`` (a tuple allows multi-scale training); in eval the last one
    is used. Returns an :class:`ImageList` and the resized targets (copies of the dicts)."""

    def __init__(self, min_size: int | Sequence[int], max_size: int, image_mean: list[float],
                 image_std: list[float], size_divisible: int = 32, fixed_size: tuple[int, int] | None = None,
                 **kwargs: Any) -> None:
        super().__init__()
        self.min_size = tuple(min_size) if isinstance(min_size, (list, tuple)) else (min_size,)
        self.max_size = max_size
        self.image_mean = image_mean
        self.image_std = image_std
        self.size_divisible = size_divisible
        self.fixed_size = fixed_size
        self._skip_resize = kwargs.pop("_skip_resize", False)

    def forward(self, images: Sequence[Tensor], targets: Sequence[dict[str, Tensor]] | None = None
                ) -> tuple[ImageList, list[dict[str, Tensor]] | None]:
        images = list(images)
        targets = [dict(t) for t in targets] if targets is not None else None
        for i, image in enumerate(images):
            if image.dim() != 3:
                raise ValueError(f"images is expected to be a list of 3d tensors of shape [C, H, W], "
                                 f"got {list(image.shape)}")
            image, target = self.resize(self.normalize(image), targets[i] if targets is not None else None)
            images[i] = image
            if targets is not None and target is not None:
                targets[i] = target
        sizes = [(int(img.shape[-2]), int(img.shape[-1])) for img in images]
        return ImageList(self.batch_images(images, size_divisible=self.size_divisible), sizes), targets

    def normalize(self, image: Tensor) -> Tensor:
        if not image.is_floating_point():
            raise TypeError(f"Expected input images to be of floating type (in range [0, 1]), but found type "
                            f"{image.dtype} instead")
        mean = ember.as_tensor(self.image_mean, dtype=image.dtype, device=image.device)
        std = ember.as_tensor(self.image_std, dtype=image.dtype, device=image.device)
        return (image - mean[:, None, None]) / std[:, None, None]

    def torch_choice(self, k: Sequence[int]) -> int:
        """One of ``k``, drawn with ember's generator (``ember.manual_seed`` makes it repeatable)."""
        return k[int(ember.empty(1).uniform_(0.0, float(len(k))).item())]

    def resize(self, image: Tensor, target: dict[str, Tensor] | None = None
               ) -> tuple[Tensor, dict[str, Tensor] | None]:
        h, w = image.shape[-2:]
        if self.training:
            if self._skip_resize:
                return image, target
            size = self.torch_choice(self.min_size)
        else:
            size = self.min_size[-1]
        image, target = _resize_image_and_masks(image, size, self.max_size, target, self.fixed_size)
        if target is None:
            return image, target
        new_size = image.shape[-2:]
        target["boxes"] = resize_boxes(target["boxes"], (h, w), new_size)
        if "keypoints" in target:
            target["keypoints"] = resize_keypoints(target["keypoints"], (h, w), new_size)
        return image, target

    def max_by_axis(self, the_list: list[list[int]]) -> list[int]:
        return [max(column) for column in zip(*the_list)]

    def batch_images(self, images: Sequence[Tensor], size_divisible: int = 32) -> Tensor:
        """Zero-pad every image at the bottom/right to the largest size rounded up to ``size_divisible``."""
        c, h, w = self.max_by_axis([list(img.shape) for img in images])
        h = int(math.ceil(float(h) / size_divisible) * size_divisible)
        w = int(math.ceil(float(w) / size_divisible) * size_divisible)
        return ember.stack([F.pad(img, (0, w - img.shape[2], 0, h - img.shape[1], 0, c - img.shape[0]))
                            for img in images])

    def postprocess(self, result: list[dict[str, Tensor]], image_shapes: list[tuple[int, int]],
                    original_image_sizes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Detections in the coordinates of the original images (eval only; training returns them as they are)."""
        if self.training:
            return result
        for pred, size, original in zip(result, image_shapes, original_image_sizes):
            pred["boxes"] = resize_boxes(pred["boxes"], size, original)
            if "masks" in pred:
                pred["masks"] = paste_masks_in_image(pred["masks"], pred["boxes"], original)
            if "keypoints" in pred:
                pred["keypoints"] = resize_keypoints(pred["keypoints"], size, original)
        return result

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(\n    Normalize(mean={self.image_mean}, std={self.image_std})\n"
                f"    Resize(min_size={self.min_size}, max_size={self.max_size}, mode='bilinear')\n)")
