"""The per-signature GEMM plan (ember/backends/cpu_gemm_plan.py) against the chain it stands in for.

A planned product must be the chain's product bit for bit (the same split job: the one-thread BLAS product, as
tests/backends/test_cpu_hot_worker.py checks for the split itself), the plan must be made again when a setting or
a deciding function changes (tests replace those), and it must step aside (None) wherever the chain would not
split: ember's own kernel, one thread, a pool chunk, small products, other dtypes.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_gemm_plan, cpu_hot_worker, cpu_threads
from ember.ops import linalg

pytestmark = pytest.mark.skipif(not cpu_hot_worker.available(), reason="hot worker off here (no numba, no "
                                "OpenBLAS whose threads ember holds, one thread, or EMBER_HOT_WORKER=0)")



def _ONE_THREAD(a, b):
    """The whole product as one call of the BLAS the split calls, on one thread."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    (ta, lda), (tb, ldb) = cpu_blas_gemm._operand(a), cpu_blas_gemm._operand(b)
    with cpu_blas.single_threaded_blas():
        cpu_blas_gemm._cblas("s" if a.dtype == np.float32 else "d")(
            101, ta, tb, a.shape[0], b.shape[1], a.shape[1], 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 0.0,
            out.ctypes.data, b.shape[1])
    return out


@pytest.fixture
def ready(monkeypatch):
    """The worker counts as spinning (a loaded test machine may have paused it): every planned split runs."""
    monkeypatch.setattr(cpu_hot_worker, "_ready", lambda worker, macs=0: True)
    cpu_gemm_plan._PLANS.clear()


def _operands(m, k, n, dtype, layout, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if "aT" in layout:
        a = np.ascontiguousarray(a.T).T
    if "bT" in layout:
        b = np.ascontiguousarray(b.T).T
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["", "aT", "bT"])
def test_planned_product_is_the_split_product_bit_for_bit(ready, dtype, layout):
    if not cpu_gemm_plan._kernel_takes(*_operands(64, 1000, 100, dtype, layout), linalg.native_kernel):
        for m, k, n in [(64, 1000, 100), (100, 64, 1000), (257, 1001, 53)]:
            a, b = _operands(m, k, n, dtype, layout)
            a[0, :3] = [np.inf, -0.0, np.nan]
            out = cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel)
            assert out is not None, (m, k, n, layout)
            np.testing.assert_array_equal(out, _ONE_THREAD(a, b))
            again = cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel)  # the cached plan, the same bits
            np.testing.assert_array_equal(again, out)
            np.testing.assert_array_equal(linalg._matmul_impl(np, a, b), out)  # the op's own path


def test_plan_is_made_again_when_a_setting_or_a_decider_changes(ready, monkeypatch):
    a, b = _operands(64, 1000, 100, np.float32, "")
    if cpu_gemm_plan._kernel_takes(a, b, linalg.native_kernel):
        pytest.skip("ember's own kernel takes this product here")
    assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is not None
    with monkeypatch.context() as patch:
        patch.setattr(_config, "HOT_WORKER", False)
        assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is None
    with monkeypatch.context() as patch:
        patch.setattr(cpu_blas_gemm, "num_threads", lambda: 1)
        assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is None
    with monkeypatch.context() as patch:
        patch.setattr(cpu_hot_worker, "MIN_MACS", 1 << 40)
        assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is None
    with monkeypatch.context() as patch:  # a replaced split_gemm (a test's spy) is asked by the chain, not skipped
        patch.setattr(cpu_blas_gemm, "split_gemm", lambda *args: None)
        assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is None
        patch.setattr(cpu_hot_worker, "split_gemm_into", lambda *args, **kwargs: False)
        assert cpu_gemm_plan.plan_into(a, b, np.empty((64, 100), np.float32)) is None  # None: ask the spy
    assert cpu_gemm_plan.matmul_2d(a, b, linalg.native_kernel) is not None  # settings back: planned again


