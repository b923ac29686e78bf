"""Shared table of tensor layouts for the stride tests: each case builds a tensor with the library it is
given (``torch`` or ``ember``), so both libraries run the same calls (see test_strides_layout_vs_torch.py)."""
from __future__ import annotations

import itertools
from typing import Any, Callable


def _perms(rank: int) -> list:
    return [p for p in itertools.permutations(range(rank)) if p != tuple(range(rank))]


def sources() -> dict[str, Callable[[Any], Any]]:
    """name -> fn(L) returning a float32 tensor with some layout."""
    cases: dict[str, Callable[[Any], Any]] = {}
    for shape in [(2, 3), (3, 1, 4), (1, 5), (4, 1), (1, 1), (0, 3), (2, 0, 4), (2, 3, 4), (2, 3, 4, 5), (2, 1, 3, 3),
                  (2, 3, 1, 1), (1, 3, 4, 4), (2, 3, 2, 2, 2), ()]:
        cases[f"zeros{shape}"] = lambda L, s=shape: L.arange(float(_numel(s))).reshape(s)
    for shape in [(2, 3, 4), (2, 1, 3)]:
        for p in _perms(3):
            cases[f"permute{shape}{p}"] = lambda L, s=shape, p=p: L.arange(float(_numel(s))).reshape(s).permute(*p)
    for p in [(0, 2, 3, 1), (0, 3, 1, 2), (3, 2, 1, 0), (1, 0, 2, 3), (2, 3, 0, 1)]:
        cases[f"permute(2,3,4,5){p}"] = lambda L, p=p: L.arange(120.0).reshape(2, 3, 4, 5).permute(*p)
    cases["t"] = lambda L: L.arange(6.0).reshape(2, 3).t()
    cases["transpose(0,2)"] = lambda L: L.arange(24.0).reshape(2, 3, 4).transpose(0, 2)
    cases["slice rows ::2"] = lambda L: L.arange(24.0).reshape(6, 4)[::2]
    cases["slice cols 1::2"] = lambda L: L.arange(24.0).reshape(4, 6)[:, 1::2]
    cases["slice both"] = lambda L: L.arange(48.0).reshape(6, 8)[1::2, ::3]
    cases["slice 3d mid"] = lambda L: L.arange(60.0).reshape(3, 4, 5)[:, ::2, :]
    cases["slice then t"] = lambda L: L.arange(24.0).reshape(6, 4)[::2].t()
    cases["narrow"] = lambda L: L.arange(24.0).reshape(4, 6).narrow(1, 1, 3)
    cases["select"] = lambda L: L.arange(24.0).reshape(2, 3, 4)[:, 1]
    cases["expand"] = lambda L: L.arange(3.0).reshape(3, 1).expand(3, 4)
    cases["expand front"] = lambda L: L.arange(4.0).expand(3, 4)
    cases["expand 3d"] = lambda L: L.arange(6.0).reshape(2, 1, 3).expand(2, 5, 3)
    cases["unsqueeze"] = lambda L: L.arange(6.0).reshape(2, 3).unsqueeze(1)
    cases["unsqueeze t"] = lambda L: L.arange(6.0).reshape(2, 3).t().unsqueeze(0)
    cases["diagonal"] = lambda L: L.arange(16.0).reshape(4, 4).diagonal()
    cases["unfold"] = lambda L: L.arange(10.0).unfold(0, 3, 2)
    cases["channels_last"] = lambda L: L.arange(120.0).reshape(2, 3, 4, 5).contiguous(memory_format=L.channels_last)
    cases["channels_last C1"] = lambda L: L.arange(40.0).reshape(2, 1, 4, 5).contiguous(memory_format=L.channels_last)
    cases["channels_last HW1"] = lambda L: L.arange(6.0).reshape(2, 3, 1, 1).contiguous(memory_format=L.channels_last)
    cases["channels_last_3d"] = lambda L: L.arange(48.0).reshape(2, 3, 2, 2, 2).contiguous(
        memory_format=L.channels_last_3d)
    cases["channels_last sliced"] = lambda L: L.arange(240.0).reshape(2, 3, 8, 5).contiguous(
        memory_format=L.channels_last)[:, :, ::2]
    return cases


def _numel(shape: tuple) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
