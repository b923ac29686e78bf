"""Datasets: the map-style ``Dataset`` and its helpers, as in ``torch.utils.data``.

A map-style dataset may also define ``get_batch(indices)``: given a NumPy int64 array of indices it
returns the already-collated batch in one vectorized step. The ``DataLoader`` uses it (when no custom
``collate_fn`` is given) so a batch costs one fancy-index instead of ``batch_size`` Python calls.

Example:
    >>> import ember
    >>> from ember.data import TensorDataset, random_split
    >>> ds = TensorDataset(ember.arange(10), ember.arange(10) * 2)
    >>> ds[3]
    (tensor(3), tensor(6))
    >>> [len(s) for s in random_split(ds, [0.8, 0.2], generator=ember.Generator().manual_seed(0))]
    [8, 2]
"""
from __future__ import annotations

import bisect
import math
from typing import Any, Generic, Iterable, Iterator, Sequence, TypeVar

import numpy as np
from ember import random as _random
from ember.creation import _wrap_array, as_tensor, randperm
from ember.tensor import Tensor

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from indices to samples: subclasses define ``__getitem__`` and usually ``__len__``."""

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co]):
    """A stream of samples: subclasses define ``__iter__``. ``DataLoader`` batches it in order."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: Dataset) -> "ChainDataset":
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Iterable datasets one after another."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)

    def __iter__(self) -> Iterator[Any]:
        for dataset in self.datasets:
            yield from dataset

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)  # type: ignore[arg-type]


def _as_tensor(value: Any) -> Any:
    """Tensors stay; NumPy arrays become tensors sharing memory (so indexing gives tensors)."""
    if isinstance(value, Tensor):
        return value

    return as_tensor(np.asarray(value))


class TensorDataset(Dataset):
    """Samples are the i-th rows of each tensor: ``TensorDataset(x, y)[i] == (x[i], y[i])``.

    NumPy arrays are accepted and wrapped (no copy). ``get_batch`` slices all tensors at once.
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset: give at least one tensor")
        self.tensors = tuple(_as_tensor(t) for t in tensors)
        sizes = [t.shape[0] if t.ndim else None for t in self.tensors]
        if any(s is None for s in sizes) or len(set(sizes)) != 1:
            shapes = [tuple(t.shape) for t in self.tensors]
            raise ValueError(f"TensorDataset: all tensors need the same size in dim 0, got shapes {shapes}")

    def __getitem__(self, index: int) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def get_batch(self, indices: np.ndarray) -> list:
        """All tensors indexed by ``indices`` at once (a contiguous run becomes a cheap slice); a list, as
        ``default_collate`` makes of tuple samples."""
        n = len(indices)
        if n and indices[-1] - indices[0] == n - 1 and (n < 3 or bool(np.all(np.diff(indices) == 1))):
            key: Any = slice(int(indices[0]), int(indices[0]) + n)
        else:
            key = indices
        out = []
        for t in self.tensors:
            if t.device.type == "cpu":
                out.append(_wrap_array(t.detach()._data[key], t.device))
            else:
                out.append(t.detach()[key if isinstance(key, slice) else _as_tensor(key)])
        return out


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]  # type: ignore[index]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)

    def __getattr__(self, name: str) -> Any:
        # get_batch exists only when the wrapped dataset has one; __getattr__ runs for missing names.
        if name == "get_batch" and hasattr(self.__dict__.get("dataset"), "get_batch"):
            mapped = np.asarray(self.indices, dtype=np.int64)
            return lambda indices: self.dataset.get_batch(mapped[np.asarray(indices, dtype=np.int64)])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


class ConcatDataset(Dataset):
    """Several map-style datasets end to end."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset: datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset; use ChainDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))  # type: ignore[arg-type]

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        offset = idx if which == 0 else idx - int(self.cumulative_sizes[which - 1])
        return self.datasets[which][offset]


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: Any = _random.default_generator) -> list[Subset]:
    """Split into non-overlapping random subsets of the given lengths (or fractions summing to 1).

    Fractions are floored and the remainder handed out one by one from the first split, as torch does.
    """
    n = len(dataset)  # type: ignore[arg-type]
    lengths = list(lengths)
    if math.isclose(sum(lengths), 1.0) and sum(lengths) <= 1 and any(isinstance(x, float) for x in lengths):
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1: {frac}")
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths {sum(lengths)} does not equal the length of the "
                         f"input dataset ({n})")

    perm = randperm(n, generator=generator).tolist()
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[start:start + int(length)]))
        start += int(length)
    return out


from ember.data.stack_dataset import StackDataset  # noqa: E402,F401  (torch.utils.data.dataset.StackDataset)
