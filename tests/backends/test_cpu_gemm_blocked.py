"""The GEMM driver that packs A as well as B (ember/backends/cpu_gemm_blocked.py): the same bits as the driver
that reads A in place (same sums in the same order) for every layout of A and B, edge tiles, several k
blocks, a bias, inf/NaN and the thread splits; float64 references bound both; GPT-sized products take it.
"""
from __future__ import annotations

import numpy as np
import pytest

from ember import _config

numba = pytest.importorskip("numba")
gemm_kernels = pytest.importorskip("ember.backends.cpu_gemm_kernels")
if not gemm_kernels.host_has_avx512():
    pytest.skip("ember's GEMM needs an AVX-512 CPU", allow_module_level=True)
from gemm_test_support import kernel, operand as _operand  # noqa: E402,F401  (kernel: a fixture)


def _both(kernel, monkeypatch, a, b, bias=None, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(packed driver, in-place driver) results of ``a @ b (+ bias)``."""
    monkeypatch.setattr(_config, "CPU_THREADS", threads)
    monkeypatch.setattr(gemm_kernels, "PACKED_MIN_ROWS", 0)
    packed = kernel(a, b, bias)
    monkeypatch.setattr(gemm_kernels, "PACKED_MIN_ROWS", 1 << 60)
    plain = kernel(a, b, bias)
    return packed, plain


def _check(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    assert np.all(np.abs(got - want) <= 2e-7 * (a.shape[1] + 2) * scale + 1e-30)


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (13, 385, 33), (97, 800, 70), (200, 40, 64)])
@pytest.mark.parametrize("a_layout", ["c", "t", "s", "n", "z"])
@pytest.mark.parametrize("b_layout", ["c", "t", "n"])
def test_same_bits_as_the_in_place_driver(kernel, monkeypatch, m, k, n, a_layout, b_layout) -> None:
    rng = np.random.default_rng(m * 1000 + k + n)
    a, b = _operand(rng, m, k, a_layout), _operand(rng, k, n, b_layout)
    packed, plain = _both(kernel, monkeypatch, a, b)
    assert packed.tobytes() == plain.tobytes()
    _check(packed, a, b)


@pytest.mark.parametrize("threads", [1, 2])
def test_bias_and_thread_splits_give_the_same_bits(kernel, monkeypatch, threads: int) -> None:
    rng = np.random.default_rng(1)
    for m, k, n in [(400, 770, 100), (40, 300, 700)]:  # rows split, columns split
        a, b = _operand(rng, m, k, "c"), _operand(rng, k, n, "t")
        bias = rng.standard_normal(n).astype(np.float32)
        packed, plain = _both(kernel, monkeypatch, a, b, bias, threads)
        assert packed.tobytes() == plain.tobytes()
        monkeypatch.setattr(_config, "CPU_THREADS", 1)
        assert packed.tobytes() == _both(kernel, monkeypatch, a, b, bias)[0].tobytes()
        _check(packed - bias, a, b)


def test_special_values_as_the_in_place_driver(kernel, monkeypatch) -> None:
    rng = np.random.default_rng(2)
    a, b = _operand(rng, 50, 400, "t"), _operand(rng, 400, 40, "c")
    a = np.array(a)
    a[3, 7], a[10, 399], a[49, 0] = np.inf, np.nan, -np.inf
    b[5, 2], b[0, 39] = np.nan, 0.0
    a[20, 0], b[0, :] = 0.0, np.inf  # 0 * inf: NaN
    packed, plain = _both(kernel, monkeypatch, a, b)
    assert packed.tobytes() == plain.tobytes()
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(np.isnan(packed), np.isnan(want)) and np.array_equal(np.isinf(packed), np.isinf(want))


def test_large_products_take_the_packed_driver(monkeypatch) -> None:
    calls = []
    real = gemm_kernels.sgemm_packed
    monkeypatch.setattr(gemm_kernels, "sgemm_packed", lambda *args: calls.append(args[0]) or real(*args))
    rng = np.random.default_rng(3)
    a, b = _operand(rng, gemm_kernels.PACKED_MIN_ROWS, 64, "c"), _operand(rng, 64, 48, "t")
    got = gemm_kernels._run(a, b, None, None, 1)
    assert calls == [gemm_kernels.PACKED_MIN_ROWS]
    gemm_kernels._run(a[:-1], b, None, None, 1)  # fewer rows: the in-place driver
    assert len(calls) == 1
    _check(got, a, b)


def test_wide_products_run_transposed_with_the_same_bits(kernel, monkeypatch) -> None:
    rng = np.random.default_rng(4)
    m = gemm_kernels.PACKED_MIN_ROWS
    a, b = _operand(rng, m, 300, "t"), _operand(rng, 300, 2 * m + 5, "c")  # a weight gradient's layout
    seen = []
    real = gemm_kernels.sgemm_packed
    monkeypatch.setattr(gemm_kernels, "sgemm_packed", lambda *args: seen.append(args[:2]) or real(*args))
    got = kernel(a, b)
    assert seen and seen[0][0] == 2 * m + 5  # B^T A^T: B's columns are the rows
    assert got.flags.c_contiguous and got.shape == (m, 2 * m + 5)
    monkeypatch.setattr(gemm_kernels, "PACKED_MIN_ROWS", 1 << 60)
    assert got.tobytes() == kernel(a, b).tobytes()
    _check(got, a, b)
