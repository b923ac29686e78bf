"""CIFAR-10 and CIFAR-100 from their python batches (torchvision's ``datasets.CIFAR10/100``).

``root`` holds ``cifar-10-batches-py/`` (``data_batch_1..5``, ``test_batch``, ``batches.meta``) or
``cifar-100-python/`` (``train``, ``test``, ``meta``), as the published tarballs unpack. The batches
are pickles; they are read with a restricted unpickler that only builds dicts, lists, bytes,
numbers and NumPy arrays. Images are ``HxWx3`` uint8 NumPy arrays (torchvision gives PIL images;
ember's transforms take either).

Example:
    >>> from ember.vision.datasets import CIFAR10
    >>> train = CIFAR10("data", train=True)            # doctest: +SKIP
    >>> image, label = train[0]                         # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ember.data.dataset import Dataset
from ember.vision.datasets._safe_pickle import load_data_pickle
from ember.hub import download_url_to_file


class CIFAR10(Dataset):
    base_folder = "cifar-10-batches-py"
    url = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
    filename = "cifar-10-python.tar.gz"
    tgz_md5 = "c58f30108f718f92721af3b95e74349a"
    train_list = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5"]
    test_list = ["test_batch"]
    meta_file, meta_key, labels_key = "batches.meta", "label_names", "labels"

    def __init__(self, root: str | os.PathLike, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        self.root = Path(os.path.expanduser(str(root)))
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        if download and not self._check_integrity():
            self.download()
        if not self._check_integrity():
            raise RuntimeError(f"{type(self).__name__}: dataset not found or incomplete in {self.root / self.base_folder}"
                               f"; put the unpacked '{self.filename}' there ({self.url}) or pass download=True")
        images, labels = [], []
        for name in self.train_list if train else self.test_list:
            entry = self._read(name)
            images.append(np.asarray(entry["data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            labels.extend(int(x) for x in entry[self.labels_key])
        self.data = np.ascontiguousarray(np.concatenate(images).transpose(0, 2, 3, 1))  # N x 32 x 32 x 3 (HWC)
        self.targets = labels
        if len(self.targets) != len(self.data):
            raise RuntimeError(f"{type(self).__name__}: {len(self.data)} images but {len(self.targets)} labels")
        self.classes = [str(c) for c in self._read(self.meta_file)[self.meta_key]]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}

    def _read(self, name: str) -> dict[str, Any]:
        path = self.root / self.base_folder / name
        entry = load_data_pickle(path.read_bytes(), str(path))
        if not isinstance(entry, dict):
            raise RuntimeError(f"{path}: expected a dict in a CIFAR batch, got {type(entry).__name__}")
        return entry

    def _check_integrity(self) -> bool:
        folder = self.root / self.base_folder
        return all((folder / n).is_file() for n in self.train_list + self.test_list + [self.meta_file])

    def download(self) -> None:
        """Fetch the tarball (MD5-checked) and unpack it under ``root`` (regular files only)."""
        self.root.mkdir(parents=True, exist_ok=True)
        archive = self.root / self.filename
        if not archive.is_file():
            download_url_to_file(self.url, str(archive), progress=True)
        digest = hashlib.md5(archive.read_bytes()).hexdigest()
        if digest != self.tgz_md5:
            raise RuntimeError(f"{archive}: MD5 {digest} does not match the published {self.tgz_md5}; delete it and "
                               "retry")
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(self.root, filter="data")  # refuses absolute paths, links out of root, devices

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img, target = self.data[index], self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def extra_repr(self) -> str:
        return f"Split: {'Train' if self.train else 'Test'}"

    def __repr__(self) -> str:
        return (f"Dataset {type(self).__name__}\n    Number of datapoints: {len(self)}\n    Root location: "
                f"{self.root}\n    {self.extra_repr()}")


class CIFAR100(CIFAR10):
    """CIFAR-100 with the 100 fine labels (``targets``) as torchvision does."""

    base_folder = "cifar-100-python"
    url = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
    filename = "cifar-100-python.tar.gz"
    tgz_md5 = "eb9058c3a382ffc7106e4002c42a8d85"
    train_list = ["train"]
    test_list = ["test"]
    meta_file, meta_key, labels_key = "meta", "fine_label_names", "fine_labels"
