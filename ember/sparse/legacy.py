"""PyTorch's legacy sparse tensor types: ``torch.sparse.FloatTensor(indices, values, size)`` and friends.

Old graph programs (pygcn's ``sparse_mx_to_torch_sparse_tensor``) build their adjacency matrices with them.
As in PyTorch 2.x: ``(indices, values[, size])`` makes a COO tensor whose dtype is the *values'* (the type's
dtype is not applied), ``(*sizes)`` an empty COO tensor of the type's dtype, and the first call warns that the
spelling is deprecated (once per process); ``isinstance`` checks the layout, dtype and device.

Example:
    >>> import warnings, ember
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     a = ember.sparse.FloatTensor(ember.tensor([[0, 1], [1, 0]]), ember.tensor([1., 2.]), ember.Size([2, 2]))
    >>> a.to_dense().tolist(), isinstance(a, ember.sparse.FloatTensor), a.type()
    ([[0.0, 1.0], [2.0, 0.0]], True, 'torch.sparse.FloatTensor')
"""
from __future__ import annotations

import warnings
from typing import Any

from ember import dtypes
from ember.creation import zeros
from ember.sparse.construct import sparse_coo_tensor
from ember.sparse.coo import SparseTensor
from ember.surface.constants import sparse_coo
from ember.tensor import Tensor

_NAMES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8")


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """Once per process, as PyTorch's TORCH_WARN_ONCE (a training loop would print it every step otherwise)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=3)


class _LegacySparseType(type):
    """The metaclass: calling builds a COO tensor; isinstance checks layout, dtype and device."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return (isinstance(obj, Tensor) and getattr(obj, "layout", None) is sparse_coo and obj.dtype is cls._dtype
                and obj.device.type == cls._device_type)

    def __call__(cls, *args: Any, device: Any = None) -> SparseTensor:
        device = cls._device_type if device is None else device
        if args and isinstance(args[0], Tensor):
            if len(args) not in (2, 3):
                raise TypeError(f"{cls.__qualname__}(): expected (indices, values) or (indices, values, size), "
                                f"got {len(args)} arguments")
            _warn_once("torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated.  Please use "
                       "torch.sparse_coo_tensor(indices, values, shape, dtype=, device=).")
            size = None if len(args) == 2 else tuple(int(s) for s in args[2])
            return sparse_coo_tensor(args[0], args[1], size, device=device)
        _warn_once("torch.sparse.SparseTensor(shape, *, device=) is deprecated.  Please use "
                   "torch.sparse_coo_tensor(shape, dtype=, device=).")
        shape = tuple(int(s) for s in (args[0] if len(args) == 1 and not isinstance(args[0], int) else args))
        shape = shape or (0,)
        indices = zeros((len(shape), 0), dtype=dtypes.int64, device=device)
        return sparse_coo_tensor(indices, zeros((0,), dtype=cls._dtype, device=device), shape, device=device)

    def __repr__(cls) -> str:
        return f"<class '{_type_name(cls._dtype, cls._device_type)}'>"


def _type_name(dtype: dtypes.dtype, device_type: str) -> str:
    cuda = "cuda." if device_type == "cuda" else ""
    return f"torch.{cuda}sparse.{dtypes.LEGACY_TYPE_NAMES[dtype.name]}"


def legacy_sparse_types(device_type: str = "cpu") -> dict[str, type]:
    """``{"FloatTensor": torch.sparse.FloatTensor, ...}`` for one device."""
    out = {}
    for name in _NAMES:
        dt = getattr(dtypes, name)
        type_name = dtypes.LEGACY_TYPE_NAMES[name]
        out[type_name] = _LegacySparseType(type_name, (), {"_dtype": dt, "_device_type": device_type, "dtype": dt,
                                                           "is_sparse": True, "__qualname__": f"sparse.{type_name}"})
    return out


def sparse_type_name(tensor: SparseTensor) -> str:
    """``x.type()`` of a COO tensor: ``'torch.sparse.FloatTensor'``."""
    return _type_name(tensor.dtype, tensor.device.type)
