"""The GEMM's transposing pack (ember/backends/cpu_gemm_pack.py): panels equal NumPy's strided copy bit for
bit (odd sizes, partial panels and blocks, NaN payloads, signed zeros, padded rows), and products of
``x @ W.T`` through it match float64 references, for weights that take the pack and layouts that do not.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
gemm_kernels = pytest.importorskip("ember.backends.cpu_gemm_kernels")
if not gemm_kernels.host_has_avx512():
    pytest.skip("ember's GEMM needs an AVX-512 CPU", allow_module_level=True)
from ember.backends.cpu_gemm_pack import pack_transposed  # noqa: E402
from gemm_test_support import kernel  # noqa: E402,F401  (a fixture)


def _numpy_panels(b: np.ndarray) -> np.ndarray:
    """The panels ``(P, K, 32)`` of ``b`` (K, N) by plain NumPy indexing, zero past column N."""
    k, n = b.shape
    panels = -(-n // 32)
    wide = np.zeros((k, panels * 32), np.float32)
    wide[:, :n] = b
    return np.ascontiguousarray(wide.reshape(k, panels, 32).transpose(1, 0, 2))


@pytest.mark.parametrize("n", [1, 7, 16, 31, 32, 33, 63, 65, 257])
@pytest.mark.parametrize("k", [1, 7, 15, 16, 17, 63, 65, 257])
def test_panels_equal_numpy_bit_for_bit(n: int, k: int) -> None:
    rng = np.random.default_rng(n * 1000 + k)
    w = rng.standard_normal((n, k)).astype(np.float32)
    w.reshape(-1)[:: 5] = -0.0
    w.reshape(-1)[1:: 7] = np.float32(np.nan)
    bits = w.view(np.uint32)
    bits.reshape(-1)[2:: 11] = 0x7FC01234  # a NaN payload: copied, never computed
    want = _numpy_panels(w.T)
    got = np.full_like(want, 3.0)  # the padding must be written, not left
    pack_transposed(w.ctypes.data, k, n, k, got.ctypes.data, 0, want.shape[0])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_range_of_panels_and_rows_of_a_wider_matrix() -> None:
    """Panels [p0, p1) only, from a weight whose rows are longer than K (a column slice of a wider array)."""
    rng = np.random.default_rng(3)
    wide = rng.standard_normal((100, 90)).astype(np.float32)
    w = wide[:, 5:75]  # (100, 70), rows 90 floats apart
    want = _numpy_panels(w.T)
    got = np.zeros_like(want)
    pack_transposed(w.ctypes.data, 90, 100, 70, got.ctypes.data, 1, 3)
    assert np.array_equal(got[1:3], want[1:3]) and not got[0].any() and not got[3].any()


def test_the_gemm_packs_the_same_panels_as_numpy_would() -> None:
    rng = np.random.default_rng(4)
    for b in (rng.standard_normal((70, 45)).astype(np.float32).T,        # W.T: the transposing pack
              rng.standard_normal((45, 140)).astype(np.float32)[:, ::2],  # strided columns: NumPy's copy
              rng.standard_normal((45, 70)).astype(np.float32)[::-1]):    # negative row stride: NumPy's copy
        packed = np.zeros((3, 45, 32), np.float32)
        gemm_kernels._pack(b, packed, 0, 3)
        assert np.array_equal(packed, _numpy_panels(b))


@pytest.mark.parametrize("m, k, n", [(1, 1, 1), (7, 63, 65), (65, 257, 7), (257, 65, 63), (13, 784, 40)])
def test_linear_products_through_the_pack_match_float64(kernel, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m + k + n)
    x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    got = kernel(x, w.T, bias)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    scale = np.abs(x).astype(np.float64) @ np.abs(w.T).astype(np.float64) + np.abs(bias)
    assert got.dtype == np.float32 and np.all(np.abs(got - want) <= 2e-7 * (k + 3) * scale)
