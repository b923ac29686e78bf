"""MNIST and Fashion-MNIST from the standard IDX ``.gz`` files, plus a small MNIST subset carried in the package.

Images are held as one ``uint8`` array (N x 28 x 28), so ``get_batch`` serves a whole batch with one
fancy-index and one batched transform (when the transform is batchable: ToTensor, Normalize, ...).

Files are looked for in ``root``, ``root/mnist`` (``root/fashion-mnist``) and torchvision's
``root/MNIST/raw`` (``root/FashionMNIST/raw``); the ``.gz`` files are checked against their published MD5.

Example:
    >>> from ember.data.datasets import MNIST
    >>> train = MNIST.carried(train=True)       # 12,000 images, 1,200 per digit, no download
    >>> image, label = train[0]
    >>> image.shape, image.dtype, type(label).__name__
    ((28, 28), dtype('uint8'), 'int')
"""
from __future__ import annotations

import gzip
import hashlib
import os
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ember.data.dataset import Dataset
from ember import _config
from ember.creation import from_numpy

_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_ASSETS = Path(__file__).resolve().parents[1] / "assets"
CARRIED_MNIST = _ASSETS / "mnist_subset.npz"


def read_idx(data: bytes, name: str = "IDX data") -> np.ndarray:
    """Parse IDX bytes: 2 zero bytes, a type code, the number of dims, big-endian int32 sizes, raw data."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_TYPES:
        raise ValueError(f"{name}: not an IDX file (bad magic number {data[:4].hex()})")
    ndim = data[3]
    if len(data) < 4 + 4 * ndim:
        raise ValueError(f"{name}: IDX header declares {ndim} dimensions but the file ends inside the header")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    dtype = np.dtype(_IDX_TYPES[data[2]])
    expected = int(np.prod(shape)) * dtype.itemsize
    offset = 4 + 4 * ndim
    if len(data) - offset != expected:
        raise ValueError(f"{name}: IDX header says shape {shape} ({expected} bytes) but the file holds "
                         f"{len(data) - offset} bytes; the file is truncated or corrupt")
    return np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape).astype(dtype.newbyteorder("="))


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fetch_url(url: str, timeout: float = 30.0) -> bytes:
    """Download one URL (a module function so tests can replace it)."""
    import urllib.request

    request = urllib.request.Request(url, headers={"User-Agent": "ember"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - fixed https/http mirrors
        return response.read()


def _as_array(value: Any, name: str) -> np.ndarray:
    """A tensor, array or list assigned to ``data``/``targets``, as a NumPy array."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    if isinstance(value, (np.ndarray, list, tuple)):
        return np.asarray(value)
    raise TypeError(f"MNIST.{name}: expected a tensor, NumPy array or list, got {type(value).__name__}")


