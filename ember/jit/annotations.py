"""``torch.jit.annotations``: the type names TorchScript signatures import (``BroadcastingList2``, ...).

In eager Python they are annotations only. ``BroadcastingListN[T]`` is PyTorch's "a T or a list of N
T's" (``roi_align``'s ``output_size: BroadcastingList2[int]``); subscripting it gives ``List[T]``, as
PyTorch's does outside TorchScript.

Example:
    >>> from ember.jit.annotations import BroadcastingList2
    >>> BroadcastingList2[int]
    typing.List[int]
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union  # noqa: F401  (re-exported as PyTorch does)

__all__ = ["BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "Dict", "List", "Optional", "Tuple",
           "Union"]


class _BroadcastingListCls:
    def __getitem__(self, types: Any) -> Any:
        return List[types]


BroadcastingList1 = BroadcastingList2 = BroadcastingList3 = _BroadcastingListCls()
