"""One vs two OpenBLAS threads per product size: where a second BLAS thread pays (the threshold of
``cpu_blas.SMALL_GEMM_MACS``, below which ember holds NumPy's OpenBLAS to one thread), and, from
``cpu_blas_gemm.SPLIT_MACS`` on, the product split over ember's threads with one BLAS thread each
(``cpu_blas_gemm.split_gemm``, what ``linear``/``matmul`` run there when ember splits BLAS work).

Each product runs as in a training step: the GEMM, then a short NumPy op on the calling thread, repeated; one and
two BLAS threads alternate round by round in one process. Prints medians of wall time and process CPU time (which
charges OpenBLAS's worker for spinning after each call) per call, their ratios two/one, and the best-round wall
ratio. Meaningful on an idle machine only: under load a two-thread GEMM waits at its barrier for a descheduled
worker, and both clocks say so (docs/cpu-performance.md, "serial15").

    python benchmarks/bench_blas_threads.py                 # the default sizes, 2.1M to 268M multiply-adds
    python benchmarks/bench_blas_threads.py --rounds 15
    python benchmarks/bench_blas_threads.py --split-from 4e6   # also time the split below SPLIT_MACS (W1's 6.4M)

``T`` after a shape: A is a transposed view (W1's weight gradient ``x^T @ g``: 1000 x 64 x 100, A read from x).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from ember.backends import cpu_blas, cpu_blas_gemm

SHAPES = [(520, 64, 64), (256, 512, 10), (64, 3136, 10), (520, 64, 128), (520, 64, 192), (64, 1000, 100),
          (1000, 64, 100, "T"),
          (520, 256, 64), (256, 256, 256), (520, 256, 256), (512, 512, 256), (512, 512, 512), (1024, 512, 512),
          (256, 784, 512), (2048, 256, 768), (4096, 384, 1152)]


def per_call(a: np.ndarray, b: np.ndarray, side: np.ndarray, reps: int, split: bool = False) -> tuple[float, float]:
    """Wall and process-CPU seconds per (GEMM + one small NumPy op); ``split``: the GEMM by ``split_gemm``."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(reps):
        if split:
            cpu_blas_gemm.split_gemm(a, b)
        else:
            np.matmul(a, b)
        np.add(side, 1.0)  # the step's next op, on the calling thread
    return (time.perf_counter() - wall) / reps, (time.process_time() - cpu) / reps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--split-from", type=float, default=None,
                        help="multiply-adds from which the split column is timed (default cpu_blas_gemm.SPLIT_MACS)")
    args = parser.parse_args()
    if args.split_from is not None:
        cpu_blas_gemm.SPLIT_MACS = int(args.split_from)
    controls = cpu_blas._controls()
    if controls is None:
        print("NumPy's BLAS thread count cannot be set here (not OpenBLAS): nothing to compare")
        return 0
    get, put = controls
    saved = get()
    rng = np.random.default_rng(0)
    side = rng.standard_normal(16384).astype(np.float32)
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; SMALL_GEMM_MACS = "
          f"{cpu_blas.SMALL_GEMM_MACS:.0f}; medians of {args.rounds} alternating rounds, us per call")
    split_ok = cpu_blas.owns_gemm_threads() and cpu_blas_gemm.num_threads() > 1
    print(f"{'M x K x N':>18} {'MACs':>7}  {'wall 1':>8} {'wall 2':>8} {'2/1':>5} {'best':>5}  {'CPU 1':>8} {'CPU 2':>8} "
          f"{'2/1':>5}  {'split wall':>10} {'/2':>5} {'split CPU':>9} {'/2':>5}")
    try:
        for m, k, n, *layout in SHAPES:
            a = rng.standard_normal((m, k)).astype(np.float32)
            if layout == ["T"]:
                a = np.ascontiguousarray(a.T).T
            b = rng.standard_normal((k, n)).astype(np.float32)
            reps = max(20, int(0.02 / max(m * k * n / 50e9, 5e-6)))  # ~20 ms a sample
            samples: dict[int, list] = {1: [], 2: [], 0: []}  # 0: split over ember's threads
            split = split_ok and m * k * n >= cpu_blas_gemm.SPLIT_MACS
            for _ in range(args.rounds):
                for threads in (1, 2, 0) if split else (1, 2):
                    put(threads or saved)
                    per_call(a, b, side, 3, threads == 0)
                    time.sleep(0.02)
                    samples[threads].append(per_call(a, b, side, reps, threads == 0))
            wall = {t: statistics.median(s[0] for s in samples[t]) * 1e6 for t in (1, 2)}
            cpu = {t: statistics.median(s[1] for s in samples[t]) * 1e6 for t in (1, 2)}
            best = min(s[0] for s in samples[2]) / min(s[0] for s in samples[1])
            tail = ""
            if split:
                sw = statistics.median(s[0] for s in samples[0]) * 1e6
                sc = statistics.median(s[1] for s in samples[0]) * 1e6
                tail = f"  {sw:10.1f} {sw / wall[2]:5.2f} {sc:9.1f} {sc / cpu[2]:5.2f}"
            print(f"{f'{m} x {k} x {n}{layout[0] if layout else str()}':>18} {m * k * n / 1e6:6.1f}M  {wall[1]:8.1f} {wall[2]:8.1f} {wall[2] / wall[1]:5.2f} "
                  f"{best:5.2f}  {cpu[1]:8.1f} {cpu[2]:8.1f} {cpu[2] / cpu[1]:5.2f}{tail}", flush=True)
    finally:
        put(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main())