def _atomic_write(path: Path, payload: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class MNIST(Dataset):
    """The MNIST digits: ``MNIST(root, train=True, transform=None, target_transform=None, download=False)``.

    ``dataset[i]`` is ``(image, label)`` with a 28x28 uint8 NumPy image (what torchvision's PIL image
    becomes under ``ToTensor``) unless ``transform`` maps it. ``data``/``targets`` are uint8/int64 tensors.
    """

    folder = "mnist"
    mirrors = ("https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/")
    resources = {
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    }
    classes = ["0 - zero", "1 - one", "2 - two", "3 - three", "4 - four", "5 - five", "6 - six", "7 - seven",
               "8 - eight", "9 - nine"]

    def __init__(self, root: str | os.PathLike | None = None, train: bool = True, transform: Callable | None = None,
                 target_transform: Callable | None = None, download: bool = False) -> None:
        if root is None:
            root = _config.DATA_HOME
        self.root = Path(root).expanduser()
        self.train = train
        self.transform = transform
        self.target_transform = target_transform
        split = "train" if train else "t10k"
        names = (f"{split}-images-idx3-ubyte.gz", f"{split}-labels-idx1-ubyte.gz")
        folder = self._find_folder(names)
        if folder is None and download:
            folder = self._download()
        if folder is None:
            raise RuntimeError(self._missing_message(names))
        self.raw_folder = folder
        self._set_arrays(self._load_file(folder, names[0]), self._load_file(folder, names[1]))

    # ---- construction helpers -------------------------------------------------------------------
    def _candidates(self) -> list[Path]:
        name = type(self).__name__
        return [self.root, self.root / self.folder, self.root / self.folder / "raw", self.root / name / "raw",
                self.root / name]

    def _find_folder(self, names: tuple[str, ...]) -> Path | None:
        for folder in self._candidates():
            if all((folder / n).is_file() or (folder / n[:-3]).is_file() for n in names):
                return folder
        return None

    def _missing_message(self, names: tuple[str, ...]) -> str:
        tried = ", ".join(str(c) for c in self._candidates())
        hint = f" For an offline default use {type(self).__name__}.carried()." if type(self) is MNIST else ""
        return (f"{type(self).__name__}: dataset files {list(names)} not found. Looked in: {tried}. Put the four "
                f"IDX .gz files ({', '.join(self.resources)}) in one of those folders, or pass download=True "
                f"when online (mirrors: {', '.join(self.mirrors)}).{hint}")

    def _load_file(self, folder: Path, name: str) -> np.ndarray:
        path = folder / name
        raw = folder / name[:-3]  # torchvision also leaves the unpacked files in raw/
        if raw.is_file():
            # torchvision reads the unpacked files as they are (a program's own subset or mirror): so does ember
            return read_idx(raw.read_bytes(), str(raw))
        if path.is_file():
            expected = self.resources.get(name)
            actual = _md5(path)
            if expected is not None and actual != expected:
                raise RuntimeError(f"{type(self).__name__}: checksum mismatch for {path}: MD5 {actual}, expected "
                                   f"{expected}. The file is corrupt or not the published one; delete it and "
                                   "download it again.")
            with gzip.open(path, "rb") as f:
                return read_idx(f.read(), str(path))
        return read_idx(raw.read_bytes(), str(raw))

    def _download(self) -> Path:
        target = self.root / type(self).__name__ / "raw"
        target.mkdir(parents=True, exist_ok=True)
        failures = []
        for name, md5 in self.resources.items():
            path = target / name
            if path.is_file() and _md5(path) == md5:
                continue
            for mirror in self.mirrors:
                try:
                    payload = _fetch_url(mirror + name)
                except Exception as error:  # offline, DNS, HTTP errors: try the next mirror
                    failures.append(f"{mirror}{name}: {error}")
                    continue
                if hashlib.md5(payload).hexdigest() != md5:
                    failures.append(f"{mirror}{name}: checksum mismatch")
                    continue
                _atomic_write(path, payload)
                break
            else:
                raise RuntimeError(
                    f"{type(self).__name__}: could not download {name} (offline?). Tried: {'; '.join(failures)}. "
                    f"Copy the files {', '.join(self.resources)} by hand into {target} (or {self.root}) and run again"
                    + (", or use MNIST.carried() for the subset shipped with ember." if type(self) is MNIST else "."))
        return target

    def _set_arrays(self, images: np.ndarray, labels: np.ndarray) -> None:
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise ValueError(f"{type(self).__name__}: images of shape {images.shape} do not match labels of shape "
                             f"{labels.shape}")
        self._images = np.ascontiguousarray(images, dtype=np.uint8)
        self._labels = labels.astype(np.int64)

    @classmethod
    def from_arrays(cls, images: np.ndarray, labels: np.ndarray, train: bool = True,
                    transform: Callable | None = None, target_transform: Callable | None = None) -> "MNIST":
        """A dataset over given uint8 images (N x H x W) and integer labels, without files."""
        self = cls.__new__(cls)
        self.root, self.raw_folder, self.train = None, None, train
        self.transform, self.target_transform = transform, target_transform
        self._set_arrays(np.asarray(images), np.asarray(labels))
        return self

    @classmethod
    def carried(cls, train: bool = True, transform: Callable | None = None,
                target_transform: Callable | None = None) -> "MNIST":
        """The stratified MNIST subset shipped inside ember (12,000 train / 2,000 test, balanced per digit)."""
        images, labels = load_carried_mnist(train)
        return MNIST.from_arrays(images, labels, train, transform, target_transform)

    # ---- access -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._labels)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image, target = self._images[index], int(self._labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return image, target

    def get_batch(self, indices: np.ndarray) -> list[Any]:
        """The collated batch at ``indices``: one gather plus one batched transform when possible."""
        from ember.data.collate import default_collate

        images, labels = self._images[indices], self._labels[indices]
        if self.transform is None:
            x = from_numpy(images)
        elif getattr(self.transform, "batchable", False):
            x = self.transform.apply_batch(images)
        else:
            x = default_collate([self.transform(image) for image in images])
        if self.target_transform is None:
            y = from_numpy(labels)
        elif getattr(self.target_transform, "batchable", False):
            y = self.target_transform.apply_batch(labels)
        else:
            y = default_collate([self.target_transform(int(t)) for t in labels])
        return [x, y]  # a list, as default_collate makes of (image, label) samples

    @property
    def data(self) -> Any:
        return from_numpy(self._images)

    @data.setter
    def data(self, images: Any) -> None:
        """torchvision's ``data`` is a plain attribute: ``ds.data = ds.data[:1000]`` subsets the images."""
        self._images = np.ascontiguousarray(_as_array(images, "data"), dtype=np.uint8)

    @property
    def targets(self) -> Any:
        return from_numpy(self._labels)

    @targets.setter
    def targets(self, labels: Any) -> None:
        self._labels = np.asarray(_as_array(labels, "targets")).astype(np.int64)

    # torchvision's deprecated names for data/targets (still used by many tutorials); it warns, as here.
    @property
    def train_data(self) -> Any:
        warnings.warn("train_data has been renamed data", UserWarning, stacklevel=2)
        return self.data

    @property
    def test_data(self) -> Any:
        warnings.warn("test_data has been renamed data", UserWarning, stacklevel=2)
        return self.data

    @property
    def train_labels(self) -> Any:
        warnings.warn("train_labels has been renamed targets", UserWarning, stacklevel=2)
        return self.targets

    @property
    def test_labels(self) -> Any:
        warnings.warn("test_labels has been renamed targets", UserWarning, stacklevel=2)
        return self.targets

    @property
    def class_to_idx(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.classes)}

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The raw ``(images uint8 NxHxW, labels int64 N)`` arrays (no copy)."""
        return self._images, self._labels

    def to_tensors(self, mean: float | None = None, std: float | None = None) -> tuple[Any, Any]:
        """The whole set as ``(x float32 Nx1xHxW in [0, 1], optionally normalized; y int64)``.

        Handy for ``Model.fit(x, y)``. Example: ``x, y = MNIST.carried().to_tensors(0.1307, 0.3081)``.
        """
        x = self._images[:, None].astype(np.float32) / np.float32(255.0)
        if mean is not None:
            x -= np.float32(mean)
        if std is not None:
            x /= np.float32(std)
        return from_numpy(x), from_numpy(self._labels.copy())

    def __repr__(self) -> str:
        split = "Train" if self.train else "Test"
        return f"Dataset {type(self).__name__}\n    Number of datapoints: {len(self)}\n    Split: {split}"


class FashionMNIST(MNIST):
    """Zalando's Fashion-MNIST: same layout and API as ``MNIST``."""

    folder = "fashion-mnist"
    mirrors = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)
    resources = {
        "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
        "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
        "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
        "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
    }
    classes = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
               "Ankle boot"]



