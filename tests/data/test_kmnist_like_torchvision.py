"""KMNIST (Kuzushiji-MNIST), as torchvision's: the MNIST layout under ``KMNIST/raw``, its ten class names.

timm's dataset factory imports ``from torchvision.datasets import ... KMNIST ...`` at module level, so
``import timm`` under ``ember run`` stopped there before KMNIST existed.
"""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from ember.vision.datasets import KMNIST, MNIST

# torchvision 0.28's KMNIST.classes (romanized names of the ten characters)
TORCHVISION_CLASSES = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]


def _idx(array: np.ndarray) -> bytes:
    return struct.pack(">i", 0x08 << 8 | array.ndim) + struct.pack(f">{array.ndim}i", *array.shape) + array.tobytes()


def test_kmnist_reads_its_raw_folder_and_names_torchvision_classes(tmp_path) -> None:
    raw = tmp_path / "KMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (5, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 5, dtype=np.uint8)
    (raw / "train-images-idx3-ubyte").write_bytes(_idx(images))
    (raw / "train-labels-idx1-ubyte").write_bytes(_idx(labels))
    data = KMNIST(tmp_path, train=True)
    assert isinstance(data, MNIST) and len(data) == 5
    image, label = data[4]
    np.testing.assert_array_equal(np.asarray(image), images[4])
    assert label == int(labels[4])
    assert data.classes == TORCHVISION_CLASSES
    assert data.class_to_idx["wo"] == 9


def test_kmnist_checks_the_published_md5_of_a_lone_gz(tmp_path) -> None:
    raw = tmp_path / "KMNIST" / "raw"
    raw.mkdir(parents=True)
    tiny = np.zeros((1, 28, 28), np.uint8)
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(tiny)))
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(gzip.compress(_idx(np.zeros(1, np.uint8))))
    with pytest.raises(RuntimeError, match="(?i)md5|checksum"):
        KMNIST(tmp_path, train=False)
