"""``linear``'s bias added by BLAS (beta = 1 into the bias rows, ember/backends/cpu_blas_gemm.py) and its bias
gradient summed in column blocks on ember's threads (nn_ops._bias_grad_array): values against a float64
reference and torch, every operand layout BLAS reads in place, the fallbacks, and the same bits as one sum."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_threads

try:  # imported now: first imported inside a test below that patches cpu_threads.num_threads, it would bind the
    import ember.backends.cpu_gemm_kernels  # noqa: F401  patch for good (``from cpu_threads import num_threads``)
except ImportError:  # no numba
    pass
from ember.ops import nn_ops

pytestmark = pytest.mark.skipif(cpu_blas_gemm._cblas("s") is None, reason="NumPy's BLAS is not an OpenBLAS")


def _layout(a: np.ndarray, how: str) -> np.ndarray:
    if how == "T":  # a transposed view of a row-major array
        return np.ascontiguousarray(a.T).T
    if how == "pad":  # rows with a gap after them
        wide = np.zeros((a.shape[0], a.shape[1] + 5), a.dtype)
        wide[:, :a.shape[1]] = a
        return wide[:, :a.shape[1]]
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la,lb", [("N", "N"), ("N", "T"), ("T", "N"), ("T", "T"), ("pad", "T"), ("N", "pad")])
def test_addmm_matches_a_float64_product(dtype, la, lb):
    rng = np.random.default_rng(0)
    a64, b64, c64 = rng.standard_normal((70, 33)), rng.standard_normal((33, 41)), rng.standard_normal(41)
    a, b = _layout(a64.astype(dtype), la), _layout(b64.astype(dtype), lb)
    out = cpu_blas_gemm.addmm(a, b, c64.astype(dtype))
    assert out is not None and out.dtype == dtype and out.flags.c_contiguous
    exact = a.astype(np.float64) @ b.astype(np.float64) + c64.astype(dtype)
    bound = (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(c64)) * np.finfo(dtype).eps * 40
    assert np.all(np.abs(out - exact) <= bound)


def test_addmm_special_values_propagate():
    a = np.ones((8, 4), np.float32)
    b = np.ones((4, 3), np.float32)
    a[1, 2], a[2, 0], b[3, 2] = np.nan, np.inf, -np.inf
    bias = np.array([0.0, np.inf, -1.0], np.float32)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(cpu_blas_gemm.addmm(a, b, bias), a @ b + bias)


def test_addmm_declines():
    a, b, bias = np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.ones(2, np.float32)
    assert cpu_blas_gemm.addmm(a, b.astype(np.float64), bias) is None  # mixed dtypes
    assert cpu_blas_gemm.addmm(a.astype(np.float16), b.astype(np.float16), bias.astype(np.float16)) is None
    assert cpu_blas_gemm.addmm(np.ones((4, 6), np.float32)[:, ::2], b, bias) is None  # strided both ways
    assert cpu_blas_gemm.addmm(a, b, np.ones((1, 2), np.float32)) is None  # a 2-D bias


@pytest.mark.parametrize("threads", [1, 2])
def test_linear_with_the_bias_in_blas_matches_torch(threads, monkeypatch):
    monkeypatch.setattr(nn_ops, "_BIAS_IN_GEMM", 1)
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_FILL", 1 if threads > 1 else 1 << 60)
    monkeypatch.setattr(nn_ops, "_SPLIT_BIAS_GRAD", 1 if threads > 1 else 1 << 60)
    rng = np.random.default_rng(1)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((3, 50, 24), (40, 24), (40,)))
    g = rng.standard_normal((3, 50, 40)).astype(np.float32)
    ex, ew, eb = (ember.tensor(v, requires_grad=True) for v in (x, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ember.nn.functional.linear(ex, ew, eb).backward(ember.tensor(g))
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ember.nn.functional.linear(ex, ew, eb).detach().numpy(), ty.detach().numpy(),
                               rtol=1e-5, atol=1e-5)
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_split_bias_gradient_is_one_sum_bit_for_bit(monkeypatch):
    monkeypatch.setattr(nn_ops, "_SPLIT_BIAS_GRAD", 1)
    monkeypatch.setattr(nn_ops, "num_threads", lambda: 3)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 3)
    rng = np.random.default_rng(2)
    for shape in ((16, 64, 200), (333, 129), (5, 7, 1000)):
        g = (rng.standard_normal(shape) * rng.standard_normal(shape) * 1e3).astype(np.float32)
        g.reshape(-1)[::53] = -0.0
        expected = np.add.reduce(g, axis=tuple(range(g.ndim - 1)))
        got = nn_ops._bias_grad_array(g)
        np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))


@pytest.mark.parametrize("m,k,n", [(301, 70, 45), (40, 90, 333), (45, 700, 61)])  # blocks of rows, columns, k
@pytest.mark.parametrize("la,lb", [("N", "N"), ("N", "T"), ("T", "N"), ("pad", "T")])
@pytest.mark.parametrize("with_bias", [False, True])
def test_split_gemm_over_ember_threads(m, k, n, la, lb, with_bias, monkeypatch):
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 3)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 3)
    monkeypatch.setattr(cpu_blas, "owns_gemm_threads", lambda: True)
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_K_RATIO", 4)  # (45, 700, 61): along K
    rng = np.random.default_rng(m + k)
    a = _layout(rng.standard_normal((m, k)).astype(np.float32), la)
    b = _layout(rng.standard_normal((k, n)).astype(np.float32), lb)
    bias = rng.standard_normal(n).astype(np.float32) if with_bias else None
    got = cpu_blas_gemm.split_gemm(a, b, bias)
    assert got is not None and got.shape == (m, n)
    exact = a.astype(np.float64) @ b.astype(np.float64) + (0 if bias is None else bias)
    bound = (np.abs(a).astype(np.float64) @ np.abs(b) + (0 if bias is None else np.abs(bias))) * 2e-7 * (k + 2)
    assert np.all(np.abs(got - exact) <= bound)
    np.testing.assert_array_equal(cpu_blas_gemm.split_gemm(a, b, bias), got)  # deterministic
    with np.errstate(invalid="ignore"):
        a[3, 1] = np.nan
        assert np.isnan(cpu_blas_gemm.split_gemm(a, b, bias)[3]).all()


def test_split_gemm_each_axis_against_float64(monkeypatch):
    """Every axis forced on one product (K changes the order of the sum: bounded against float64, not the bits),
    and the rule's pick per workload shape (cpu_blas_gemm.split_axis)."""
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_blas, "owns_gemm_threads", lambda: True)
    rng = np.random.default_rng(9)
    a = _layout(rng.standard_normal((33, 517)).astype(np.float32) * 1e3, "T")  # a weight gradient's g^T
    b = rng.standard_normal((517, 47)).astype(np.float32)
    bias = rng.standard_normal(47).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64) + bias
    bound = (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(bias)) * 2e-7 * (517 + 2)
    for axis in (0, 1, 2):
        got = cpu_blas_gemm.split_gemm(a, b, bias, axis=axis)
        assert np.all(np.abs(got - exact) <= bound), axis
    inf_b = b.copy()
    inf_b[500, 3] = np.inf  # in the second thread's block of k: reaches the output through the partial sums
    with np.errstate(invalid="ignore"):
        got = cpu_blas_gemm.split_gemm(a, inf_b, None, axis=2)
    assert np.isinf(got[:, 3]).all() and np.isfinite(np.delete(got, 3, axis=1)).all()
    shapes = ((4096, 384, 1152), (64, 100, 1000), (256, 2048, 256), (384, 4096, 1536), (65, 4096, 384), (256, 784, 512))
    assert [cpu_blas_gemm.split_axis(*s) for s in shapes] == [0, 1, 0, 1, 1, 1]  # K off by default: the same bits
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_K_RATIO", 4)
    assert [cpu_blas_gemm.split_axis(*s) for s in shapes] == [0, 1, 2, 1, 2, 1]


