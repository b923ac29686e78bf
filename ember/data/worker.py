"""Per-thread loader state: ``get_worker_info`` and the per-batch random stream transforms draw from.

Why a per-batch stream: loader threads finish batches in any order, so if random transforms drew
from one shared generator the augmentations would depend on thread timing. Instead the loader gives
batch ``i`` of an epoch its own PCG64 stream seeded from (the epoch's base seed, ``i``); random
transforms called without a ``generator`` use it. The result is identical for any ``num_workers``.

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


def data_rng(generator: Any = None) -> np.random.Generator:
    """The NumPy RNG a data transform should draw from.

    An explicit ember ``Generator`` wins; inside a loader batch, that batch's own stream; otherwise
    ember's default generator.
    """
    if generator is not None:
        return generator.numpy_rng
    key = getattr(_LOCAL, "batch_seed", None)
    if key is not None:
        rng = _LOCAL.batch_rng
        if rng is None:  # made on first use: batches without random transforms pay nothing
            rng = _LOCAL.batch_rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(key))))
        return rng

    return ember_random.default_generator.numpy_rng
