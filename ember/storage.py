"""Storages: the memory under a tensor and its views (``Tensor.untyped_storage()``, ``Tensor.storage()``,
``torch.UntypedStorage``, ``torch.TypedStorage``, ``torch.FloatStorage``, ...).

ember's storage is the memory of a view's root tensor: every view of one tensor reports the same storage
(the same ``data_ptr()``, ``_cdata`` and, as in PyTorch, the same Python object while it lives), sized by
the root's bytes. Programs use storages to ask whether two tensors share memory, how many bytes a tensor
keeps alive, and to read raw bytes; they are views, so writes through a storage reach every tensor on it.

Example:
    >>> import ember as torch
    >>> x = torch.arange(6.0)
    >>> x[2:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), x.untyped_storage().nbytes()
    (True, 24)
"""
from __future__ import annotations

import os
import warnings
import weakref
from typing import Any, Iterable

import numpy as np

from ember import dtypes
from ember.device import to_device

__all__ = ["TypedStorage", "UntypedStorage"]


def _owner(array: Any) -> Any:
    """The array that owns ``array``'s memory (NumPy views chain to it through ``.base``)."""
    owner = array
    while isinstance(getattr(owner, "base", None), type(array)):
        owner = owner.base
    return owner


def _byte_view(array: Any, xp: Any) -> Any:
    """A flat uint8 view over all of ``array``'s memory (``array`` owns it, so it is contiguous)."""
    flat = array.reshape(-1) if array.flags.c_contiguous else xp.ascontiguousarray(array).reshape(-1)
    return flat.view(xp.uint8)


_LIVE: dict[int, "weakref.ref[UntypedStorage]"] = {}  # id(owner array) -> its live storage object


