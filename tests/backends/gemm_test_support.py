"""Shared pieces of the GEMM kernel tests (test_cpu_gemm_kernels, test_cpu_gemm_blocked, test_cpu_gemm_pack).

Example::

    from gemm_test_support import kernel, operand  # noqa: F401  (``kernel`` is a fixture)
"""
from __future__ import annotations

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_gemm_choice as gemm_choice, cpu_kernels


@pytest.fixture
def kernel(monkeypatch):
    """``matmul_f32`` taking every size (no BLAS fallback for small products) on one thread; the kernel table is
    rebuilt under the switched settings and again after the test."""
    monkeypatch.setattr(_config, "CPU_KERNELS", "numba")
    monkeypatch.setattr(_config, "GEMM", "ember")
    monkeypatch.setattr(gemm_choice, "MIN_MACS", 0)
    monkeypatch.setattr(_config, "CPU_THREADS", 1)
    cpu_kernels.reset()
    yield cpu_kernels.get("matmul_f32")
    cpu_kernels.reset()


def operand(rng: np.random.Generator, rows: int, cols: int, layout: str) -> np.ndarray:
    """A (rows, cols) float32 matrix laid out as ``layout``: c (row-major), t (a transposed view),
    s (every other column of a wider array), n (rows reversed: negative stride), z (a broadcast row)."""
    if layout == "c":
        return rng.standard_normal((rows, cols)).astype(np.float32)
    if layout == "t":
        return rng.standard_normal((cols, rows)).astype(np.float32).T
    if layout == "s":
        return rng.standard_normal((rows, 2 * cols)).astype(np.float32)[:, ::2]
    if layout == "n":
        return rng.standard_normal((rows, cols)).astype(np.float32)[::-1]
    return np.broadcast_to(rng.standard_normal((1, cols)).astype(np.float32), (rows, cols))
