"""DataLoader workers: epoch time with num_workers=0, worker threads and worker processes.

Three datasets, each item costing about ``--item-ms``:

* ``python``: pure-Python per-item work that holds the GIL (a tokenizer-like loop over a string).
  Threads cannot run it in parallel; processes can, so this is where processes pay off.
* ``sleep``: the item waits (file reads, JPEG decoding in C: work that releases the GIL). Threads and
  processes both overlap it.
* ``images``: no per-item work, 3x64x64 float32 items: what moving big batches between processes
  costs (they go through shared memory).

Besides wall time, the CPU time the training process itself spends per epoch is shown: work that
moves to worker processes leaves it, work done by threads does not. It is the figure that still
means something on a machine whose cores are busy with other programs.

Contenders run in alternating rounds (A, B, C, A, B, C, ...) and each figure is the median epoch, so
a noisy shared machine slows all alike. Workers are persistent, so start-up is timed once apart.
Every contender must yield the same batches as num_workers=0 (checked).

Run: ``.venv/bin/python benchmarks/bench_dataloader.py [--items 512 --item-ms 1 --workers 2 --rounds 5]``
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Any

import numpy as np

import ember
from ember.data import DataLoader, Dataset


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


class PythonHeavy(Dataset):
    """Each item runs a pure-Python loop (holds the GIL) calibrated to ~``item_ms``."""

    def __init__(self, n: int, loops: int) -> None:
        self.n, self.loops = n, loops
        self.text = "the quick brown fox jumps over the lazy dog " * 4

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        counts: dict = {}
        for _ in range(self.loops):
            for word in self.text.split():
                counts[word] = counts.get(word, 0) + (i % 7)
        return np.float32(sum(counts.values())), i


class Sleepy(Dataset):
    def __init__(self, n: int, seconds: float) -> None:
        self.n, self.seconds = n, seconds

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        time.sleep(self.seconds)
        return np.float32(i), i


class Images(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n
        self.image = np.random.default_rng(0).standard_normal((3, 64, 64)).astype(np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        return self.image + np.float32(i), i


def calibrate(item_ms: float) -> int:
    """Loops of PythonHeavy's inner work that take about ``item_ms``."""
    probe = PythonHeavy(1, 200)
    samples = []
    for _ in range(7):  # the fastest of several: a busy machine only ever makes a run slower
        start = time.perf_counter()
        probe[0]
        samples.append((time.perf_counter() - start) / 200)
    return max(1, int(item_ms / 1000 / min(samples)))


def _spin(loops: int) -> None:
    PythonHeavy(1, loops)[0]


def parallel_ceiling(workers: int, loops: int) -> float:
    """Speed-up of ``workers`` plain processes over one doing the same pure-Python work: the most any
    worker processes can reach on this machine right now (less than ``workers`` on a busy machine)."""
    import multiprocessing

    chunk = loops * 64
    start = time.perf_counter()
    for _ in range(workers):
        _spin(chunk)
    serial = time.perf_counter() - start
    start = time.perf_counter()
    processes = [multiprocessing.Process(target=_spin, args=(chunk,)) for _ in range(workers)]
    for p in processes:
        p.start()
    for p in processes:
        p.join()
    return serial / (time.perf_counter() - start)


def epoch(loader: DataLoader) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds of this process (all its threads), checksum of the batches in order)."""
    start, cpu = time.perf_counter(), time.process_time()
    checksum = 0.0
    for k, (x, y) in enumerate(loader):
        checksum += float(x.numpy().sum(dtype=np.float64)) * (k + 1) + float(y.numpy().sum())
    return time.perf_counter() - start, time.process_time() - cpu, checksum


def compare(name: str, dataset: Dataset, workers: int, batch_size: int, rounds: int) -> None:
    loaders: dict[str, Any] = {
        "num_workers=0": DataLoader(dataset, batch_size=batch_size),
        f"{workers} threads": DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                                         multiprocessing_context="thread"),
        f"{workers} processes": DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                                           persistent_workers=True),
    }
    start = time.perf_counter()
    first = epoch(loaders[f"{workers} processes"])  # also starts the persistent workers
    startup = time.perf_counter() - start
    times: dict[str, list] = {k: [] for k in loaders}
    cpu: dict[str, list] = {k: [] for k in loaders}
    sums: dict[str, float] = {}
    for _ in range(rounds):
        for key, loader in loaders.items():
            seconds, used, checksum = epoch(loader)
            times[key].append(seconds)
            cpu[key].append(used)
            sums[key] = checksum
    base = statistics.median(times["num_workers=0"])
    print(f"\n{name}: {len(dataset)} items, batch {batch_size} (first process epoch incl. start-up {startup:.2f}s)")
    for key, values in times.items():
        median = statistics.median(values)
        same = "same batches" if sums[key] == sums["num_workers=0"] == first[2] else "DIFFERENT batches"
        print(f"  {key:<16} {median:7.3f} s/epoch   speed-up x{base / median:5.2f}   "
              f"training-process CPU {statistics.median(cpu[key]):6.3f} s/epoch   ({same})")
    loaders[f"{workers} processes"]._pool.shutdown()  # the persistent workers must not linger into the next


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--item-ms", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    ember.manual_seed(0)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; start method "
          f"{__import__('multiprocessing').get_start_method()}; numpy {np.__version__}")
    loops = calibrate(args.item_ms)
    print(f"machine check: {args.workers} plain processes run pure-Python work "
          f"x{parallel_ceiling(args.workers, loops):.2f} faster than one (the ceiling for worker processes now)")
    compare(f"python (pure-Python work holding the GIL, ~{args.item_ms} ms/item)", PythonHeavy(args.items, loops),
            args.workers, args.batch_size, args.rounds)
    compare(f"sleep (work releasing the GIL, {args.item_ms} ms/item)", Sleepy(args.items, args.item_ms / 1000),
            args.workers, args.batch_size, args.rounds)
    compare("images (3x64x64 float32 items, no work: the cost of moving batches)", Images(args.items * 4),
            args.workers, args.batch_size * 2, args.rounds)


if __name__ == "__main__":
    main()
