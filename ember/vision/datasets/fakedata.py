"""``FakeData``: random images and labels, each one reproducible from its index (torchvision's dataset for
trying a pipeline without downloading anything).

Example:
    >>> from ember.vision.datasets import FakeData
    >>> image, label = FakeData(size=4, image_size=(3, 8, 8), num_classes=2)[0]
    >>> image.size, label in (0, 1)
    ((8, 8), True)
"""
from __future__ import annotations

from typing import Any, Callable

from ember import creation, dtypes, random
from ember.data import Dataset
from ember.vision.transforms.transforms import ToPILImage


class FakeData(Dataset):
    """``size`` items of ``(image, label)``: a ``randn`` image of ``image_size`` (C, H, W) turned into a PIL image
    (as torchvision does, so the usual transforms apply) and a label below ``num_classes``; item ``i`` is drawn
    with seed ``i + random_offset`` without touching the global random state."""

    def __init__(self, size: int = 1000, image_size: tuple = (3, 224, 224), num_classes: int = 10,
                 transform: Callable | None = None, target_transform: Callable | None = None,
                 random_offset: int = 0) -> None:
        self.size, self.image_size, self.num_classes = size, tuple(image_size), num_classes
        self.transform, self.target_transform, self.random_offset = transform, target_transform, random_offset

    def __getitem__(self, index: int) -> tuple:
        if index >= len(self):
            raise IndexError(f"{type(self).__name__} index out of range")
        generator = random.Generator().manual_seed(index + self.random_offset)
        image = creation.randn(*self.image_size, generator=generator)
        target: Any = int(creation.randint(0, self.num_classes, (1,), generator=generator, dtype=dtypes.int64)[0])
        image = ToPILImage()(image)
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"Dataset {type(self).__name__}\n    Number of datapoints: {self.size}"
