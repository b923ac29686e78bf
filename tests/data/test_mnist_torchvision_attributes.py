"""torchvision's MNIST attributes that tutorials use: the deprecated ``train_data``/``train_labels``/``test_data``/
``test_labels`` (MorvanZhou's 401_CNN.py), ``class_to_idx``, and ``data``/``targets`` as assignable attributes
(``ds.data = ds.data[:1000]`` to subset)."""
from __future__ import annotations

import numpy as np
import pytest

from ember.data.datasets import MNIST


def _dataset():
    images = np.arange(5 * 28 * 28, dtype=np.int64).reshape(5, 28, 28) % 256
    return MNIST.from_arrays(images.astype(np.uint8), np.array([3, 1, 4, 1, 5]))


@pytest.mark.parametrize("name, real", [("train_data", "data"), ("test_data", "data"),
                                        ("train_labels", "targets"), ("test_labels", "targets")])
def test_deprecated_names_warn_and_return_data_or_targets(name, real):
    ds = _dataset()
    with pytest.warns(UserWarning, match=f"{name} has been renamed {real}"):
        value = getattr(ds, name)
    assert np.array_equal(value.numpy(), getattr(ds, real).numpy())


def test_assigning_data_and_targets_subsets_the_dataset():
    ds = _dataset()
    keep = ds.targets == 1
    ds.data, ds.targets = ds.data[keep], ds.targets[keep]
    assert len(ds) == 2 and ds.targets.tolist() == [1, 1]
    image, label = ds[1]
    assert label == 1 and np.array_equal(image, _dataset()._images[3])
    ds.targets = [7, 8]
    assert ds[0][1] == 7
    with pytest.raises(TypeError, match="MNIST.data: expected a tensor"):
        ds.data = "images"


def test_class_to_idx_like_torchvision():
    assert _dataset().class_to_idx["3 - three"] == 3
    assert len(_dataset().class_to_idx) == 10
