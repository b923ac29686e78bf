"""Samplers: which indices a ``DataLoader`` visits, and in what order.

Random samplers draw from the ``generator`` they are given; without one, each pass draws a fresh
seed from ember's default generator (as torch does), so ``ember.manual_seed`` fixes the order and a
checkpoint of the default generator's state fixes the order after a resume. The draws are PyTorch's
(``randperm``/``randint``/``multinomial`` on its MT19937 stream): the same seed visits the same order as torch.

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


def _pass_generator(generator: Any) -> Any:
    """The generator for one pass: the given one, or (as PyTorch's RandomSampler) a fresh generator seeded by
    a draw from the default generator."""
    if generator is not None:
        return generator
    return ember_random.Generator().manual_seed(ember_random.draw_seed(None))


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
        generator = _pass_generator(self.generator)
        cpu = ember_random.to_device("cpu")
        if self.replacement:
            for start in range(0, self.num_samples, self._CHUNK):
                count = min(self._CHUNK, self.num_samples - start)
                yield from ember_random.sample_integers((count,), ember_random.dtypes.int64, cpu, generator, 0,
                                                        n).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from ember_random.sample_permutation(n, cpu, generator).tolist()
        yield from ember_random.sample_permutation(n, cpu, generator)[: self.num_samples % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given indices in a random order."""

    def __init__(self, indices: Sequence[int], generator: Any = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        order = ember_random.sample_permutation(len(self.indices), ember_random.to_device("cpu"), self.generator)
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
        return iter(ember_random.sample_multinomial(self.weights[None, :], self.num_samples, self.replacement,
                                                    ember_random.to_device("cpu"), self.generator)[0].tolist())

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
