"""Shared timing helpers: medians over repeats, side-by-side tables with ratios."""
from __future__ import annotations

import os
import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], repeats: int = 7, min_time: float = 0.2, warmup: int = 3) -> float:
    """Median seconds per call; each repeat runs enough calls to last ``min_time / repeats``."""
    for _ in range(warmup):
        fn()
    start = time.perf_counter()
    fn()
    single = max(time.perf_counter() - start, 1e-7)
    calls = max(1, int(min_time / repeats / single))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:9.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:9.3f} ms"
    return f"{seconds:9.3f} s "


def print_table(title: str, rows: dict[str, float], baseline: str) -> None:
    """One benchmark's results: each row's median and its ratio to ``baseline``."""
    base = rows.get(baseline)
    print(f"\n{title}")
    for name, value in rows.items():
        ratio = f"{value / base:6.2f}x {baseline}" if base else ""
        print(f"  {name:<28}{fmt(value)}   {ratio}")


def environment_line() -> str:
    import numpy as np

    return (f"numpy {np.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, "
            f"cores={os.cpu_count()}")


def interleaved_medians(fns: dict[str, Callable[[], object]], rounds: int = 7, min_time: float = 0.3,
                        warmup: int = 3, clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Median seconds per call of each function, timed in alternating rounds (A, B, A, B, ...), so
    slow drifts of a noisy machine hit every contender alike (``clock``: ``time.process_time`` for CPU time)."""
    calls = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, int(min_time / rounds / max(time.perf_counter() - start, 1e-7)))
    samples: dict[str, list] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            # Untimed pause: OpenBLAS and OpenMP worker threads spin for a while after their last
            # task; switching libraries at once would let one's spinning threads slow the other.
            time.sleep(0.2)
            fn()
            start = clock()
            for _ in range(calls[name]):
                fn()
            samples[name].append((clock() - start) / calls[name])
    return {name: statistics.median(values) for name, values in samples.items()}
