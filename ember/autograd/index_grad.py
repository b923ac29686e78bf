"""The gradient of a basic-indexing view, kept as (index, values) until the engine needs the full array.

``x[i]``'s gradient is ``g`` placed into zeros of ``x``'s shape. When several views of one tensor are taken
(``q, k, v = qkv``, ``qkv.split(d, -1)``, ``chunk``, ``unbind``, ``narrow``: the attention input of every GPT
block), the engine used to add those full arrays: three zero fills, three copies and two full additions for a
tensor that three slice copies fill. The getitem array rule returns an :class:`IndexGrad`, and the engine
gathers the views' gradients into one buffer (``accumulate``):

- **No zero fill for what the views cover.** The buffer starts empty; a view whose region (an int or a unit-step
  slice along one axis, the other axes whole) does not meet the regions written so far is *copied* into its
  place. Only the parts no view wrote are zeroed, when the full array is needed (``materialize``): when all of
  ``q, k, v`` (or every piece of a split) arrive, nothing is zeroed. Regions that overlap, lie along different
  axes or are not such simple slices make the buffer dense (its gaps zeroed) and are added as before.
- **The buffer in the layout its consumer wants.** When the indexed tensor is a ``permute`` of another (the
  ``view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)`` of the q/k/v unpack), the buffer is allocated so that the
  permute's gradient (the inverse transpose) is C-contiguous: the ``view``'s gradient after it is then a
  reshape without a copy, and the linear layer's products read it in place.

Values: each element is the sum of the views' gradients that cover it, in arrival order, as before; an element
one view covers is that view's value exactly (a -0.0 stays -0.0, as torch's stack/slice backward keeps it; the
old zeros-plus-values sum made it +0.0); an element no view covers is +0.0.

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

from ember.backends.cpu_threads import parallel_for

# Copies and zero fills of this many elements or more run in blocks of the leading axis on ember's threads (NumPy's
# copy is one core; each block is an independent copy, so the bits do not depend on the split).
_SPLIT = 1 << 20


class IndexGrad:
    """``zeros(shape)`` with ``values`` at the basic index ``index`` (sparse), or an owned ``buffer`` (the engine's
    sum of several, which later ones add into in place). ``written`` is None when the whole buffer holds values,
    else ``(axis, [(start, stop), ...])``: the regions along ``axis`` written so far (the rest is uninitialized).
    ``dims`` (optional) is the permutation of the op that made the indexed tensor: the buffer is allocated so that
    its inverse transpose is C-contiguous."""

    __slots__ = ("values", "index", "shape", "dtype", "buffer", "written", "dims")
    lazy_grad = True  # array_input_grads passes it on as it is (not through np.asarray)

    def __init__(self, values: Any, index: tuple, shape: tuple, buffer: Any = None, dims: tuple | None = None) -> None:
        self.values, self.index, self.shape, self.buffer = values, index, tuple(shape), buffer
        self.dtype = values.dtype if buffer is None else buffer.dtype
        self.written = None
        self.dims = dims

    def materialize(self) -> np.ndarray:
        """The full gradient (an array only this call's caller holds)."""
        if self.buffer is not None:
            if self.written is not None:
                _zero_gaps(self.buffer, self.written)
                self.written = None
            return self.buffer
        region = _region(self.index, self.shape)
        if region is not None:  # its place written once, the rest zeroed (no zero fill under the values)
            out = _empty(self.shape, self.dtype, self.dims)
            _copy_into(out, self.index, self.values)
            _zero_gaps(out, (region[0], [region[1:]]))
            return out
        out = _empty(self.shape, self.dtype, self.dims)
        out[...] = 0
        _assign(out, self.index, self.values)
        return out

    def add_into(self, buffer: np.ndarray) -> None:
        """``buffer += self`` in place (the index is basic, so no element is selected twice)."""
        if self.buffer is not None:
            np.add(buffer, self.materialize(), out=buffer)
            return
        view = buffer[self.index]
        values = self.values.reshape(view.shape)
        if view.__class__ is np.ndarray and view.base is not None and _shares(view, buffer):
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
    gradients go into, or None when the operands do not allow it (mixed dtypes or shapes, tensors): then the
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
    elif a_lazy and b_lazy:  # two views' gradients: one buffer, each copied into its place if they do not meet
        buffer = _empty(current.shape, current.dtype, current.dims if current.dims is not None else g.dims)
        owned = IndexGrad(buffer, (), buffer.shape, buffer=buffer)
        region = _region(current.index, current.shape)
        if region is None:
            buffer[...] = 0
            current.add_into(buffer)
        else:
            _copy_into(buffer, current.index, current.values)
            owned.written = (region[0], [region[1:]])
        other = g
    else:  # an array plus a slice: the array's values (plus 0, as the old full sum did) first
        other = g
        if not a_lazy:
            buffer = current + current.dtype.type(0)
        else:
            buffer = g + g.dtype.type(0)
            other = current
        owned = IndexGrad(buffer, (), buffer.shape, buffer=buffer)
    _put(owned, other)
    return owned


def _put(owned: IndexGrad, other: Any) -> None:
    """Add ``other`` into ``owned``'s buffer: a copy into a region nothing was written to yet, else a sum."""
    buffer, written = owned.buffer, owned.written
    if written is not None:
        region = _region(other.index, other.shape) if other.__class__ is IndexGrad and other.buffer is None else None
        if region is not None and region[0] == written[0] and not _meets(region[1:], written[1]):
            _copy_into(buffer, other.index, other.values)
            written[1].append(region[1:])
            return
        _zero_gaps(buffer, written)  # overlapping or other shapes of views: dense from here on
        owned.written = None
    if other.__class__ is IndexGrad:
        other.add_into(buffer)
    else:
        np.add(buffer, other, out=buffer)


def _region(index: Any, shape: tuple) -> tuple | None:
    """``(axis, start, stop)`` when ``x[index]`` is an int or a unit-step slice along one axis with every other
    axis whole (``x[1]``, ``x[:, :, 0:384]``, ``narrow``, ``split``, ``unbind``), else None."""
    if index.__class__ is not tuple:
        index = (index,)
    if len(index) > len(shape):
        return None
    found = None
    for axis, item in enumerate(index):
        size = shape[axis]
        if item.__class__ is slice:
            start, stop, step = item.indices(size)
            if start == 0 and stop == size and step == 1:
                continue  # the whole axis
            if step != 1 or found is not None:
                return None
            found = (axis, start, max(stop, start))
        elif item.__class__ is int or isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if found is not None or not -size <= item < size:
                return None
            item = int(item) % size
            found = (axis, item, item + 1)
        else:  # Ellipsis, None, arrays: not a region this tracks
            return None
    return found if found is not None else (0, 0, shape[0]) if shape else None


def _meets(span: tuple, spans: list) -> bool:
    start, stop = span
    return any(start < b and a < stop for a, b in spans)


def _zero_gaps(buffer: np.ndarray, written: tuple) -> None:
    """Zero what lies along ``axis`` outside the written ``(start, stop)`` regions."""
    axis, spans = written
    lead = (slice(None),) * axis
    at = 0
    for start, stop in sorted(spans) + [(buffer.shape[axis], buffer.shape[axis])]:
        if start > at:
            gap = buffer[lead + (slice(at, start),)]
            _split(lambda a, b, gap=gap: gap[a:b].fill(0), gap)
        at = max(at, stop)


def _empty(shape: tuple, dtype: Any, dims: tuple | None) -> np.ndarray:
    """An uninitialized array of ``shape``; with ``dims``, laid out so that its inverse transpose is C-ordered."""
    if dims is None or len(dims) != len(shape):
        return np.empty(shape, dtype)
    base_shape = [0] * len(shape)
    for i, d in enumerate(dims):
        base_shape[d] = shape[i]
    return np.empty(base_shape, dtype).transpose(dims)


def _assign(out: np.ndarray, index: Any, values: Any) -> None:
    try:
        out[index] = values
    except (ValueError, TypeError):  # PyTorch's leniency: a value's extra leading size-1 dims
        while values.ndim and values.shape[0] == 1:
            values = values[0]
        out[index] = values


def _copy_into(out: np.ndarray, index: Any, values: Any) -> None:
    """``out[index] = values`` (a view's place, written once)."""
    view = out[index]
    if view.__class__ is np.ndarray and view.shape == values.shape and view.ndim:
        _split(lambda a, b: np.copyto(view[a:b], values[a:b]), view)
    else:
        _assign(out, index, values)


def _split(fn: Any, target: np.ndarray) -> None:
    """``fn(0, len(target))`` (``target`` at least 1-d), or over blocks of ``target``'s leading axis on ember's threads when it is large."""
    if target.size < _SPLIT or target.shape[0] < 2:
        fn(0, target.shape[0])
        return
    parallel_for(fn, target.shape[0], max(1, (_SPLIT // 4) // max(1, target.size // target.shape[0])))


def _shares(view: np.ndarray, buffer: np.ndarray) -> bool:
    """Whether ``view`` writes into ``buffer`` (basic indexing gives views, a 0-d selection does not)."""
    return view.base is buffer or view.base is buffer.base and buffer.base is not None
