"""DatasetFolder and ImageFolder (torchvision's ``datasets.folder``): one sub-folder per class.

``root/dog/xxx.png``, ``root/cat/yyy.jpg``: classes are the sorted sub-folder names; samples are
the files with an allowed extension (or passing ``is_valid_file``), in sorted order. ImageFolder
opens images with Pillow (``pip install 'ember[vision]'``) and converts them to RGB.

Example:
    >>> from ember.vision.datasets import ImageFolder
    >>> data = ImageFolder("photos")                   # doctest: +SKIP
    >>> data.classes, data[0][1]                         # doctest: +SKIP
    (['cat', 'dog'], 0)
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from ember.data.dataset import Dataset

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def has_file_allowed_extension(filename: str, extensions: str | Sequence[str]) -> bool:
    exts = (extensions,) if isinstance(extensions, str) else tuple(extensions)
    return filename.lower().endswith(tuple(e.lower() for e in exts))


def is_image_file(filename: str) -> bool:
    return has_file_allowed_extension(filename, IMG_EXTENSIONS)


def find_classes(directory: str | os.PathLike) -> tuple[list[str], dict[str, int]]:
    """Sorted sub-folder names and their indices."""
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    if not classes:
        raise FileNotFoundError(f"Couldn't find any class folder in {directory}.")
    return classes, {name: i for i, name in enumerate(classes)}


def make_dataset(directory: str | os.PathLike, class_to_idx: dict[str, int] | None = None,
                 extensions: str | Sequence[str] | None = None, is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> list[tuple[str, int]]:
    """(path, class index) for every valid file under each class folder, walked in sorted order."""
    directory = os.path.expanduser(str(directory))
    if class_to_idx is None:
        _, class_to_idx = find_classes(directory)
    if (extensions is None) == (is_valid_file is None):
        raise ValueError("Both extensions and is_valid_file cannot be None or not None at the same time")
    valid = is_valid_file or (lambda path: has_file_allowed_extension(path, extensions))  # type: ignore[arg-type]
    instances: list[tuple[str, int]] = []
    found: set[str] = set()
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        if not os.path.isdir(target_dir):
            continue
        for folder, _, names in sorted(os.walk(target_dir, followlinks=True)):
            for name in sorted(names):
                path = os.path.join(folder, name)
                if valid(path):
                    instances.append((path, class_to_idx[target_class]))
                    found.add(target_class)
    empty = set(class_to_idx) - found
    if empty and not allow_empty:
        msg = f"Found no valid file for the classes {', '.join(sorted(empty))}. "
        if extensions is not None:
            msg += f"Supported extensions are: {extensions if isinstance(extensions, str) else ', '.join(extensions)}"
        raise FileNotFoundError(msg)
    return instances


class DatasetFolder(Dataset):
    """Samples ``(loader(path), class_index)`` from a folder per class."""

    def __init__(self, root: str | os.PathLike, loader: Callable[[str], Any],
                 extensions: Sequence[str] | None = None, transform: Callable | None = None,
                 target_transform: Callable | None = None, is_valid_file: Callable[[str], bool] | None = None,
                 allow_empty: bool = False) -> None:
        self.root = str(root)
        self.transform = transform
        self.target_transform = target_transform
        classes, class_to_idx = self.find_classes(self.root)
        samples = self.make_dataset(self.root, class_to_idx, extensions, is_valid_file, allow_empty)
        self.loader = loader
        self.extensions = extensions
        self.classes = classes
        self.class_to_idx = class_to_idx
        self.samples = samples
        self.targets = [s[1] for s in samples]

    @staticmethod
    def make_dataset(directory: str, class_to_idx: dict[str, int], extensions: Sequence[str] | None = None,
                     is_valid_file: Callable[[str], bool] | None = None,
                     allow_empty: bool = False) -> list[tuple[str, int]]:
        return make_dataset(directory, class_to_idx, extensions, is_valid_file, allow_empty)

    def find_classes(self, directory: str) -> tuple[list[str], dict[str, int]]:
        return find_classes(directory)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        path, target = self.samples[index]
        sample = self.loader(path)
        if self.transform is not None:
            sample = self.transform(sample)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return sample, target

    def __len__(self) -> int:
        return len(self.samples)


def pil_loader(path: str) -> Any:
    """Open an image with Pillow and convert it to RGB."""
    from ember.vision.transforms._image import require_pillow

    Image = require_pillow("ImageFolder")
    with open(path, "rb") as f:
        img = Image.open(f)
        return img.convert("RGB")


def default_loader(path: str) -> Any:
    return pil_loader(path)


class ImageFolder(DatasetFolder):
    """Images in a folder per class, opened with Pillow as RGB (``self.imgs`` = ``self.samples``)."""

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 target_transform: Callable | None = None, loader: Callable[[str], Any] = default_loader,
                 is_valid_file: Callable[[str], bool] | None = None, allow_empty: bool = False) -> None:
        super().__init__(root, loader, IMG_EXTENSIONS if is_valid_file is None else None, transform=transform,
                         target_transform=target_transform, is_valid_file=is_valid_file, allow_empty=allow_empty)
        self.imgs = self.samples


__all__ = ["DatasetFolder", "ImageFolder", "IMG_EXTENSIONS", "default_loader", "find_classes", "make_dataset",
           "pil_loader", "has_file_allowed_extension", "is_image_file"]
