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

``--workloads`` (threads19) times instead the exact products of W1, W2, W4 and the GPT step, forward and backward
(layouts NN/NT/TN as the steps make them), each way ember could run it on two threads: one BLAS thread, OpenBLAS's
own two threads, ``split_gemm`` by rows (M), columns (N) or the sum (K), and torch.mm at one and two threads (MKL),
all alternating round by round in one process; it prints the process CPU and the wall time per call and which
split ``cpu_blas_gemm.split_axis`` picks. The CPU column is what a loaded machine can still tell (a split's
overhead: CPU of the split / CPU of one thread); the wall column is the idle-machine target.

    python benchmarks/bench_blas_threads.py --workloads --rounds 7
    python benchmarks/bench_blas_threads.py --workloads --only GPT
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


# (M, K, N, layouts of A and B: N row-major, T a transposed view, what makes it), as the workloads' steps multiply
WORKLOAD_PRODUCTS = [
    (64, 1000, 100, "NN", "W1 fwd"), (1000, 64, 100, "TN", "W1 dW"), (64, 100, 1000, "NT", "W1 dX"),
    (256, 784, 512, "NT", "W2 fwd"), (512, 256, 784, "TN", "W2 dW"), (256, 512, 784, "NN", "W2 dX"),
    (2048, 256, 256, "NT", "W4 qkv/out"), (2048, 256, 1024, "NT", "W4 up"), (2048, 1024, 256, "NT", "W4 down"),
    (256, 2048, 256, "TN", "W4 dW"), (1024, 2048, 256, "TN", "W4 dW up"), (256, 2048, 1024, "TN", "W4 dW down"),
    (2048, 1024, 256, "NN", "W4 dX up"), (2048, 256, 1024, "NN", "W4 dX down"),
    (4096, 384, 1152, "NT", "GPT qkv"), (4096, 384, 384, "NT", "GPT proj"), (4096, 384, 1536, "NT", "GPT up"),
    (4096, 1536, 384, "NT", "GPT down"), (1152, 4096, 384, "TN", "GPT dW qkv"), (1536, 4096, 384, "TN", "GPT dW up"),
    (384, 4096, 1536, "TN", "GPT dW down"), (4096, 1152, 384, "NN", "GPT dX qkv"), (4096, 1536, 384, "NN", "GPT dX up"),
    (4096, 384, 1536, "NN", "GPT dX down"), (4096, 384, 65, "NT", "GPT head"), (65, 4096, 384, "TN", "GPT head dW"),
]


def _operand(rng: np.random.Generator, rows: int, cols: int, layout: str) -> np.ndarray:
    x = rng.standard_normal((cols, rows) if layout == "T" else (rows, cols)).astype(np.float32)
    return x.T if layout == "T" else x


def workloads(rounds: int, only: str | None) -> int:
    """Every way to run each workload product on two threads, alternating in one process (``--workloads``)."""
    try:
        import torch
    except ImportError:
        torch = None
    get, put = cpu_blas._controls()
    saved = get()
    rng = np.random.default_rng(0)
    names = ["1 BLAS", "OpenBLAS 2", "split M", "split N", "split K"] + (["torch 1", "torch 2"] if torch else [])
    print(f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; medians of {rounds} alternating rounds; "
          f"ms per call: process CPU | wall; pick: cpu_blas_gemm.split_axis (products of "
          f"{cpu_blas_gemm.SPLIT_MACS / 1e6:.1f}M+ multiply-adds split)")
    print(f"{'product':12} {'M x K x N':>15} {'pick':>4}  " + " ".join(f"{n:>10}" for n in names) + "  |  wall")
    for m, k, n, layout, name in WORKLOAD_PRODUCTS:
        if only and only not in name:
            continue
        a, b = _operand(rng, m, k, layout[0]), _operand(rng, k, n, layout[1])
        ta = tb = None
        if torch is not None:
            ta, tb = (torch.from_numpy(x.base).T if x.base is not None else torch.from_numpy(x) for x in (a, b))

        def one() -> None:
            with cpu_blas.single_threaded_blas():
                np.matmul(a, b)

        ways = {"1 BLAS": (one, None), "OpenBLAS 2": (lambda: np.matmul(a, b), "blas"),
                "split M": (lambda: _forced(a, b, 0), None), "split N": (lambda: _forced(a, b, 1), None),
                "split K": (lambda: _forced(a, b, 2), None)}
        if torch is not None:
            ways["torch 1"] = (lambda: torch.mm(ta, tb), 1)
            ways["torch 2"] = (lambda: torch.mm(ta, tb), 2)
        reps = max(3, int(0.02 / (m * k * n / 1e11)))
        samples: dict[str, list] = {w: [] for w in ways}
        try:
            for _ in range(rounds):
                for way, (fn, threads) in ways.items():
                    if threads == "blas":
                        put(2)
                    elif threads is not None:
                        torch.set_num_threads(threads)
                    fn()
                    wall, cpu = time.perf_counter(), time.process_time()
                    for _ in range(reps):
                        fn()
                    samples[way].append(((time.process_time() - cpu) / reps * 1e3, (time.perf_counter() - wall) / reps * 1e3))
                    put(saved)
                    time.sleep(0.12)  # OpenBLAS's and OpenMP's workers stop spinning (~0.1 s) before the next way
        finally:
            put(saved)
        cpu = [statistics.median(s[0] for s in samples[w]) for w in ways]
        wall = [statistics.median(s[1] for s in samples[w]) for w in ways]
        pick = "MNK"[cpu_blas_gemm.split_axis(m, k, n)] if m * k * n >= cpu_blas_gemm.SPLIT_MACS else "-"
        print(f"{name:12} {f'{m}x{k}x{n}{layout}':>15} {pick:>4}  " + " ".join(f"{c:10.2f}" for c in cpu)
              + "  |  " + " ".join(f"{w:7.2f}" for w in wall), flush=True)
    return 0


def _forced(a: np.ndarray, b: np.ndarray, axis: int) -> None:
    """``split_gemm`` along ``axis`` whatever the product's size (the rule's threshold lifted for the call)."""
    saved = cpu_blas_gemm.SPLIT_MACS
    cpu_blas_gemm.SPLIT_MACS = 0
    try:
        cpu_blas_gemm.split_gemm(a, b, None, axis)
    finally:
        cpu_blas_gemm.SPLIT_MACS = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--workloads", action="store_true", help="the workloads' products, every way (see above)")
    parser.add_argument("--only", default=None, help="with --workloads: products whose name contains this")
    parser.add_argument("--split-from", type=float, default=None,
                        help="multiply-adds from which the split column is timed (default cpu_blas_gemm.SPLIT_MACS)")
    args = parser.parse_args()
    if args.workloads:
        if cpu_blas._controls() is None or cpu_blas_gemm.num_threads() < 2 or not cpu_blas.owns_gemm_threads():
            print("needs NumPy's OpenBLAS (thread count settable), two threads and EMBER_BLAS_SPLIT not 0")
            return 0
        return workloads(args.rounds, args.only)
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
