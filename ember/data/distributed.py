"""``DistributedSampler``: each process of a data-parallel job reads its own share of a dataset.

Every rank draws the same permutation (seeded by ``seed + epoch``) and takes every
``num_replicas``-th index starting at its rank, so the shares are disjoint and together cover the
dataset. Without ``drop_last`` the permutation is padded by wrapping around so that all ranks get
the same number of samples (collectives need equal step counts), as in torch.

Example:
    >>> from ember.data import DistributedSampler
    >>> s0 = DistributedSampler(range(10), num_replicas=3, rank=0, shuffle=False)
    >>> s2 = DistributedSampler(range(10), num_replicas=3, rank=2, shuffle=False)
    >>> list(s0), list(s2)
    ([0, 3, 6, 9], [2, 5, 8, 1])
"""
from __future__ import annotations

import math
from typing import Iterator, Sized

import numpy as np

from ember.data.sampler import Sampler, T_co
from ember import distributed as dist
from ember.creation import randperm
from ember.random import Generator


class DistributedSampler(Sampler[T_co]):
    """Indices of this rank's share; call ``set_epoch(epoch)`` each epoch to reshuffle."""

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            if not dist.is_initialized():
                raise RuntimeError("DistributedSampler: pass num_replicas= and rank=, or call "
                                   "ember.distributed.init_process_group('gloo') (or 'mpi') first")
            num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
            rank = dist.get_rank() if rank is None else rank
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: invalid rank {rank} for num_replicas={num_replicas}; "
                             "rank must lie in [0, num_replicas)")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            # torch's shuffle exactly (a generator seeded seed + epoch, randperm), so a job gets torch's batches
            generator = Generator()
            generator.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=generator).numpy()
        else:
            indices = np.arange(n)
        if not self.drop_last:
            padding = self.total_size - n
            if padding > 0:
                indices = np.concatenate([indices, np.resize(indices, padding)])
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank: self.total_size: self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass use a new permutation (the same on every rank)."""
        self.epoch = epoch
