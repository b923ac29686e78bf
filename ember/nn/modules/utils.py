"""``torch.nn.modules.utils``: the argument helpers modules use (``_pair(3) == (3, 3)``).

Example:
    >>> from ember.nn.modules.utils import _pair, _triple
    >>> _pair(3), _triple((1, 2, 3))
    ((3, 3), (1, 2, 3))
"""
from __future__ import annotations

import collections.abc
from itertools import repeat
from typing import Any, Callable


def _ntuple(n: int, name: str = "parse") -> Callable:
    def parse(x: Any) -> tuple:
        if isinstance(x, collections.abc.Iterable) and not isinstance(x, str):
            return tuple(x)
        return tuple(repeat(x, n))

    parse.__name__ = name
    return parse


_single = _ntuple(1, "_single")
_pair = _ntuple(2, "_pair")
_triple = _ntuple(3, "_triple")
_quadruple = _ntuple(4, "_quadruple")


def _reverse_repeat_tuple(t: tuple, n: int) -> tuple:
    return tuple(x for x in reversed(t) for _ in range(n))


def _list_with_default(out_size: Any, defaults: list) -> list:
    if isinstance(out_size, int):
        return [out_size]
    if len(defaults) <= len(out_size):
        raise ValueError(f"Input dimension should be at least {len(out_size) + 1}")
    return [v if v is not None else d for v, d in zip(out_size, defaults[-len(out_size):])]
