"""``x ** y`` as CPython computes it for floats (the C library's ``pow``), for the scalar math of optimizers.

Torch's optimizers compute their step-dependent factors in Python floats (``1 - beta2 ** step``,
``bias_correction2 ** 0.5``). NumPy's float64 ``power`` is its own implementation and differs from the C
library's ``pow`` in the last bit for ~5% of Adam's bias corrections (and ``sqrt`` from ``pow(x, 0.5)``
in a few), which is enough to move an Adam trajectory off torch's. Inside a compiled optimizer update those
factors are 0-d tensors, so this op evaluates each element with Python's float power: meant for 0-d
and tiny tensors (one Python call per element), never for data.

Example:
    >>> import ember
    >>> float(host_pow(ember.tensor(0.9, dtype=ember.float64), 12.0)) == 0.9 ** 12.0
    True
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember.ops import dispatch
from ember.ops.elementwise import elementwise_rule
from ember.ops.registry import OpDef, register

def _c_pow(a: float, b: float) -> float:
    """The C library's ``pow``: ``math.pow`` calls it, but raises where C returns an IEEE special value
    (``0 ** -1`` is inf, ``(-8) ** 0.5`` is NaN, overflow is inf); those come from NumPy, which follows C there."""
    try:
        return math.pow(a, b)
    except (ValueError, OverflowError, ZeroDivisionError):
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(a), np.float64(b)))


_POW = np.frompyfunc(_c_pow, 2, 1)


def _host(value: Any) -> np.ndarray:
    """A device array copied to the host explicitly (``.get()``, as CuPy), numbers and NumPy arrays as they are."""
    if not isinstance(value, np.ndarray) and hasattr(value, "get"):
        value = value.get()
    return np.asarray(value, dtype=np.float64)


def _impl(xp: Any, x: Any, y: Any) -> Any:
    out = _POW(_host(x), _host(y))
    return xp.asarray(np.asarray(out, dtype=np.float64))


HOST_POW = register(OpDef(
    name="host_pow", category="binary", impl=_impl, vjp=None, shape_rule=elementwise_rule(), onnx="Pow",
    doc="float64 x ** y with the C library's pow, element by element (optimizers' scalar factors)",
))


def host_pow(x: Any, y: Any) -> Any:
    """``x ** y`` in float64 with the C library's ``pow``: a number for two numbers, else a float64 tensor."""
    if not isinstance(x, dispatch.Tensor) and not isinstance(y, dispatch.Tensor):
        return _c_pow(float(x), float(y))
    return dispatch.apply(HOST_POW, (x, y))
