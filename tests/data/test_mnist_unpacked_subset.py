"""MNIST reads the unpacked IDX files in ``raw/`` as torchvision does, so a program's own subset loads.

torchvision's MNIST looks only for the unpacked ``raw/train-images-idx3-ubyte`` (no checksum on files that
are already there); programs and test suites shrink MNIST by writing those. ember checks the published MD5
only when it has nothing but the ``.gz`` files to read.
"""
from __future__ import annotations

import gzip
import struct

import numpy as np

from ember.data.datasets import MNIST


def _idx(array: np.ndarray) -> bytes:
    magic = 0x08 << 8 | array.ndim  # 0x00 0x00, type 0x08 (unsigned bytes), the number of dimensions
    return struct.pack(">i", magic) + struct.pack(f">{array.ndim}i", *array.shape) + array.tobytes()


def test_unpacked_subset_is_read_even_beside_a_gz_of_other_content(tmp_path) -> None:
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (7, 28, 28), dtype=np.uint8)
    labels = rng.integers(0, 10, 7, dtype=np.uint8)
    (raw / "t10k-images-idx3-ubyte").write_bytes(_idx(images))
    (raw / "t10k-labels-idx1-ubyte").write_bytes(_idx(labels))
    # a .gz whose MD5 is not the published one: ignored, as torchvision ignores it, since the unpacked file exists
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx(images[:2])))
    data = MNIST(tmp_path, train=False)
    assert len(data) == 7
    image, label = data[3]
    np.testing.assert_array_equal(np.asarray(image), images[3])
    assert label == int(labels[3])
