"""ember's optional Intel MKL provider (ember/backends/cpu_mkl.py) against float64 NumPy, and its fallbacks.

Where the ``mkl`` wheel is not installed (or the CPU is not Intel) only the OpenBLAS tests run; the MKL ones skip.
"""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_mkl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def mkl():
    """MKL as the provider for one test (skipped where it cannot load), the process's choice restored after."""
    if cpu_mkl.use("mkl") != "mkl":
        cpu_mkl.use(None)
        pytest.skip("Intel MKL (the `mkl` wheel) is not installed here")
    yield
    cpu_mkl.use(None)


@pytest.fixture
def openblas():
    cpu_mkl.use("openblas")
    yield
    cpu_mkl.use(None)


def _bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A GEMM's rounding bound per element: K * eps * (|A| @ |B|), in float64."""
    eps = np.finfo(np.result_type(a, b)).eps
    return a.shape[-1] * eps * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))) + 1e-30


def _close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert got.shape == exact.shape and got.dtype == np.result_type(a, b)
    assert np.all(np.abs(got - exact) <= _bound(a, b)), np.abs(got - exact).max()


def _layouts(rng: np.random.Generator, m: int, k: int, n: int, dtype: type) -> list:
    """(a, b) in every layout BLAS reads in place: row-major, transposed views, strided slices."""
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    wide_a = np.zeros((m, k + 3), dtype)
    wide_a[:, :k] = a
    return [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)), (wide_a[:, :k], b.T.copy().T),
            (a[::-1].copy()[::-1], b[:, ::-1].copy()[:, ::-1])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 100, 100), (33, 17, 129), (256, 64, 10), (1, 50, 40), (40, 50, 1), (7, 5, 3)])
def test_gemm_layouts_match_float64(mkl, dtype, shape):
    rng = np.random.default_rng(0)
    whole = None
    for a, b in _layouts(rng, *shape, dtype):
        got = cpu_mkl.gemm(a, b)
        _close(got, a, b)
        # strict CNR: every layout gives the same bits
        assert whole is None or np.array_equal(got, whole)
        whole = got


def test_split_products_give_the_bits_of_the_whole(mkl):
    """Row blocks, column blocks and the transposed product (what ember's thread splits and the narrow path
    compute) equal the whole product bit for bit."""
    rng = np.random.default_rng(1)
    for m, k, n in [(256, 784, 512), (64, 1000, 100), (300, 200, 7), (65, 513, 129)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        whole = cpu_mkl.gemm(a, b)
        h, w = m // 3, n // 2
        assert np.array_equal(whole, np.concatenate([cpu_mkl.gemm(a[:h], b), cpu_mkl.gemm(a[h:], b)]))
        assert np.array_equal(whole, np.concatenate([cpu_mkl.gemm(a, b[:, :w]), cpu_mkl.gemm(a, b[:, w:])], 1))
        assert np.array_equal(whole, cpu_mkl.gemm(b.T, a.T).T)
        # through ember's split (rows or columns over its threads, MKL's cblas via cpu_blas_gemm._cblas)
        split = cpu_blas_gemm.split_gemm(a, b)
        assert split is None or np.array_equal(split, whole)


def test_beta_zero_never_reads_out_and_special_values_propagate(mkl):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((64, 100)).astype(np.float32)
    b = rng.standard_normal((100, 80)).astype(np.float32)
    out = np.full((64, 80), np.nan, np.float32)
    cpu_mkl.gemm(a, b, out=out)
    assert np.isfinite(out).all()
    a[3, 7], a[5, 0], b[2, 9] = np.inf, np.nan, -np.inf
    got = cpu_mkl.gemm(a, b)
    with np.errstate(invalid="ignore"):  # inf * 0 and inf - inf: NaN, as in the product
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got) & (got > 0), np.isinf(want) & (want > 0))
    assert np.array_equal(np.isinf(got) & (got < 0), np.isinf(want) & (want < 0))
    finite = np.isfinite(want)
    assert np.allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_alpha_beta_c_and_out(mkl):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((30, 40)), rng.standard_normal((40, 20))
    bias = rng.standard_normal(20)
    np.testing.assert_allclose(cpu_mkl.gemm(a, b, alpha=2.0, beta=0.5, c=bias), 2 * (a @ b) + 0.5 * bias, rtol=1e-13,
                               atol=1e-13)
    acc = rng.standard_normal((30, 20))
    want = acc * 3 + a @ b
    assert cpu_mkl.gemm(a, b, out=acc, beta=3.0) is acc
    np.testing.assert_allclose(acc, want, rtol=1e-13, atol=1e-13)
    # an out BLAS cannot write directly (columns strided) and one overlapping an operand
    wide = np.zeros((30, 40))
    cpu_mkl.gemm(a, b, out=wide[:, ::2])
    np.testing.assert_allclose(wide[:, ::2], a @ b, rtol=1e-13, atol=1e-13)
    square = rng.standard_normal((20, 20))
    want = square @ square
    cpu_mkl.gemm(square, square.copy(), out=square)
    np.testing.assert_allclose(square, want, rtol=1e-13, atol=1e-13)


