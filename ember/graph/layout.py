"""Memory layouts of traced values, so a graph keeps eager's view-or-copy decisions.

Eagerly, ``reshape``/``view``/``flatten`` are views when the strides allow it and copies otherwise, and
``contiguous()`` is the tensor itself when it already is C-contiguous. Whether a later in-place write reaches
the source depends on that choice, so the tracer (:class:`ember.graph.builder.Builder`) follows each value's
layout: an absent entry means a fresh C-contiguous array; otherwise a *witness* (a NumPy array with the value's
shape and byte strides over a one-element buffer: metadata only, never read) or :data:`UNKNOWN`.

View ops run their own ``impl`` on the witness (slicing, permute, expand, diagonal, unfold only touch
metadata); ``reshape`` asks NumPy whether it can be done without a copy (assigning ``.shape``, which refuses
where a copy is needed). Elementwise results of non-contiguous operands get NumPy's operand-order layout
(``K``), which is not modelled: they are :data:`UNKNOWN`, and a reshape/contiguous of them is *ambiguous*
(the builder refuses writes that would depend on it, so ``ember.compile`` runs that call eagerly).

Example:
    >>> w = witness((2, 3), (8, 16), 8)        # a transposed (3, 2) float64 array
    >>> reshape_layout(w, (6,))                 # eagerly a copy: (layout of the result, is it a view?)
    (None, False)
"""
from __future__ import annotations

from typing import Any

import numpy as np

UNKNOWN = "unknown"  # a layout that is not modelled (numpy's K order over non-contiguous operands)


def witness(shape: tuple, strides: tuple, itemsize: int) -> np.ndarray:
    """A metadata-only array of ``shape`` and byte ``strides`` (its one-element buffer is never read)."""
    buffer = np.zeros(1, dtype=np.dtype((np.void, itemsize)))
    return np.lib.stride_tricks.as_strided(buffer, tuple(shape), tuple(strides), writeable=False)


def of_array(array: Any) -> Any:
    """The layout entry of a concrete array: None when C-contiguous, else its witness."""
    if array.flags.c_contiguous:
        return None
    return witness(array.shape, array.strides, array.itemsize)


def _c_witness(shape: tuple, itemsize: int) -> np.ndarray:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return witness(shape, tuple(reversed(strides)), itemsize)


def _entry(result: np.ndarray) -> Any:
    return None if result.flags.c_contiguous else result


def reshape_layout(source: Any, shape: tuple, itemsize: int = 8) -> tuple:
    """(layout of ``reshape(source, shape)``, whether eager makes it a view; None: unknown)."""
    if source is None:
        return None, True
    if source is UNKNOWN:
        return UNKNOWN, None
    view = source.view()
    try:
        view.shape = tuple(shape)
    except (AttributeError, ValueError):
        return None, False  # eagerly a copy: a fresh C-contiguous array
    return _entry(view), True


_METADATA_VIEWS = frozenset({"permute", "expand", "getitem", "diagonal", "unfold"})


def view_layout(op: Any, source: Any, in_shape: tuple, itemsize: int, attrs: dict) -> Any:
    """The layout of view op ``op`` applied to a value of layout ``source``."""
    if source is UNKNOWN or op.name not in _METADATA_VIEWS:
        return UNKNOWN
    w = _c_witness(in_shape, itemsize) if source is None else source
    try:
        result = op.impl(np, w, **attrs)
    except Exception:  # noqa: BLE001 - an impl that needs real data: the layout is not modelled
        return UNKNOWN
    if not isinstance(result, np.ndarray) or result.base is None:
        return UNKNOWN
    return _entry(result)


def computed_layout(inputs: tuple, layouts: dict, out_shape: tuple) -> Any:
    """A non-view op's result: C-contiguous unless an operand of the result's shape is not (NumPy's K order)."""
    for v in inputs:
        if getattr(v, "id", None) in layouts and tuple(v.shape) == tuple(out_shape):
            return UNKNOWN
    return None
