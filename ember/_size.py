"""``Size``: a tensor's shape, a tuple of ints that stays a ``Size`` through ``+``, ``*`` and slicing.

As ``torch.Size``: ``Size([2]) + (3,)``, ``(1,) + Size([2])``, ``Size([2]) * 2`` and ``s[1:]`` are Sizes
(libraries call ``.numel()`` on such sums, e.g. a batch shape built as ``broadcast_shapes(a, b) + (m, n)``);
an item that is not an integer (``Size([3.0])``, ``Size([2]) + ("a",)``) is torch's TypeError, and integer
0-d tensors or NumPy integers become ints (``Size([tensor(3)])`` is ``Size([3])``).

Example:
    >>> s = Size([2, 3]) + (4,)
    >>> s, s.numel()
    (ember.Size([2, 3, 4]), 24)
"""
from __future__ import annotations

import operator
from typing import Any, Iterable

from ember import dtypes

_new = tuple.__new__


def _checked(items: Iterable[Any]) -> tuple:
    """``items`` as a tuple of Python ints, or torch's TypeError naming the first bad item."""
    out = tuple(items)
    for i, s in enumerate(out):
        if type(s) is not int:
            break
    else:
        return out
    fixed = list(out[:i])
    for j in range(i, len(out)):
        s = out[j]
        if type(s) is int or getattr(type(s), "_symbolic_size", False):  # (a jagged size j1, a SymInt: as torch's)
            fixed.append(s)
            continue
        try:
            if getattr(s, "is_floating_point", lambda: False)():
                raise TypeError
            fixed.append(operator.index(s))
        except (TypeError, RuntimeError, ValueError):
            raise TypeError(f"{dtypes.PUBLIC_NAME[0]}.Size() takes an iterable of 'int' "
                            f"(item {j} is '{type(s).__name__}')") from None
    return tuple(fixed)


class Size(tuple):
    """A tensor's shape: a tuple of ints with ``numel()``, printed as ``ember.Size([2, 3])``."""

    __slots__ = ()
    __module__ = "ember"  # printed and pickled as ``ember.Size`` (torch's ``torch.Size``)

    def __new__(cls, items: Iterable[Any] = ()) -> "Size":
        # the shapes ember builds are NumPy's tuples of ints: one type test per item, no copy
        if type(items) is tuple:
            for s in items:
                if type(s) is not int:
                    return _new(cls, _checked(items))
            return _new(cls, items)
        return _new(cls, _checked(items))

    def numel(self) -> int:
        out = 1
        for s in self:
            out *= s
        return out

    def __repr__(self) -> str:
        return f"{dtypes.PUBLIC_NAME[0]}.Size({list(self)})"

    def __getitem__(self, item: Any) -> Any:
        out = tuple.__getitem__(self, item)
        return _new(Size, out) if isinstance(item, slice) else out

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            raise TypeError(f"can only concatenate tuple (not {type(other).__name__}) to "
                            f"{dtypes.PUBLIC_NAME[0]}.Size")
        return Size(tuple.__add__(self, other))

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n: Any) -> Any:
        out = tuple.__mul__(self, n)
        return out if out is NotImplemented else _new(Size, out)

    __rmul__ = __mul__