def test_degenerate_sizes_and_other_dtypes(mkl):
    assert cpu_mkl.gemm(np.ones((0, 3), np.float32), np.ones((3, 4), np.float32)).shape == (0, 4)
    out = np.full((2, 4), np.nan, np.float32)
    assert np.array_equal(cpu_mkl.gemm(np.ones((2, 0), np.float32), np.ones((0, 4), np.float32), out=out),
                          np.zeros((2, 4), np.float32))
    assert np.array_equal(cpu_mkl.matmul(np.ones((3, 2, 0), np.float32), np.ones((0, 4), np.float32)),
                          np.zeros((3, 2, 4), np.float32))
    for a in (np.ones((3, 3), np.complex64), np.arange(9).reshape(3, 3), np.ones((3, 3), np.float16)):
        assert cpu_mkl.matmul(a, a) is None
        assert np.array_equal(cpu_mkl.gemm(a, a), np.matmul(a, a))
    # size-1 axes with any stride (0 after broadcast_to, as in views NumPy still calls contiguous)
    odd = np.lib.stride_tricks.as_strided(np.full(1, 2.0), (1, 1, 1, 1), (0, 0, 0, 0))
    assert np.array_equal(cpu_mkl.matmul(odd, np.ones((3, 1, 2))), np.full((1, 3, 1, 2), 2.0))
    row = np.lib.stride_tricks.as_strided(np.arange(4.0), (1, 4), (-8, 8))
    assert np.array_equal(cpu_mkl.gemm(row, np.ones((4, 2))), [[6.0, 6.0]])
    assert cpu_mkl.matmul(np.ones((3, 3), np.float32), np.ones((3, 3), np.float64)) is None
    assert cpu_mkl.matmul(np.ones(3, np.float32), np.ones((3, 3), np.float32)) is None  # vectors: NumPy
    with pytest.raises(ValueError, match="gemm: expected matrices"):
        cpu_mkl.gemm(np.ones((2, 3)), np.ones((4, 2)))


@pytest.mark.parametrize("shapes", [((4, 6, 32, 16), (4, 6, 16, 24)), ((5, 32, 16), (16, 24)), ((32, 16), (3, 16, 24)),
                                    ((2, 1, 8, 16), (3, 16, 8))])
