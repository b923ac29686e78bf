"""The workloads' products on NumPy's OpenBLAS against Intel MKL (``ember/backends/cpu_mkl.py``), one thread each.

Each product runs as ember's ``linear``/``matmul`` hands it over (weights transposed as views: layout ``NT``;
weight gradients ``x^T g``: ``TN``): ``np.matmul`` with OpenBLAS held to one thread against ``cpu_mkl.matmul``
(sequential MKL in strict CNR mode). Prints the best of ``--rounds`` rounds in microseconds and the ratio. Needs
the ``mkl`` extra; meaningful on an idle machine, or under ``chrt -f 10`` (docs/cpu-performance.md, "mkl20").

    python benchmarks/bench_blas_provider.py
    python benchmarks/bench_blas_provider.py --rounds 11
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

import numpy as np

from ember.backends import cpu_blas, cpu_mkl

SHAPES = [  # (M, K, N, layout, what)
    (64, 1000, 100, "NT", "W1 forward x @ W^T"), (1000, 64, 100, "TN", "W1 weight gradient x^T g"),
    (64, 100, 1000, "NN", "W1 input gradient"), (256, 784, 512, "NT", "W2 layer 1 forward"),
    (784, 256, 512, "TN", "W2 layer 1 weight gradient"), (256, 512, 10, "NT", "W2 layer 2 forward"),
    (256, 10, 512, "NN", "W2 layer 2 input gradient"), (2048, 256, 768, "NT", "W4 qkv"),
    (2048, 256, 1024, "NT", "W4 MLP up"), (4096, 384, 1536, "NT", "GPT MLP up"),
    (4096, 1536, 384, "NT", "GPT MLP down"), (4096, 384, 384, "NT", "GPT projection"),
    (384, 4096, 1536, "TN", "GPT weight gradient"), (64, 3136, 10, "NT", "MNIST linear"),
    (64, 64, 64, "NN", "a tiny product (NumPy's in matmul/linear)"),
]


def best_us(fn: Callable[[], object], calls: int, rounds: int) -> float:
    """The fastest round's time per call, in microseconds (after a short warm-up)."""
    for _ in range(max(2, calls // 10)):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    if cpu_mkl.use("mkl") != "mkl":
        print("Intel MKL is not installed here (pip install 'ember[mkl]')")
        return 1
    rng = np.random.default_rng(0)
    print("| product | M x K x N, layout | OpenBLAS (us) | MKL (us) | MKL / OpenBLAS |")
    print("| --- | --- | --- | --- | --- |")
    with cpu_blas.single_threaded_blas():
        for m, k, n, layout, what in SHAPES:
            a = rng.standard_normal((k, m) if layout[0] == "T" else (m, k)).astype(np.float32)
            b = rng.standard_normal((n, k) if layout[1] == "T" else (k, n)).astype(np.float32)
            a, b = (a.T if layout[0] == "T" else a), (b.T if layout[1] == "T" else b)
            calls = max(3, int(2e8 / (m * k * n)))
            blas = best_us(lambda: np.matmul(a, b), calls, args.rounds)
            mkl = best_us(lambda: cpu_mkl.matmul(a, b), calls, args.rounds)
            print(f"| {what} | {m}x{k}x{n} {layout} | {blas:.1f} | {mkl:.1f} | {mkl / blas:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
