"""Arrays in shared memory that other processes can map: what ``Tensor.share_memory_()`` moves data into.

A shared storage is an anonymous memory file (``memfd_create`` on Linux; elsewhere a POSIX
shared-memory object whose name is removed at once) mapped with ``MAP_SHARED``. It has no name, so
nothing can be left behind in /dev/shm however processes end; the memory is freed when the last
process closes its mapping. Another process gets it by *file descriptor*: forked children inherit the
mapping, and a pickle made by ``multiprocessing`` carries a duplicate of the descriptor
(``multiprocessing.reduction.DupFd``), PyTorch's ``file_descriptor`` sharing strategy.

Example:
    >>> import numpy as np
    >>> from ember.multiprocessing.shared_storage import is_shared, to_shared
    >>> a = to_shared(np.arange(4.0))
    >>> is_shared(a), a.tolist()
    (True, [0.0, 1.0, 2.0, 3.0])
"""
from __future__ import annotations

import ctypes
import mmap
import os
import weakref
from typing import Any

import numpy as np


class SharedMapping(mmap.mmap):
    """A ``MAP_SHARED`` mapping of an anonymous memory file; keeps the file's descriptor for sharing."""

    fd: int
    address: int

    def __new__(cls, fd: int, size: int) -> "SharedMapping":
        mapping = super().__new__(cls, fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        mapping.fd = fd
        mapping.address = ctypes.addressof(ctypes.c_char.from_buffer(mapping)) if size else 0
        weakref.finalize(mapping, os.close, fd)  # the descriptor lives exactly as long as the mapping
        return mapping


_BY_FILE: "weakref.WeakValueDictionary[tuple, SharedMapping]" = weakref.WeakValueDictionary()


def _memory_file(size: int) -> int:
    """A new anonymous memory file of ``size`` bytes; returns its descriptor."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ember-shared", os.MFD_CLOEXEC)
    else:  # macOS and other POSIX systems: a shared-memory object, unnamed at once
        from multiprocessing import shared_memory

        block = shared_memory.SharedMemory(create=True, size=max(size, 1))
        fd = os.dup(block._fd)
        block.close()
        block.unlink()
    os.ftruncate(fd, max(size, 1))
    return fd


def new_mapping(size: int) -> SharedMapping:
    fd = _memory_file(size)
    mapping = SharedMapping(fd, max(size, 1))
    _BY_FILE[_file_key(fd)] = mapping
    return mapping


def map_descriptor(fd: int, size: int) -> SharedMapping:
    """Map a descriptor received from another process (one mapping per memory file in this process)."""
    key = _file_key(fd)
    mapping = _BY_FILE.get(key)
    if mapping is not None:
        os.close(fd)  # the same memory file is already mapped here: views share it, as torch's storages do
        return mapping
    mapping = SharedMapping(fd, size)
    _BY_FILE[key] = mapping
    return mapping


def _file_key(fd: int) -> tuple:
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino


def mapping_of(array: np.ndarray) -> Any:
    """The ``mmap`` an array's memory comes from, or None (walks ``.base`` and memoryviews)."""
    base: Any = array
    while True:
        if isinstance(base, mmap.mmap):
            return base
        if isinstance(base, memoryview):
            base = base.obj
        elif isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        else:
            return None


def is_shared(array: np.ndarray) -> bool:
    """True when ``array`` lives in memory other processes can map (a shared storage or a DataLoader batch)."""
    return mapping_of(array) is not None


def to_shared(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` in a new shared storage (same shape and dtype, C-contiguous)."""
    mapping = new_mapping(array.nbytes)
    out = np.ndarray(array.shape, array.dtype, buffer=mapping)
    out[...] = array
    return out


def describe(array: np.ndarray) -> tuple[SharedMapping, int, tuple, tuple]:
    """(mapping, byte offset, shape, strides) of an array in a shared storage, to rebuild it elsewhere."""
    mapping = mapping_of(array)
    if not isinstance(mapping, SharedMapping):
        raise ValueError("describe: the array is not in an ember shared storage; call to_shared first")
    offset = array.__array_interface__["data"][0] - mapping.address if array.size else 0
    return mapping, offset, array.shape, array.strides


def rebuild(mapping: SharedMapping, offset: int, shape: tuple, strides: tuple, dtype: np.dtype) -> np.ndarray:
    return np.ndarray(shape, dtype, buffer=mapping, offset=offset, strides=strides)