def test_stacks_match_float64_and_per_matrix_bits(mkl, shapes):
    rng = np.random.default_rng(4)
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = rng.standard_normal(shapes[1]).astype(np.float32)
    got = cpu_mkl.matmul(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    a_full, b_full = np.broadcast_to(a, got.shape[:-2] + a.shape[-2:]), np.broadcast_to(b, got.shape[:-2] + b.shape[-2:])
    for index in np.ndindex(*got.shape[:-2]):
        assert np.array_equal(got[index], cpu_mkl.gemm(a_full[index], b_full[index]))


def test_attention_shaped_views(mkl):
    """Head-split views and transposed keys (attention's products) in place, against float64."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 40, 3, 16)).astype(np.float32).transpose(0, 2, 1, 3)  # (B, H, T, D) view
    k = rng.standard_normal((2, 40, 3, 16)).astype(np.float32).transpose(0, 2, 1, 3)
    scores = cpu_mkl.matmul(q, k.swapaxes(-1, -2))
    np.testing.assert_allclose(scores, np.matmul(q.astype(np.float64), k.swapaxes(-1, -2).astype(np.float64)),
                               rtol=1e-5, atol=1e-4)
    out = np.full((2, 3, 40, 40), np.nan, np.float32)
    assert cpu_mkl.matmul(q, k.swapaxes(-1, -2), out) is out and np.array_equal(out, scores)
    # heads in reverse order (a negative batch stride: copied, then the same per-matrix bits)
    assert np.array_equal(cpu_mkl.matmul(q[:, ::-1], k[:, ::-1].swapaxes(-1, -2)), scores[:, ::-1])


def test_ember_products_use_mkl_and_agree_with_float64(mkl):
    import ember
    import ember.nn.functional as F

    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    w = rng.standard_normal((100, 1000)).astype(np.float32)
    bias = rng.standard_normal(100).astype(np.float32)
    got = F.linear(ember.tensor(x), ember.tensor(w), ember.tensor(bias)).numpy()
    want = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    assert np.all(np.abs(got - want) <= _bound(x, w.T) + 1e-5 * np.abs(want))
    assert np.array_equal((ember.tensor(x) @ ember.tensor(w).T).numpy(), cpu_mkl.gemm(x, w.T))
    assert cpu_blas_gemm._cblas("s") is cpu_mkl.cblas("s") and cpu_mkl.cblas_pointer("s")


def test_openblas_setting_keeps_numpys_products(openblas):
    import ember

    rng = np.random.default_rng(7)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    w = rng.standard_normal((1000, 100)).astype(np.float32)
    assert cpu_mkl.provider() == "openblas" and cpu_mkl.cblas("s") is None and cpu_mkl.matmul(x, w) is None
    with cpu_blas.single_threaded_blas():  # ember's products run on one OpenBLAS thread (blas18)
        want = np.matmul(x, w)
    assert np.array_equal((ember.tensor(x) @ ember.tensor(w)).numpy(), want)
    assert np.array_equal(cpu_mkl.gemm(x, w), np.matmul(x, w))
    np.testing.assert_allclose(cpu_mkl.gemm(x, w, alpha=2.0, beta=1.0, c=w[0]), 2 * np.matmul(x, w) + w[0], rtol=1e-6)


def test_bad_setting_names_the_variable():
    saved = _config.BLAS
    try:
        with pytest.raises(ValueError, match="EMBER_BLAS='fast'.*auto, mkl, openblas"):
            cpu_mkl.use("fast")
    finally:
        _config.BLAS = saved
        cpu_mkl.use(None)


def test_environment_variable_chooses_openblas_in_a_fresh_process():
    code = ("import numpy as np, ember; from ember.backends import cpu_mkl; a = np.ones((300, 300), np.float32); "
            "r = (ember.tensor(a) @ ember.tensor(a)).numpy(); print(cpu_mkl.provider(), cpu_mkl.matmul(a, a) is None, "
            "np.array_equal(r, a @ a))")
    env = dict(os.environ, EMBER_BLAS="openblas", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["openblas", "True", "True"], done.stderr


def test_without_the_wheel_numpys_blas_runs(monkeypatch):
    """No `mkl` wheel (a `make demo` install): `auto` quietly keeps NumPy's OpenBLAS; `mkl` says so and does too."""
    saved = cpu_mkl._STATE["lib"]
    monkeypatch.setattr(cpu_mkl, "library_path", lambda: None)
    monkeypatch.setitem(cpu_mkl._STATE, "lib", None)
    try:
        assert cpu_mkl.use("auto") == "openblas"
        with pytest.warns(RuntimeWarning, match="EMBER_BLAS=mkl but Intel MKL"):
            assert cpu_mkl.use("mkl") == "openblas"
        a = np.ones((300, 300), np.float32)
        assert cpu_mkl.matmul(a, a) is None and cpu_mkl.cblas("s") is None
    finally:
        cpu_mkl._STATE["lib"] = saved
        monkeypatch.undo()
        cpu_mkl.use(None)
