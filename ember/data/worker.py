"""Per-thread loader state: ``get_worker_info`` and the per-batch random stream transforms draw from.

Why a per-batch stream: loader threads finish batches in any order, so if random transforms drew
from one shared generator the augmentations would depend on thread timing. Instead a loader with workers
gives batch ``i`` of an epoch its own generator seeded from (the epoch's base seed, ``i``); random
transforms called without a ``generator`` use it, so the result is identical for any ``num_workers > 0``.
Without workers (``num_workers=0``) transforms draw from the default generator, as in PyTorch, so a
seeded serial pipeline augments exactly as torchvision's does.

Example:
    >>> from ember.data import get_worker_info
    >>> get_worker_info() is None  # in the main thread
    True
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from ember import random as ember_random


@dataclass
class WorkerInfo:
    """What a loader thread knows about itself (``get_worker_info()`` inside ``worker_init_fn``/datasets)."""

    id: int
    num_workers: int
    seed: int
    dataset: Any


_LOCAL = threading.local()


def get_worker_info() -> WorkerInfo | None:
    """The current loader thread's ``WorkerInfo``, or ``None`` outside loader threads."""
    return getattr(_LOCAL, "info", None)


def _set_worker_info(info: WorkerInfo | None) -> None:
    _LOCAL.info = info


def _set_batch_seed(base_seed: int | None, batch_index: int) -> None:
    """Select the random stream for the batch this thread is about to build (``None``: no stream)."""
    _LOCAL.batch_seed = None if base_seed is None else (base_seed, batch_index)
    _LOCAL.batch_rng = None


def data_generator(generator: Any = None) -> ember_random.Generator:
    """The ember ``Generator`` a data transform should draw from: an explicit one wins; inside a loader
    worker's batch, that batch's own generator (made on first use); otherwise the default generator."""
    if generator is not None:
        return generator
    key = getattr(_LOCAL, "batch_seed", None)
    if key is None:
        return ember_random.default_generator
    batch = _LOCAL.batch_rng
    if batch is None:  # made on first use: batches without random transforms pay nothing
        seed = int(np.random.SeedSequence(list(key)).generate_state(1, np.uint64)[0])
        batch = _LOCAL.batch_rng = ember_random.Generator().manual_seed(seed)
    return batch


def data_rng(generator: Any = None) -> np.random.Generator:
    """The NumPy view of :func:`data_generator` (the same stream), for transforms without a torch counterpart."""
    return data_generator(generator).numpy_rng