class UntypedStorage:
    """Bytes on a device. ``UntypedStorage(n)`` makes ``n`` new (uninitialized) bytes; ``UntypedStorage(seq)``
    bytes with those values; ``tensor.untyped_storage()`` the bytes under a tensor and all its views."""

    def __init__(self, *args: Any, device: Any = None) -> None:
        dev = to_device(device)
        xp = dev.backend.xp
        if len(args) > 1:
            raise TypeError(f"UntypedStorage(): expected a size or a sequence of ints, got {len(args)} arguments.")
        arg = args[0] if args else 0
        if isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
            if arg < 0:
                raise RuntimeError(f"UntypedStorage(): size must be non-negative, got {arg}.")
            host = np.zeros(int(arg), np.uint8)
        else:
            host = np.asarray(list(arg), dtype=np.int64)
            if host.size and (host.min() < 0 or host.max() > 255):
                raise RuntimeError("UntypedStorage(): byte values must lie in [0, 255].")
            host = host.astype(np.uint8)
        self._bytes = dev.backend.from_numpy(host) if xp is not np else host
        self._device = dev
        self._owner = self._bytes

    @classmethod
    def from_file(cls, filename: str, shared: bool = False, nbytes: int = 0) -> "UntypedStorage":
        """The first ``nbytes`` bytes of a file, memory-mapped: ``shared=True`` writes reach the file,
        ``shared=False`` keeps them private to this process (copy on write), as PyTorch's. ``safetensors``
        loads every tensor of a file as a slice of this."""
        if nbytes < 0:
            raise RuntimeError(f"UntypedStorage.from_file: nbytes must be non-negative, got {nbytes}.")
        size = os.path.getsize(filename)
        if nbytes > size:
            raise RuntimeError(f"UntypedStorage.from_file: {filename!r} holds {size} bytes, fewer than the {nbytes} "
                               f"asked for.")
        storage = cls.__new__(cls)
        storage._device = to_device("cpu")
        storage._bytes = (np.memmap(filename, dtype=np.uint8, mode="r+" if shared else "c", shape=(nbytes,))
                          if nbytes else np.zeros(0, np.uint8))
        storage._owner = storage._bytes
        return storage

    @classmethod
    def _of(cls, array: Any, dev: Any) -> "UntypedStorage":
        """The storage over ``array``'s owner: one Python object per owner while that object lives (as PyTorch;
        the cache holds it weakly, so it never keeps memory alive)."""
        owner = _owner(array)
        ref = _LIVE.get(id(owner))
        cached = ref() if ref is not None else None
        if cached is not None and cached._owner is owner:
            return cached
        storage = cls.__new__(cls)
        storage._owner = owner
        storage._device = dev
        storage._bytes = _byte_view(owner, dev.backend.xp)
        key = id(owner)
        _LIVE[key] = weakref.ref(storage, lambda dead, key=key: _LIVE.pop(key, None) if _LIVE.get(key) is dead
                                 else None)
        return storage

    # ---- what it is ----------------------------------------------------------------------------
    @property
    def device(self) -> Any:
        return self._device

    @property
    def is_cuda(self) -> bool:
        return self._device.type == "cuda"

    @property
    def is_sparse(self) -> bool:
        return False

    @property
    def filename(self) -> None:
        return None

    def nbytes(self) -> int:
        return int(self._bytes.size)

    def size(self) -> int:
        return self.nbytes()

    def __len__(self) -> int:
        return self.nbytes()

    def element_size(self) -> int:
        return 1

    def data_ptr(self) -> int:
        return int(self._device.backend.data_ptr(self._owner))

    @property
    def _cdata(self) -> int:
        """An identity for the memory (PyTorch's StorageImpl address; here the owner's address)."""
        return self.data_ptr()

    def type(self, dtype: Any = None) -> str:
        return "ember.storage.UntypedStorage" if dtype is None else str(dtype)

    def is_shared(self) -> bool:
        from ember.multiprocessing import shared_storage  # noqa: PLC0415  (multiprocessing imports tensors)

        return self._device.type == "cpu" and shared_storage.is_shared(self._owner)

    def is_pinned(self, device: Any = "cuda") -> bool:
        return False

    # ---- its bytes ------------------------------------------------------------------------------
    def tolist(self) -> list[int]:
        return [int(b) for b in self._device.backend.to_numpy(self._bytes)]

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            piece = UntypedStorage.__new__(UntypedStorage)
            piece._bytes, piece._device, piece._owner = self._bytes[index], self._device, self._owner
            return piece
        return int(self._bytes[self._index(index)])

    def __setitem__(self, index: Any, value: Any) -> None:
        if isinstance(index, slice):
            self._bytes[index] = value
        else:
            self._bytes[self._index(index)] = value

    def _index(self, index: int) -> int:
        n = self.nbytes()
        if not -n <= index < n:
            raise IndexError(f"UntypedStorage: index {index} out of range for a storage of {n} bytes.")
        return index % n if n else index

    def fill_(self, value: int) -> "UntypedStorage":
        self._bytes[...] = value
        return self

    def copy_(self, source: "UntypedStorage | TypedStorage", non_blocking: bool = False) -> "UntypedStorage":
        src = source.untyped() if isinstance(source, TypedStorage) else source
        if src.nbytes() != self.nbytes():
            raise RuntimeError(f"UntypedStorage.copy_: sizes differ ({src.nbytes()} bytes into {self.nbytes()}).")
        self._bytes[...] = self._device.backend.from_numpy(src._device.backend.to_numpy(src._bytes)) \
            if src._device != self._device else src._bytes
        return self

    def clone(self) -> "UntypedStorage":
        return UntypedStorage(self.tolist(), device=self._device)

    def cpu(self) -> "UntypedStorage":
        return self if self._device.type == "cpu" else UntypedStorage(self.tolist())

    def to(self, *, device: Any = None, non_blocking: bool = False) -> "UntypedStorage":
        dev = to_device(device)
        return self if dev == self._device else UntypedStorage(self.tolist(), device=dev)

    def cuda(self, device: Any = None, non_blocking: bool = False) -> "UntypedStorage":
        """A copy on the GPU (``map_location=lambda storage, loc: storage.cuda(0)``, torch's idiom)."""
        return self.to(device="cuda" if device is None else device if isinstance(device, str) else f"cuda:{device}")

    def untyped(self) -> "UntypedStorage":
        return self

    def resize_(self, size: int) -> "UntypedStorage":
        raise RuntimeError("UntypedStorage.resize_: ember's storages cannot change size under their tensors "
                           "(resize the tensor with Tensor.resize_, or make a new storage).")

    def __repr__(self) -> str:
        values = "\n".join(f" {b}" for b in self.tolist())
        head = f"[ember.storage.UntypedStorage(device={self._device}) of size {self.nbytes()}]"
        return f"{values}\n{head}" if values else head


