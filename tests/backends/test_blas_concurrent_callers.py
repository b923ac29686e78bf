"""NumPy's OpenBLAS called from several threads at once while ember holds it to one thread
(``cpu_blas.single_threaded_blas``), as the BLAS split of convolutions does (``cpu_blas.blas_for``).

A one-thread GEMM's result does not depend on which thread runs it, so every product computed
concurrently must equal, bit for bit, the same product computed alone on one BLAS thread (not the
same product on BLAS's threads: OpenBLAS's threaded GEMM blocks the work differently and rounds
differently on the larger shapes). A race in BLAS (shared packing buffers,
an unlocked allocator) would show as mismatches here; none has been seen in 10^4 products
(docs/cpu-performance.md, "The BLAS split is safe"). The shapes are those of the split passes:
below and above OpenBLAS's own one-thread limit (4 * 65536 multiply-adds), transposed operands.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from ember.backends import cpu_blas

SHAPES = [(128, 32, 64), (96, 64, 32), (64, 147, 16), (512, 32, 64), (256, 576, 128), (2048, 64, 64)]


def _cases() -> list:
    rng = np.random.default_rng(0)
    cases = []
    for i, (m, k, n) in enumerate(SHAPES * 2):
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        if i % 2:  # a transposed operand, as the weight gradients pass them
            b = np.ascontiguousarray(b.T).T
        cases.append((a, b))
    return cases


def test_concurrent_gemms_with_blas_held_to_one_thread_are_bitwise_the_serial_ones():
    if cpu_blas._controls() is None:
        pytest.skip("no controllable OpenBLAS under NumPy")
    mismatches: list = []

    def work(seed: int) -> None:
        order = np.random.default_rng(seed).integers(len(cases), size=300)
        out = {}
        for index in order:
            a, b, expected = cases[index]
            result = out.setdefault(index, np.empty_like(expected))
            np.matmul(a, b, out=result)
            if not np.array_equal(result, expected):
                mismatches.append((seed, SHAPES[index % len(SHAPES)]))

    with cpu_blas.single_threaded_blas() as held:
        assert held
        cases = [(a, b, a @ b) for a, b in _cases()]  # alone, on one BLAS thread
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert mismatches == []
