"""CIFAR-10/100 (python batches through the restricted unpickler), ImageFolder, MNIST re-export."""
from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest

import ember.data.datasets
import ember.vision.datasets as D
from ember.vision.datasets._safe_pickle import RefusedGlobal


def _write_batch(path: Path, obj: dict) -> None:
    path.write_bytes(pickle.dumps(obj, protocol=2))  # the published files are protocol-2 pickles


def _fake_cifar10(root: Path, n: int = 4) -> np.ndarray:
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    rows = []
    for i, name in enumerate(D.CIFAR10.train_list + D.CIFAR10.test_list):
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        rows.append(data)
        _write_batch(folder / name, {"batch_label": f"batch {i}", "labels": [(i + k) % 10 for k in range(n)],
                                     "data": data, "filenames": [f"img{k}.png" for k in range(n)]})
    _write_batch(folder / "batches.meta", {"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                                           "frog", "horse", "ship", "truck"],
                                           "num_cases_per_batch": n, "num_vis": 3072})
    return np.concatenate(rows)


def test_cifar10_reads_the_python_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _fake_cifar10(tmp_path)
    train = D.CIFAR10(tmp_path, train=True)
    test = D.CIFAR10(str(tmp_path), train=False)
    assert len(train) == 20 and len(test) == 4 and train.classes[3] == "cat" and train.class_to_idx["truck"] == 9
    image, label = train[5]
    assert image.shape == (32, 32, 3) and image.dtype == np.uint8 and label == (1 + 1) % 10
    # row layout: 1024 red values, then green, then blue, each row-major 32x32
    np.testing.assert_array_equal(image[0, 1], rows[5][[1, 1025, 2049]])
    np.testing.assert_array_equal(image[:, :, 2].reshape(-1), rows[5][2048:])
    if _has_torch():
        from torchvision_ref import import_torchvision

        tv = import_torchvision()
        # torchvision checks each batch's published MD5, which made-up batches cannot have
        monkeypatch.setattr(tv.datasets.CIFAR10, "_check_integrity", lambda self: True)
        monkeypatch.setattr(tv.datasets.cifar, "check_integrity", lambda path, md5=None: True)
        reference = tv.datasets.CIFAR10(str(tmp_path), train=True)
        np.testing.assert_array_equal(train.data, reference.data)
        assert train.targets == reference.targets and train.classes == reference.classes


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def test_cifar100_uses_fine_labels(tmp_path: Path) -> None:
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    data = np.arange(2 * 3072, dtype=np.int64).astype(np.uint8).reshape(2, 3072)
    for name in ("train", "test"):
        _write_batch(folder / name, {"data": data, "fine_labels": [7, 42], "coarse_labels": [1, 2],
                                     "filenames": ["a", "b"], "batch_label": name})
    _write_batch(folder / "meta", {"fine_label_names": [f"c{i}" for i in range(100)],
                                   "coarse_label_names": [f"s{i}" for i in range(20)]})
    train = D.CIFAR100(tmp_path, train=True, transform=lambda img: img.mean(), target_transform=lambda t: -t)
    value, target = train[1]
    assert target == -42 and len(train.classes) == 100 and value == pytest.approx(data[1].mean())


class _Exploit:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_cifar_refuses_a_pickle_that_would_run_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_cifar10(tmp_path)
    monkeypatch.chdir(tmp_path)
    _write_batch(tmp_path / "cifar-10-batches-py" / "data_batch_2", {"data": _Exploit(), "labels": []})
    with pytest.raises(RefusedGlobal, match=r"refusing to load global (posix|os|nt)\.system"):
        D.CIFAR10(tmp_path, train=True)
    assert not (tmp_path / "PWNED").exists()


def test_cifar_missing_files_say_where_and_how(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"cifar-10-batches-py.*download=True"):
        D.CIFAR10(tmp_path)


def test_image_folder_matches_torchvision(tmp_path: Path) -> None:
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    for cls, count in (("dog", 2), ("cat", 3)):
        (tmp_path / cls).mkdir()
        for k in range(count):
            Image.fromarray(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8)).save(tmp_path / cls / f"{k}.png")
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    Image.fromarray(rng.integers(0, 256, (4, 4), dtype=np.uint8)).save(tmp_path / "dog" / "gray.png")
    data = D.ImageFolder(tmp_path)
    assert data.classes == ["cat", "dog"] and data.class_to_idx == {"cat": 0, "dog": 1}
    assert [os.path.basename(p) for p, _ in data.samples] == ["0.png", "1.png", "2.png", "0.png", "1.png", "gray.png"]
    assert data.targets == [0, 0, 0, 1, 1, 1] and data.imgs == data.samples
    image, target = data[5]
    assert image.mode == "RGB" and target == 1
    if _has_torch():
        from torchvision_ref import import_torchvision

        reference = import_torchvision().datasets.ImageFolder(str(tmp_path))
        assert [(os.path.relpath(p, tmp_path), t) for p, t in data.samples] == \
            [(os.path.relpath(p, tmp_path), t) for p, t in reference.samples]
    only_dogs = D.DatasetFolder(tmp_path, loader=lambda p: p, is_valid_file=lambda p: "gray" in p, allow_empty=True)
    assert len(only_dogs) == 1
    with pytest.raises(FileNotFoundError, match="Found no valid file for the classes cat"):
        D.DatasetFolder(tmp_path, loader=lambda p: p, is_valid_file=lambda p: "gray" in p)


def test_mnist_is_ember_data_mnist() -> None:
    assert D.MNIST is ember.data.datasets.MNIST and D.FashionMNIST is ember.data.datasets.FashionMNIST