def test_plan_steps_aside_where_the_chain_would_not_split(ready, monkeypatch):
    a, b = _operands(64, 1000, 100, np.float32, "")
    kernel = linalg.native_kernel
    assert cpu_gemm_plan.matmul_2d(*_operands(16, 64, 16, np.float32, ""), kernel) is None  # small
    assert cpu_gemm_plan.matmul_2d(a.astype(np.float16), b.astype(np.float16), kernel) is None
    assert cpu_gemm_plan.matmul_2d(a.astype(">f4"), b.astype(">f4"), kernel) is None  # byte-swapped
    assert cpu_gemm_plan.matmul_2d(a, b.astype(np.float64), kernel) is None  # mixed dtypes
    monkeypatch.setattr(cpu_threads._LOCAL, "inside", True, raising=False)  # a chunk of ember's pool
    assert cpu_gemm_plan.matmul_2d(a, b, kernel) is None
    monkeypatch.setattr(cpu_threads._LOCAL, "inside", False)
    always = lambda xp, name: (lambda *args: None)  # noqa: E731 - a kernel the plan does not know: the chain asks it
    assert cpu_gemm_plan.matmul_2d(a, b, always) is None


def test_weight_gradient_plan_adds_into_grad_bit_for_bit(ready):
    a, b = _operands(1000, 64, 100, np.float32, "aT")
    out = np.random.default_rng(1).standard_normal((1000, 100)).astype(np.float32)
    expected = out.copy()
    assert cpu_hot_worker.split_gemm_into(a, b, expected, beta=1, force=True)
    plan = cpu_gemm_plan.plan_into(a, b, out)
    assert plan is not None and cpu_gemm_plan.run_into(plan, a, b, out, 1)
    np.testing.assert_array_equal(out, expected)
    assert cpu_gemm_plan.plan_into(a[:, :16], b[:16], out) == ()  # too few multiply-adds to split
    assert cpu_gemm_plan.plan_into(a, b, np.asfortranarray(out)) == ()  # an output the split cannot write


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_forward_with_bias_is_the_chains_split_bit_for_bit(ready, monkeypatch, dtype):
    """nn.Linear's forward (``nn_ops._linear_gemm``): the planned split with the bias as the output's start (beta 1)
    against the chain's own split (the plan switched off), and within GEMM error of float64 NumPy."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 1000)).astype(dtype)
    w = rng.standard_normal((100, 1000)).astype(dtype)
    bias = rng.standard_normal(100).astype(dtype)
    bias[:2] = [np.inf, -0.0]
    if cpu_gemm_plan._kernel_takes(x, w.T, linalg.native_kernel):
        pytest.skip("ember's own kernel takes this product here")
    planned = ember.nn.functional.linear(ember.tensor(x), ember.tensor(w), ember.tensor(bias)).numpy()
    assert any(key[-1] is not None for key in cpu_gemm_plan._PLANS)  # the bias product was planned
    monkeypatch.setattr(cpu_gemm_plan, "matmul_2d", lambda *args: None)
    chain = ember.nn.functional.linear(ember.tensor(x), ember.tensor(w), ember.tensor(bias)).numpy()
    np.testing.assert_array_equal(planned, chain)
    exact = x.astype(np.float64) @ w.T.astype(np.float64) + bias
    tol = 1e-3 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(planned, exact, rtol=tol, atol=tol)
    assert cpu_gemm_plan._plan(x, w.T, linalg.native_kernel, bias[:50]) is None  # a bias of the wrong length


def test_linear_weight_gradient_product_is_the_chains_split_bit_for_bit(ready, monkeypatch):
    """``matmul_t`` (nn.Linear's weight gradient ``g.T @ x``, transpose folded in) through the plan against the
    chain's own split (the plan off)."""
    rng = np.random.default_rng(4)
    g = rng.standard_normal((64, 100)).astype(np.float32)
    x = rng.standard_normal((64, 1000)).astype(np.float32)
    if cpu_gemm_plan._kernel_takes(g.T, x, linalg.native_kernel):
        pytest.skip("ember's own kernel takes this product here")
    matmul_t = ember.ops.registry.OPS["matmul_t"].impl
    planned = matmul_t(np, g, x, transpose_a=True)
    monkeypatch.setattr(cpu_gemm_plan, "matmul_2d", lambda *args: None)
    np.testing.assert_array_equal(planned, matmul_t(np, g, x, transpose_a=True))
    np.testing.assert_allclose(planned, g.T.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)
