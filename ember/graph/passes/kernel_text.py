"""What may appear in generated kernel source: names ember chose and numbers, nothing else.

Fused kernels are generated as text (the Numba loop, the source handed to a backend's ``fuse``
hook). Operands reach the generator from op attributes, which may come from a loaded file; a string
there must never become code. So a string operand must be a name the fuser made (``in3``, ``t12``),
and every other value is rendered by :func:`literal` only when it is a number, bool, None, a NumPy
dtype, or a tuple/list/dict of those: anything else is refused with an error naming the value.

Example:
    >>> literal((None, 2, 0.5))
    '(None, 2, 0.5)'
    >>> name("t3")
    't3'
"""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

_NAME = re.compile(r"^(in|t|x)\d{1,9}$")
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class UnsafeKernelValue(ValueError):
    """A value that cannot be written into generated source (a string that is not a kernel name...)."""


def name(value: Any) -> str:
    """``value`` if it is a kernel-made name (``inK``, ``tK``, ``xK``), else UnsafeKernelValue."""
    if isinstance(value, str) and _NAME.match(value):
        return value
    raise UnsafeKernelValue(f"fused kernel: operand {value!r:.80} is not a name the fuser made; a string operand "
                            "(e.g. from a loaded graph's attributes) is never written into kernel source")


def is_number(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def literal(value: Any) -> str:
    """Source text for a plain value: numbers, bool, None, NumPy dtypes, and containers of those."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(None if value is None else bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return repr(f) if math.isfinite(f) else f"float({str(f)!r})"
    if isinstance(value, np.dtype):
        return f"np.{name_of_dtype(value)}"
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict) and all(isinstance(k, str) and _KEY.match(k) for k in value):
        return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in value.items()) + "}"
    raise UnsafeKernelValue(f"fused kernel: value {value!r:.80} of type {type(value).__name__} cannot be written "
                            "into kernel source (only numbers, bools, None, dtypes and containers of those)")


def name_of_dtype(dtype: Any) -> str:
    text = np.dtype(dtype).name
    if not _KEY.match(text):
        raise UnsafeKernelValue(f"fused kernel: dtype name {text!r} is not an identifier")
    return text


def operand(value: Any) -> str:
    """An operand in source: a kernel name if a string, else a literal."""
    return name(value) if isinstance(value, str) else literal(value)
