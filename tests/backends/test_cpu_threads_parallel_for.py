"""ember.backends.cpu_threads: chunks cover the range exactly once, errors reach the caller, nested
calls run inline, and EMBER_CPU_THREADS=1 (``_config.CPU_THREADS``) means no extra thread."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_threads


@pytest.mark.parametrize("total, min_chunk", [(0, 1), (1, 1), (7, 1), (1000, 10), (1000, 600)])
def test_chunks_cover_the_range_once(monkeypatch, total, min_chunk) -> None:
    monkeypatch.setattr(_config, "CPU_THREADS", 4)
    hits = np.zeros(total, dtype=np.int64)
    chunks = []
    cpu_threads.parallel_for(lambda a, b: (hits.__setitem__(slice(a, b), hits[a:b] + 1), chunks.append((a, b))),
                             total, min_chunk)
    assert (hits == 1).all()
    assert len(chunks) == max(1, min(4, total // min_chunk))


def test_an_error_in_a_worker_reaches_the_caller(monkeypatch) -> None:
    monkeypatch.setattr(_config, "CPU_THREADS", 2)

    def fail_late(start: int, stop: int) -> None:
        if start > 0:
            raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        cpu_threads.parallel_for(fail_late, 100, 1)


def test_nested_calls_run_inline_and_one_thread_means_no_pool(monkeypatch) -> None:
    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    seen = []

    def outer(start: int, stop: int) -> None:
        cpu_threads.parallel_for(lambda a, b: seen.append((threading.current_thread().name, a, b)), 10, 1)

    cpu_threads.parallel_for(outer, 2, 1)
    assert sorted((a, b) for _, a, b in seen) == [(0, 10), (0, 10)]  # each inner call whole, inline
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    names = []
    cpu_threads.parallel_for(lambda a, b: names.append(threading.current_thread().name), 1000, 1)
    assert names == [threading.current_thread().name]


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork only")
def test_a_forked_child_gets_a_working_pool(monkeypatch) -> None:
    """A DataLoader worker forked after the pool started must not wait on the parent's threads."""
    import multiprocessing

    monkeypatch.setattr(_config, "CPU_THREADS", 2)
    cpu_threads.parallel_for(lambda a, b: None, 10, 1)  # the parent's pool exists
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply_async(_sum_in_child).get(timeout=60) == 4950


def _sum_in_child() -> int:
    out = np.zeros(100)
    cpu_threads.parallel_for(lambda a, b: out.__setitem__(slice(a, b), np.arange(a, b)), 100, 1)
    return int(out.sum())


def test_set_num_threads_one_runs_every_chunk_on_the_calling_thread(monkeypatch) -> None:
    """``ember.set_num_threads(1)`` is torch's one-thread setting: no pool thread (and, with it, no split GEMM);
    raising it again after the pool exists grows the pool."""
    import ember
    from ember.surface import constants

    monkeypatch.setattr(_config, "CPU_THREADS", _config.CPU_THREADS)
    monkeypatch.setitem(constants._SETTINGS, "num_threads", constants._SETTINGS["num_threads"])
    seen, before = [], ember.get_num_threads()
    ember.set_num_threads(1)
    cpu_threads.parallel_for(lambda a, b: seen.append(threading.get_ident()), 1 << 20, 1)
    assert seen == [threading.get_ident()]
    ember.set_num_threads(3)
    seen.clear()
    cpu_threads.parallel_for(lambda a, b: seen.append((a, b)), 300, 1)
    assert sorted(seen) == [(0, 100), (100, 200), (200, 300)]
    assert cpu_threads._pool(2)._max_workers >= 2
    ember.set_num_threads(before)  # (BLAS's count too, where threadpoolctl set it)
