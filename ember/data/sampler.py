"""Samplers: which indices a ``DataLoader`` visits, and in what order.

Random samplers draw from the ``generator`` they are given; without one, each pass draws a fresh
seed from ember's default generator (as torch does), so ``ember.manual_seed`` fixes the order and a
checkpoint of the default generator's state fixes the order after a resume.

Example:
    >>> import ember
    >>> from ember.data import BatchSampler, SequentialSampler
    >>> list(BatchSampler(SequentialSampler(range(5)), batch_size=2, drop_last=False))
    [[0, 1], [2, 3], [4]]
"""
from __future__ import annotations

from typing import Any, Generic, Iterable, Iterator, Sequence, Sized, TypeVar

import numpy as np
from ember import random as ember_random


def _numpy_rng(generator: Any) -> np.random.Generator:
    """A NumPy RNG for one pass: the given generator's, or one seeded from the default generator."""
    if generator is not None:
        return generator.numpy_rng
    seed = int(ember_random.default_generator.numpy_rng.integers(0, 2**63 - 1))
    return np.random.Generator(np.random.PCG64(seed))


T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):  # Generic as PyTorch's: code writes Sampler[List[int]] in class bases and hints
    """Base class: an iterable of indices (or of index lists, for batch samplers)."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator[Any]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A random permutation (or ``num_samples`` draws with replacement, drawn in chunks as iterated)."""

    _CHUNK = 32  # indices drawn per call with replacement (PyTorch draws 32 at a time)

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Any = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples should be a positive integer, got {self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        # Lazily, a chunk at a time (as PyTorch does): num_samples may be far larger than memory allows.
        n = len(self.data_source)
        rng = _numpy_rng(self.generator)
        if self.replacement:
            for start in range(0, self.num_samples, self._CHUNK):
                yield from rng.integers(0, n, min(self._CHUNK, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        order = _numpy_rng(self.generator).permutation(len(self.indices))
        return (self.indices[i] for i in order.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Any = None) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        if self.weights.ndim != 1 or (self.weights < 0).any():
            raise ValueError("WeightedRandomSampler: weights must be a 1-D sequence of non-negative numbers")
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        p = self.weights / self.weights.sum()
        rng = _numpy_rng(self.generator)
        return iter(rng.choice(len(p), self.num_samples, replace=self.replacement, p=p).tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Groups another sampler's indices into lists of ``batch_size``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size should be a positive integer, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
