"""PyTorch's legacy tensor types: ``torch.FloatTensor``, ``torch.cuda.LongTensor`` and friends.

Each is a constructor of one dtype (and device), ``isinstance(x, torch.LongTensor)`` tests the dtype (and
device), and ``Tensor.type(torch.cuda.FloatTensor)`` converts to it (``ember.dtypes.parse_legacy_type``).

Example:
    >>> import ember
    >>> ember.FloatTensor([1, 2]).dtype, isinstance(ember.ones(2).long(), ember.LongTensor)
    (ember.float32, True)
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.creation import empty, tensor
from ember.tensor import Size, Tensor


class _LegacyTensorType(type):
    """The metaclass: calling makes a tensor of the type's dtype on its device; isinstance checks both."""

    def __instancecheck__(cls, obj: Any) -> bool:
        return (isinstance(obj, Tensor) and obj.dtype is cls._dtype and obj.device.type == cls._device_type
                and not getattr(obj, "is_sparse", False))  # sparse tensors are torch.sparse.FloatTensor etc.

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        device = cls._device_type if device is None else device
        if len(args) == 1 and not isinstance(args[0], (int, Size)):  # (a torch.Size is a shape: `FloatTensor(x.size())`)
            data = args[0]
            if isinstance(data, Tensor):
                return data.to(device, cls._dtype)
            return tensor(data, dtype=cls._dtype, device=device)
        return empty(*(args or (0,)), dtype=cls._dtype, device=device)  # FloatTensor() has shape (0,), as PyTorch

    def __repr__(cls) -> str:
        return f"<class '{dtypes.legacy_type_name(cls._dtype, cls._device_type)}'>"


def legacy_type(dtype: dtypes.dtype, device_type: str = "cpu") -> type:
    """The legacy type of ``dtype`` on ``device_type`` (``legacy_type(ember.int64, "cuda")`` is torch.cuda.LongTensor)."""
    name = dtypes.LEGACY_TYPE_NAMES[dtype.name]
    full = dtypes.legacy_type_name(dtype, device_type)
    return _LegacyTensorType(name, (), {"_dtype": dtype, "_device_type": device_type, "dtype": dtype,
                                        "is_cuda": device_type == "cuda",
                                        "__doc__": f"``{full}``: tensors of {dtype} on {device_type}."})


_CLASSIC = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


def legacy_types(device_type: str) -> dict[str, type]:
    """Every classic legacy type of one device, by name: ``{"FloatTensor": ..., "LongTensor": ...}``."""
    return {dtypes.LEGACY_TYPE_NAMES[name]: legacy_type(getattr(dtypes, name if name != "bool" else "bool_"),
                                                        device_type) for name in _CLASSIC}
