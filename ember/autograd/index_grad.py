"""The gradient of a basic-indexing view, kept as (index, values) until the engine needs the full array.

``x[i]``'s gradient is ``g`` placed into zeros of ``x``'s shape. When several views of one tensor are taken
(``q, k, v = qkv`` or ``qkv.split(d, -1)``, the attention input of every GPT block), the engine used to
add those full arrays: three zero fills, three copies and two full additions for a tensor that three
slice copies fill. The getitem array rule now returns an :class:`IndexGrad`, and the engine adds into one
buffer: the first sum of two makes zeros once and adds each slice into it, later ones add their slice in
place (``accumulate``). A gradient that meets no other is materialized exactly as before (zeros, then
the slice assigned). Element values equal the old sums (IEEE addition with a zero is exact and
commutative); the one difference is the sign of a zero where two slices overlap and both give ``-0.0``.

Example:
    >>> import numpy as np
    >>> a = IndexGrad(np.ones(2, np.float32), (0,), (3, 2))
    >>> b = IndexGrad(np.full(2, 2, np.float32), (2,), (3, 2))
    >>> accumulate(a, b).materialize().tolist()
    [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
"""
from __future__ import annotations

from typing import Any

import numpy as np


class IndexGrad:
    """``zeros(shape)`` with ``values`` at the basic index ``index`` (sparse), or an owned full ``buffer``
    (dense: the engine's sum of several, which later ones add into in place)."""

    __slots__ = ("values", "index", "shape", "dtype", "buffer")
    lazy_grad = True  # array_input_grads passes it on as it is (not through np.asarray)

    def __init__(self, values: Any, index: tuple, shape: tuple, buffer: Any = None) -> None:
        self.values, self.index, self.shape, self.buffer = values, index, tuple(shape), buffer
        self.dtype = values.dtype if buffer is None else buffer.dtype

    def materialize(self) -> np.ndarray:
        """The full gradient (an array only this call's caller holds)."""
        if self.buffer is not None:
            return self.buffer
        out = np.zeros(self.shape, dtype=self.dtype)
        try:
            out[self.index] = self.values
        except (ValueError, TypeError):  # PyTorch's leniency: a value's extra leading size-1 dims
            value = self.values
            while value.ndim and value.shape[0] == 1:
                value = value[0]
            out[self.index] = value
        return out

    def add_into(self, buffer: np.ndarray) -> None:
        """``buffer += self`` in place (the index is basic, so no element is selected twice)."""
        if self.buffer is not None:
            np.add(buffer, self.buffer, out=buffer)
            return
        view = buffer[self.index]
        values = self.values.reshape(view.shape)
        if view.__class__ is np.ndarray and view.base is buffer:
            np.add(view, values, out=view)
        else:  # (a selection NumPy copies: write the sum back)
            buffer[self.index] = view + values

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.materialize()
        return out if dtype is None else out.astype(dtype, copy=False)


def materialize(g: Any) -> Any:
    """``g`` as an array when it is an :class:`IndexGrad`, else ``g``."""
    return g.materialize() if g.__class__ is IndexGrad else g


def accumulate(current: Any, g: Any) -> Any:
    """``current + g`` where one or both are :class:`IndexGrad`: an IndexGrad holding an owned buffer that later
    gradients add into, or None when the operands do not allow it (mixed dtypes or shapes, tensors): then the
    caller adds the materialized values as before."""
    a_lazy, b_lazy = current.__class__ is IndexGrad, g.__class__ is IndexGrad
    if (not a_lazy and current.__class__ is not np.ndarray) or (not b_lazy and g.__class__ is not np.ndarray):
        return None
    if current.dtype != g.dtype or tuple(current.shape) != tuple(g.shape):
        return None
    if a_lazy and current.buffer is not None:
        owned, other = current, g
    elif b_lazy and g.buffer is not None:
        owned, other = g, current  # IEEE addition commutes bit for bit
    else:
        owned = None
        other = g
        if not a_lazy:  # an array plus a slice: the array's values (plus 0, as the old full sum did) first
            buffer = current + current.dtype.type(0)
        elif not b_lazy:
            buffer = g + g.dtype.type(0)
            other = current
        else:
            buffer = np.zeros(current.shape, dtype=current.dtype)
            current.add_into(buffer)
        owned = IndexGrad(buffer, (), buffer.shape, buffer=buffer)
    if other.__class__ is IndexGrad:
        other.add_into(owned.buffer)
    else:
        np.add(owned.buffer, other, out=owned.buffer)
    return owned
