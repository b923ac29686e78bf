"""``torch.types``: the type aliases annotations use (``Number``, ``Device``, ``_size``...).

Example:
    >>> from ember.types import Number
    >>> isinstance(3, Number.__args__)
    True
"""
from __future__ import annotations

from typing import Sequence, Union

from ember.device import device as _device
from ember.dtypes import dtype as _dtype
from ember.tensor import Size, Tensor

Number = Union[int, float, bool]
Device = Union[_device, str, int, None]
_size = Union[Size, Sequence[int]]
_int = int
_float = float
_bool = bool
_dtype_t = _dtype
_TensorOrTensors = Union[Tensor, Sequence[Tensor]]