def test_split_gemm_declines(monkeypatch):
    a, b = np.ones((64, 64), np.float32), np.ones((64, 64), np.float32)
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 1)
    assert cpu_blas_gemm.split_gemm(a, b) is None  # one thread: BLAS as before
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_blas, "owns_gemm_threads", lambda: False)
    assert cpu_blas_gemm.split_gemm(a, b) is None  # EMBER_BLAS_SPLIT=0, or no OpenBLAS to hold to one thread
    monkeypatch.setattr(cpu_blas, "owns_gemm_threads", lambda: True)
    assert cpu_blas_gemm.split_gemm(a.astype(np.float16), b.astype(np.float16)) is None


def test_linear_and_matmul_split_match_torch(monkeypatch):
    monkeypatch.setattr(cpu_blas_gemm, "SPLIT_MACS", 1)
    monkeypatch.setattr(cpu_blas_gemm, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_threads, "num_threads", lambda: 2)
    monkeypatch.setattr(cpu_blas, "owns_gemm_threads", lambda: True)
    calls = []
    real = cpu_blas_gemm.split_gemm
    monkeypatch.setattr(cpu_blas_gemm, "split_gemm", lambda *a: calls.append(a[0].shape) or real(*a))
    rng = np.random.default_rng(5)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 64, 96), (120, 96), (120,)))
    g = rng.standard_normal((4, 64, 120)).astype(np.float32)
    ex, ew, eb = (ember.tensor(v, requires_grad=True) for v in (x, w, b))
    tx, tw, tb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    ey = ember.nn.functional.linear(ex, ew, eb)
    ty = torch.nn.functional.linear(tx, tw, tb)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for e, t in ((ex, tx), (ew, tw), (eb, tb)):
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-5)
    m1, m2 = rng.standard_normal((80, 60)).astype(np.float32), rng.standard_normal((60, 90)).astype(np.float32)
    np.testing.assert_allclose((ember.tensor(m1) @ ember.tensor(m2)).numpy(), m1 @ m2, rtol=1e-5, atol=1e-5)
    assert calls == [(256, 96), (256, 120), (120, 256), (80, 60)]  # forward, input and weight gradients, matmul
