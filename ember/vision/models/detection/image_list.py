"""``ImageList``: a padded batch of images and the size of each before padding (torchvision's
``models.detection.image_list``).

Example:
    >>> import ember
    >>> from ember.vision.models.detection.image_list import ImageList
    >>> batch = ImageList(ember.zeros(2, 3, 32, 32), [(30, 28), (32, 20)])
    >>> batch.image_sizes[1]
    (32, 20)
"""
from __future__ import annotations

from typing import Any

from ember.tensor import Tensor


class ImageList:
    """``tensors``: [N, C, H, W] (zero-padded at the bottom and right); ``image_sizes``: each image's (h, w)."""

    def __init__(self, tensors: Tensor, image_sizes: list[tuple[int, int]]) -> None:
        self.tensors = tensors
        self.image_sizes = image_sizes

    def to(self, device: Any) -> "ImageList":
        return ImageList(self.tensors.to(device), self.image_sizes)
