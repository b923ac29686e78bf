"""Batches from DataLoader worker processes to the main process through shared memory.

A worker pickles its batch with :class:`BatchPickler`: every NumPy array (ember tensors included) of
at least ``INLINE_BYTES`` is copied once into a new POSIX shared-memory block, and the pickle carries
only the block's name, shape and dtype, so big arrays never go through the pipe. The main process
unpickles with :func:`loads`: it maps each block, removes its name at once (so nothing can leak once a
batch has arrived, whatever happens next) and wraps the mapping in an array without copying; the
memory is freed when the last array using it is garbage-collected.

Blocks made by a worker but never read (a worker killed mid-send) are registered with
multiprocessing's resource tracker, which removes them when the main process ends.

Example:
    >>> import numpy as np
    >>> from ember.data.shared_batch import dumps, loads
    >>> batch = {"x": np.arange(100_000.0), "label": 3}
    >>> back = loads(dumps(batch))
    >>> bool((back["x"] == batch["x"]).all()), back["label"]
    (True, 3)
"""
from __future__ import annotations

import io
import itertools
import os
import pickle
import secrets
from multiprocessing import shared_memory
from typing import Any

import numpy as np
from ember.device import device
from ember.tensor import Tensor

INLINE_BYTES = 16 * 1024  # smaller arrays ride in the pickle: a shared block costs ~20 us to make and map
BLOCK_PREFIX = "ember_batch_"  # names under /dev/shm, so tests can check that none are left behind
_COUNTER = itertools.count()


def _new_name() -> str:
    # the main process's pid first: a test can tell its own workers' blocks from other programs'
    return f"{BLOCK_PREFIX}{os.getppid()}_{os.getpid()}_{next(_COUNTER)}_{secrets.token_hex(3)}"


def _to_block(array: np.ndarray) -> tuple:
    """Copy ``array`` into a new shared block; returns what the main process needs to map it."""
    block = shared_memory.SharedMemory(name=_new_name(), create=True, size=array.nbytes)
    try:
        view = np.ndarray(array.shape, array.dtype, buffer=block.buf)
        view[...] = array
        del view  # the block's mapping in this process can close now; the name keeps the memory
    finally:
        block.close()
    return block.name, array.shape, array.dtype


def _from_block(name: str, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Map block ``name`` as an array, and remove the name (the mapping lives on with the array)."""
    block = shared_memory.SharedMemory(name=name)
    try:
        mapping = getattr(block, "_mmap", None)
        if mapping is None:  # a Python whose SharedMemory hides its mapping: fall back to one copy
            return np.ndarray(shape, dtype, buffer=block.buf).copy()
        # Hand the mapping over to the array: the block object must not close it when it is collected.
        block._buf.release()
        block._buf = None
        block._mmap = None
        return np.frombuffer(mapping, dtype=dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape)
    finally:
        block.close()
        block.unlink()


def _rebuild_tensor(array: np.ndarray, requires_grad: bool) -> Any:

    return Tensor._make(array, device("cpu"), requires_grad)


class BatchPickler(pickle.Pickler):
    """Pickles a batch with its big arrays in shared memory (see the module docstring)."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is np.ndarray and obj.dtype != object and obj.nbytes >= INLINE_BYTES:
            return _from_block, _to_block(obj)
        if type(obj) is Tensor and obj.device.type == "cpu" and obj.grad_fn is None:
            # a batch tensor: its values (in a shared block when big) and requires_grad; no autograd history
            return _rebuild_tensor, (np.ascontiguousarray(obj._data), obj.requires_grad)
        return NotImplemented


def dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    BatchPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """Unpickle what a worker of this process sent (never data from anywhere else)."""
    return pickle.loads(data)  # noqa: S301 - bytes from this process's own worker processes


def release(data: bytes) -> None:
    """Free the blocks of a batch that will never be used (loads it; the blocks go with the arrays)."""
    try:
        loads(data)
    except Exception:  # a worker's half-written batch: the resource tracker removes its blocks at exit
        pass
