"""Cheap NumPy views for the array gradient rules (``OpDef.array_vjp``), which run once per node per backward.

``np.broadcast_to`` goes through NumPy's Python wrapper and an ``nditer`` (~1.5-4 us for a tiny array); the
view it returns is a strided ``ndarray`` over the same memory, which the constructor builds directly (~0.3 us).

Example:
    >>> import numpy as np
    >>> from ember.ops.array_views import broadcast_view
    >>> v = broadcast_view(np.float32(2.0) * np.ones((), np.float32), (2, 3))
    >>> v.shape, v.strides, v.flags.writeable
    ((2, 3), (0, 0), False)
"""
from __future__ import annotations

from typing import Any

import numpy as np

_NDARRAY = np.ndarray


def broadcast_view(g: Any, shape: tuple) -> Any:
    """``np.broadcast_to(g, shape)``: the same read-only view (shape, strides, dtype, values), built directly for
    a C-contiguous NumPy array whose shape broadcasts to ``shape``; anything else goes to ``np.broadcast_to``
    (its checks and its error messages)."""
    nd = g.ndim
    lead = len(shape) - nd
    if g.__class__ is not _NDARRAY or lead < 0 or not g.flags.c_contiguous:
        return np.broadcast_to(g, shape)
    if nd == 0:
        strides: Any = (0,) * lead
        for t in shape:
            if t < 0:
                return np.broadcast_to(g, shape)
    else:
        strides = [0] * lead
        for t in shape[:lead]:
            if t < 0:
                return np.broadcast_to(g, shape)
        for s, t, st in zip(g.shape, shape[lead:], g.strides):
            if s == 1 and t >= 0:  # (NumPy gives every extent-1 input axis stride 0, kept or broadcast)
                strides.append(0)
            elif s == t:
                strides.append(st)
            else:  # does not broadcast: NumPy's error
                return np.broadcast_to(g, shape)
        strides = tuple(strides)
    out = _NDARRAY(shape, g.dtype, g, 0, strides)
    out.flags.writeable = False  # as np.broadcast_to's view: a write would reach every broadcast position
    return out