class KMNIST(MNIST):
    """Kuzushiji-MNIST (ten cursive Japanese characters): same layout and API as ``MNIST``.

    Example: ``KMNIST("data", train=False)`` reads ``data/KMNIST/raw/t10k-images-idx3-ubyte[.gz]``.
    """

    folder = "kmnist"
    mirrors = ("http://codh.rois.ac.jp/kmnist/dataset/kmnist/",)
    resources = {
        "train-images-idx3-ubyte.gz": "bdb82020997e1d708af4cf47b453dcf7",
        "train-labels-idx1-ubyte.gz": "e144d726b3acfaa3e44228e80efcd344",
        "t10k-images-idx3-ubyte.gz": "5c965bf0a639b31b8f53240b1b52f4d7",
        "t10k-labels-idx1-ubyte.gz": "7320c461ea6c1c855c0b718fb2a4b134",
    }
    classes = ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]

def load_carried_mnist(train: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 Nx28x28, labels int64 N)`` of the MNIST subset shipped in ``ember/data/assets``."""
    if not CARRIED_MNIST.is_file():
        raise RuntimeError(f"load_carried_mnist: {CARRIED_MNIST} is missing from this ember install; rebuild it "
                           "with `python tools/make_mnist_subset.py` from a checkout that has the MNIST files")
    split = "train" if train else "test"
    with np.load(CARRIED_MNIST, allow_pickle=False) as archive:
        return archive[f"{split}_images"], archive[f"{split}_labels"].astype(np.int64)
