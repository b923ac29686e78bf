"""DLPack: tensors exchanged with NumPy, CuPy, JAX and PyTorch without copying (``torch.from_dlpack``,
``torch.utils.dlpack``, ``Tensor.__dlpack__``).

A tensor from ``from_dlpack`` shares memory with the producer's array (a write through one shows in the
other); ``np.from_dlpack(tensor)`` and ``torch.from_dlpack(ember_tensor)`` read ember's memory the same way.
As in PyTorch, a tensor that requires grad is not exported (``BufferError``: ``detach()`` it first).

Example:
    >>> import numpy as np, ember
    >>> a = np.arange(3.0)
    >>> t = ember.from_dlpack(a)
    >>> t[0] = 7.0
    >>> a[0]
    np.float64(7.0)
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.creation import _wrap_array
from ember.device import to_device
from ember.tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]

_KDLCPU, _KDLCUDA, _KDLCUDA_HOST = 1, 2, 3


class _Capsule:
    """A legacy DLPack capsule (``to_dlpack``'s result) made to look like a producer: capsules say nothing of
    their device, so they are read as host memory, the only kind a capsule is handed across here."""

    def __init__(self, capsule: Any) -> None:
        self._capsule = capsule

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        return self._capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDLCPU, 0)


def from_dlpack(ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Tensor:
    """A tensor sharing memory with ``ext_tensor`` (any object with ``__dlpack__``, or a DLPack capsule);
    ``device=`` moves it there, ``copy=True`` gives it memory of its own (PyTorch's keywords)."""
    result = _from_dlpack(ext_tensor)
    if device is not None:
        result = result.to(device)
    return result.clone() if copy else result


def _from_dlpack(ext_tensor: Any) -> Tensor:
    if isinstance(ext_tensor, Tensor):  # ember's own: the same memory without a round trip
        tensor_dlpack_device(ext_tensor)
        if ext_tensor.requires_grad:
            raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
        return ext_tensor.detach()
    producer = ext_tensor if hasattr(ext_tensor, "__dlpack__") else _Capsule(ext_tensor)
    kind, index = producer.__dlpack_device__() if hasattr(producer, "__dlpack_device__") else (_KDLCPU, 0)
    kind = int(kind)
    if kind in (_KDLCPU, _KDLCUDA_HOST):
        try:
            array = np.from_dlpack(producer)
        except (TypeError, BufferError, RuntimeError) as exc:
            raise RuntimeError(f"from_dlpack: could not read a {type(ext_tensor).__name__} through DLPack "
                               f"({exc}).") from exc
        dtypes.from_numpy_dtype(array.dtype)  # refuses dtypes ember has no counterpart for, by name
        return _wrap_array(array, to_device("cpu"))
    if kind == _KDLCUDA:
        dev = to_device(f"cuda:{int(index)}")
        array = dev.backend.xp.from_dlpack(producer)
        return _wrap_array(array, dev)
    raise RuntimeError(f"from_dlpack: {type(ext_tensor).__name__} lives on DLPack device type {kind}, which "
                       "ember cannot read (it reads CPU and CUDA memory).")


def to_dlpack(tensor: Tensor) -> Any:
    """A DLPack capsule of ``tensor``'s memory (the legacy protocol; prefer passing the tensor itself)."""
    return tensor.__dlpack__()


def tensor_dlpack(self: Tensor, stream: Any = None, **kwargs: Any) -> Any:
    """``Tensor.__dlpack__``: this tensor's memory as a DLPack capsule for another library."""
    if self.requires_grad:
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")
    if getattr(self, "is_sparse", False):
        raise RuntimeError("__dlpack__: sparse tensors cannot be exported through DLPack (call to_dense()).")
    data = self._data
    if stream is None and not kwargs:
        return data.__dlpack__()
    return data.__dlpack__(stream=stream, **kwargs)


def tensor_dlpack_device(self: Tensor) -> tuple[int, int]:
    """``Tensor.__dlpack_device__``: (DLPack device type, index) of this tensor's memory."""
    if self.device.type == "cuda":
        return (_KDLCUDA, self.device.index or 0)
    return (_KDLCPU, 0)
