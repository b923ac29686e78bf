"""A small persistent thread pool for memory-bound CPU work that releases the GIL.

NumPy's ufuncs and copies, and ember's numba kernels (``nogil=True``), run without the GIL, but
each call uses one core; PyTorch spreads the same work over all cores. ``parallel_for`` splits a
range into one chunk per thread and runs them at once, the calling thread doing the first chunk.
Idle workers sleep on a lock (no spinning, which on a shared or loaded machine is what makes
OpenMP-style pools slow: measured 4x slower for the Winograd transforms with numba's OpenMP layer).

Threads: ``EMBER_CPU_THREADS`` (default: the CPUs this process may run on). Work below
``min_chunk`` items per thread runs inline, where a thread hand-off (~20-50 us) would cost more.

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_threads import parallel_for
    >>> out = np.zeros(10)
    >>> parallel_for(lambda start, stop: out.__setitem__(slice(start, stop), 1.0), 10, min_chunk=1)
    >>> float(out.sum())
    10.0
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np

from ember import _config

_POOL: ThreadPoolExecutor | None = None
_LOCK = threading.Lock()
_LOCAL = threading.local()


def _cpus_available() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


# Read once: parallel_for is on hot paths (compiled optimizer loops) and the system call costs up to
# ~0.1 ms on some VMs.
_CPUS = _cpus_available()


def num_threads() -> int:
    """Threads ``parallel_for`` uses (the calling thread included): ``EMBER_CPU_THREADS`` (also
    ``ember._config.CPU_THREADS``) when set, else the CPUs this process may run on."""
    return _config.CPU_THREADS if _config.CPU_THREADS > 0 else _CPUS


def _pool(workers: int) -> ThreadPoolExecutor:
    """The pool, with at least ``workers`` threads (``set_num_threads`` may raise the count after the first call:
    a pool too small would run the chunks one after another; the old one's idle threads exit)."""
    global _POOL
    if _POOL is None or _POOL._max_workers < workers:
        with _LOCK:
            if _POOL is None or _POOL._max_workers < workers:
                old, _POOL = _POOL, ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ember-cpu")
                if old is not None:
                    old.shutdown(wait=False)
    return _POOL


def _forget_pool() -> None:
    """After fork the child has the pool object but none of its threads: start a new one there."""
    global _POOL, _LOCK, _CPUS
    _POOL, _LOCK, _CPUS = None, threading.Lock(), _cpus_available()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _run(fn: Callable[[int, int], object], start: int, stop: int) -> None:
    _LOCAL.inside = True  # a chunk that calls parallel_for again runs it inline (no deadlock)
    try:
        fn(start, stop)
    finally:
        _LOCAL.inside = False


def parallel_for(fn: Callable[[int, int], object], total: int, min_chunk: int = 1) -> None:
    """Call ``fn(start, stop)`` on contiguous chunks covering ``range(total)``, one per thread,
    concurrently; returns when all are done and re-raises the first error. ``fn`` must be safe to
    run on disjoint chunks at once (write disjoint outputs)."""
    threads = min(num_threads(), total // max(1, min_chunk))
    if threads <= 1 or getattr(_LOCAL, "inside", False):
        fn(0, total)
        return
    bounds = [total * k // threads for k in range(threads + 1)]
    pool = _pool(num_threads() - 1)
    futures = [pool.submit(_run, fn, bounds[k], bounds[k + 1]) for k in range(1, threads)]
    try:
        _run(fn, bounds[0], bounds[1])
    finally:
        for future in futures:
            future.result()


def split_channels(xp: Any, fn: Callable[[int, int], object], channels: int, per_channel: int,
                   min_elements: int = 1 << 16) -> None:
    """``parallel_for`` over blocks of ``channels`` for the CPU backend (``xp`` NumPy), each thread
    getting at least ``min_elements`` elements (``per_channel`` each); other backends run
    ``fn(0, channels)`` as is (their arrays live on a device with its own parallelism)."""
    if xp is not np:
        fn(0, channels)
        return
    parallel_for(fn, channels, max(1, -(-min_elements // max(1, per_channel))))
