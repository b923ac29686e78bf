"""The CPU backend: NumPy arrays.

Example:
    >>> from ember.backends import get_backend
    >>> get_backend("cpu").xp.__name__
    'numpy'
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import Backend, register_backend


class CPUBackend(Backend):
    name = "cpu"
    xp = np

    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> np.ndarray:
        if hasattr(data, "__cuda_array_interface__") or type(data).__module__.startswith("cupy"):
            data = data.get()  # a CuPy array: copy device -> host
        return np.asarray(data, dtype=np_dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        return array


register_backend("cpu", CPUBackend())
