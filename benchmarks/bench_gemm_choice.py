"""ember's AVX-512 GEMM against NumPy's BLAS, product by product, and what the rule in
ember/backends/cpu_gemm_choice.py picks for each.

The products are the float32 2-D ones the workloads of bench_workloads.py make (W1, W2, W4, GPT, ResNet-18's
linear layer, the MNIST CNN's), plus, with --grid, a grid of M x K x N x layouts. Each is timed both ways in
one process, the two alternating round by round, as the median per call. On one thread (default) each side
runs on the calling thread (BLAS held to one thread, ember's kernel unsplit) and the clock is the thread's CPU
time, which the other sessions of a shared machine disturb least. With --threads 2 both use two threads
(ember's kernel split over ember's threads, BLAS on its own two) on the wall clock: for quiet machines only.

    python benchmarks/bench_gemm_choice.py                  # the workloads' products, one thread
    python benchmarks/bench_gemm_choice.py --grid           # plus the grid the rule was read from
    python benchmarks/bench_gemm_choice.py --threads 2      # both libraries on two threads (quiet machine)

Prints, per product: both times, GFLOP/s, ember / BLAS, the rule's pick and whether the pick was the faster
(within 5%: a tie); then how many picks were right and the time the rule saves against always-BLAS and
always-ember. Only meaningful on a CPU with AVX-512F, numba installed (no kernel otherwise).
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment_line  # noqa: E402

from ember.backends import cpu_blas, cpu_gemm_choice  # noqa: E402

# (M, K, N, layout of A and B: N = row-major, T = a transposed view), what multiplies it
WORKLOAD_PRODUCTS = [
    (64, 1000, 100, "NN", "W1 forward"), (1000, 64, 100, "TN", "W1 weight grad"),
    (256, 784, 512, "NT", "W2 linear 1"), (512, 256, 784, "TN", "W2 weight grad 1"),
    (256, 512, 10, "NT", "W2 linear 2"), (256, 10, 512, "NN", "W2 input grad 2"), (10, 256, 512, "TN", "W2 weight grad 2"),
    (64, 3136, 10, "NT", "CNN linear"), (10, 64, 3136, "TN", "CNN weight grad"), (64, 10, 3136, "NN", "CNN input grad"),
    (2048, 256, 256, "NT", "W4 q/k/v/out"), (2048, 256, 1024, "NT", "W4 MLP up"), (2048, 1024, 256, "NT", "W4 MLP down"),
    (256, 2048, 256, "TN", "W4 weight grad"), (2048, 1024, 256, "NN", "W4 input grad"),
    (4096, 384, 1152, "NT", "GPT qkv"), (4096, 384, 1536, "NT", "GPT MLP up"), (4096, 1536, 384, "NT", "GPT MLP down"),
    (1152, 4096, 384, "TN", "GPT weight grad"), (4096, 1536, 384, "NN", "GPT input grad"),
    (4096, 384, 65, "NT", "GPT head"), (4096, 65, 384, "NN", "GPT head input grad"), (65, 4096, 384, "TN", "GPT head weight grad"),
    (128, 512, 10, "NT", "ResNet fc"), (128, 10, 512, "NN", "ResNet fc input grad"),
]
GRID_M, GRID_K, GRID_N = (12, 64, 256, 1024), (16, 32, 64, 128, 256, 1024), (10, 16, 32, 48, 64, 100, 128, 256, 1024)


def operand(rng: np.random.Generator, rows: int, cols: int, layout: str) -> np.ndarray:
    x = rng.standard_normal((cols, rows) if layout == "T" else (rows, cols)).astype(np.float32)
    return x.T if layout == "T" else x


def per_call(fn: Callable[[], object], reps: int, clock: Callable[[], float]) -> float:
    start = clock()
    for _ in range(reps):
        fn()
    return (clock() - start) / reps


def measure(m: int, k: int, n: int, layout: str, threads: int, rounds: int, rng: np.random.Generator,
            kernel: Callable) -> tuple[float, float]:
    """Median seconds per call of BLAS and of ember's kernel, alternating, ~2 ms of work per sample."""
    a, b = operand(rng, m, k, layout[0]), operand(rng, k, n, layout[1])
    out = np.empty((m, n), np.float32)
    reps = max(1, int(2e8 // (m * k * n)))  # ~2 ms at ~100 GMAC/s
    clock = time.thread_time if threads == 1 else time.perf_counter
    blas = lambda: np.matmul(a, b, out=out)
    ember = lambda: kernel(a, b, None, out, threads)
    blas(), ember()
    samples: dict[str, list[float]] = {"blas": [], "ember": []}
    for r in range(rounds):
        order = (("blas", blas), ("ember", ember)) if r % 2 else (("ember", ember), ("blas", blas))
        for name, fn in order:
            if threads > 1:  # OpenBLAS's workers spin ~0.1 s after its threaded calls, on the core ember's pool needs
                time.sleep(0.15)
            samples[name].append(per_call(fn, reps, clock))
    return statistics.median(samples["blas"]), statistics.median(samples["ember"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, choices=(1, 2))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--grid", action="store_true", help="also the M x K x N x layout grid")
    args = parser.parse_args(argv)
    try:
        from ember.backends import cpu_gemm_kernels
    except ImportError:
        print("numba is not installed: ember has no GEMM kernel, BLAS multiplies everything")
        return 0
    if not cpu_gemm_kernels.host_has_avx512():
        print("this CPU has no AVX-512F: ember has no GEMM kernel, BLAS multiplies everything")
        return 0
    print(environment_line())
    print(f"OpenBLAS core: {cpu_gemm_choice.blas_core_name()} (AVX-512 kernels: {cpu_gemm_choice.blas_has_avx512()}); "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; {args.threads} thread(s), "
          f"{'thread CPU time' if args.threads == 1 else 'wall clock'}, medians of {args.rounds} alternating rounds")
    products = list(WORKLOAD_PRODUCTS)
    if args.grid:
        products += [(m, k, n, lay, "grid") for lay, m, k, n in itertools.product(("NN", "NT", "TN"), GRID_M, GRID_K, GRID_N)]
    rng = np.random.default_rng(0)
    totals = {"blas": 0.0, "ember": 0.0, "rule": 0.0, "best": 0.0}
    right = counted = 0
    print(f"  {'product':<24}{'M x K x N':>18} {'AB':>3}  {'BLAS us':>9} {'GF/s':>6}  {'ember us':>9} {'GF/s':>6}"
          f"  {'e/b':>5}  rule   right")
    with cpu_blas.single_threaded_blas() if args.threads == 1 else contextlib.nullcontext():
        for m, k, n, layout, what in products:
            t_blas, t_ember = measure(m, k, n, layout, args.threads, args.rounds, rng, cpu_gemm_kernels._run)
            # what ember runs here: the shape rule only where NumPy's BLAS lacks AVX-512 kernels (use_ember)
            pick = "ember" if cpu_gemm_choice.use_ember(m, k, n, layout[1] == "N", args.threads) else "blas"
            ratio = t_ember / t_blas
            ok = ratio > 0.95 if pick == "blas" else ratio < 1.05
            right += ok
            counted += 1
            totals["blas"] += t_blas
            totals["ember"] += t_ember
            totals["rule"] += t_ember if pick == "ember" else t_blas
            totals["best"] += min(t_blas, t_ember)
            flops = 2 * m * k * n
            print(f"  {what:<24}{f'{m} x {k} x {n}':>18} {layout:>3}  {t_blas * 1e6:9.1f} {flops / t_blas / 1e9:6.0f}"
                  f"  {t_ember * 1e6:9.1f} {flops / t_ember / 1e9:6.0f}  {ratio:5.2f}  {pick:<5}  {'yes' if ok else 'NO'}",
                  flush=True)
    print(f"rule picked the faster (or a tie within 5%) for {right} of {counted} products; summed over them: "
          f"rule {totals['rule'] * 1e3:.1f} ms, always BLAS {totals['blas'] * 1e3:.1f} ms, always ember "
          f"{totals['ember'] * 1e3:.1f} ms, best of both {totals['best'] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