class TypedStorage:
    """A storage read as elements of one dtype (PyTorch's legacy view; deprecated there in favour of
    ``UntypedStorage``, with the same warning). ``torch.FloatStorage(n)``, ``torch.FloatStorage([1, 2])``."""

    _dtype_name: str | None = None

    def __init__(self, *args: Any, dtype: Any = None, device: Any = None, wrap_storage: Any = None) -> None:
        dt = dtypes.to_dtype(dtype if dtype is not None else (self._dtype_name or dtypes.get_default_dtype()))
        self.dtype = dt
        if wrap_storage is not None:
            self._untyped_storage = wrap_storage
            return
        dev = to_device(device)
        arg = args[0] if args else 0
        if isinstance(arg, (int, np.integer)) and not isinstance(arg, bool):
            host = np.zeros(int(arg), dt.np)
        else:
            host = np.asarray(list(arg) if isinstance(arg, Iterable) else arg, dtype=dt.np).reshape(-1)
        array = dev.backend.from_numpy(host) if dev.type != "cpu" else host
        self._untyped_storage = UntypedStorage._of(array, dev)

    @property
    def device(self) -> Any:
        return self._untyped_storage.device

    @property
    def is_cuda(self) -> bool:
        return self._untyped_storage.is_cuda

    def untyped(self) -> UntypedStorage:
        return self._untyped_storage

    def _elements(self) -> Any:
        return self._untyped_storage._bytes.view(self.dtype.np)

    def size(self) -> int:
        return self._untyped_storage.nbytes() // self.element_size()

    def __len__(self) -> int:
        return self.size()

    def element_size(self) -> int:
        return int(np.dtype(self.dtype.np).itemsize)

    def nbytes(self) -> int:
        return self._untyped_storage.nbytes()

    def data_ptr(self) -> int:
        return self._untyped_storage.data_ptr()

    @property
    def _cdata(self) -> int:
        return self._untyped_storage._cdata

    def type(self, dtype: Any = None) -> str:
        name = {v: k for k, v in _STORAGE_NAMES.items()}.get(self.dtype.name)
        return f"ember.{name}" if name else "ember.storage.TypedStorage"

    def tolist(self) -> list:
        return self._untyped_storage._device.backend.to_numpy(self._elements()).tolist()

    def __getitem__(self, index: Any) -> Any:
        n = self.size()
        if isinstance(index, slice):
            raise RuntimeError("TypedStorage: slicing is not supported (take a tensor view instead).")
        if not -n <= index < n:
            raise IndexError(f"TypedStorage: index {index} out of range for a storage of {n} elements.")
        return self._elements()[index].item()

    def __setitem__(self, index: Any, value: Any) -> None:
        self._elements()[index] = value

    def fill_(self, value: Any) -> "TypedStorage":
        self._elements()[...] = value
        return self

    def is_shared(self) -> bool:
        return self._untyped_storage.is_shared()

    def cpu(self) -> "TypedStorage":
        return TypedStorage(wrap_storage=self._untyped_storage.cpu(), dtype=self.dtype)

    def clone(self) -> "TypedStorage":
        return TypedStorage(wrap_storage=self._untyped_storage.clone(), dtype=self.dtype)

    def __repr__(self) -> str:
        values = "\n".join(f" {v}" for v in self.tolist())
        head = f"[ember.storage.TypedStorage(dtype={self.dtype}, device={self.device}) of size {self.size()}]"
        return f"{values}\n{head}" if values else head


_STORAGE_NAMES = {"FloatStorage": "float32", "DoubleStorage": "float64", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                  "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}


def _legacy_class(name: str, dtype_name: str) -> type:
    return type(name, (TypedStorage,), {"_dtype_name": dtype_name, "__module__": "ember",
                                        "__doc__": f"``torch.{name}``: a TypedStorage of {dtype_name}."})


LEGACY_STORAGES = {name: _legacy_class(name, dtype_name) for name, dtype_name in _STORAGE_NAMES.items()}

_warned_typed = False


def _warn_typed_storage() -> None:
    global _warned_typed
    if not _warned_typed:
        _warned_typed = True
        warnings.warn("TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the "
                      "only storage class. To access UntypedStorage directly, use tensor.untyped_storage() instead "
                      "of tensor.storage()", UserWarning, stacklevel=3)


def untyped_storage(tensor: Any) -> UntypedStorage:
    """``Tensor.untyped_storage()``: the bytes under ``tensor`` and every view of its root."""
    if getattr(tensor, "is_sparse", False):
        raise RuntimeError("untyped_storage: sparse tensors have no single storage (take .values()'s storage).")
    root = tensor
    while getattr(root, "_base", None) is not None:
        root = root._base
    return UntypedStorage._of(root._data, tensor.device)


def typed_storage(tensor: Any) -> TypedStorage:
    """``Tensor.storage()``: ``untyped_storage()`` read as ``tensor``'s dtype (warns once, as PyTorch)."""
    _warn_typed_storage()
    return TypedStorage(wrap_storage=untyped_storage(tensor), dtype=tensor.dtype)


def is_set_to(tensor: Any, other: Any) -> bool:
    """``Tensor.is_set_to``: the same storage, offset, sizes and strides."""
    return (untyped_storage(tensor).data_ptr() == untyped_storage(other).data_ptr()
            and tensor.data_ptr() == other.data_ptr() and tuple(tensor.shape) == tuple(other.shape)
            and tensor.stride() == other.stride())

