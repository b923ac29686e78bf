"""``StackDataset``: several datasets of one length read together, item by item, as a tuple or a dict.

Example:
    >>> from ember.data import StackDataset
    >>> ds = StackDataset(image=[1, 2], label=["a", "b"])
    >>> ds[1], len(ds)
    ({'image': 2, 'label': 'b'}, 2)
"""
from __future__ import annotations

from typing import Any

from ember.data.dataset import Dataset


class StackDataset(Dataset):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like input/"
                             "output, but both types are given.")
        datasets = list(args) or list(kwargs.values())
        if not datasets:
            raise ValueError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(len(d) != self._length for d in datasets):
            raise ValueError("Size mismatch between datasets")
        self.datasets: Any = tuple(args) if args else dict(kwargs)

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        return [self[i] for i in indices]

    def __len__(self) -> int:
        return self._length
