"""The hot worker's split GEMM (ember/backends/cpu_hot_worker.py) against the one-thread product and references.

Split by rows or columns, every output element is one BLAS call's full sum over K, so the split product must be
bit for bit the product computed whole on one OpenBLAS thread (NumPy's ``matmul`` under
``cpu_blas.single_threaded_blas``), for float32 and float64, transposed and strided operands, odd sizes and
inf/nan inputs; and within float32 GEMM error of float64 NumPy and of torch. The take-back path (a worker that
has not picked the job up when the caller is done with its part) is driven directly on a slot no thread serves.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_hot_worker

pytestmark = pytest.mark.skipif(not cpu_hot_worker.available(), reason="hot worker off here (no numba, no "
                                "OpenBLAS whose threads ember holds, one thread, or EMBER_HOT_WORKER=0)")


def _one_thread(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The whole product as one call of the same BLAS the split calls (``cpu_blas_gemm._cblas``: NumPy's OpenBLAS,
    whose one-thread ``matmul`` is this call, or another provider ember hands it), on one thread."""
    out = np.empty((a.shape[0], b.shape[1]), a.dtype)
    (ta, lda), (tb, ldb) = cpu_blas_gemm._operand(a), cpu_blas_gemm._operand(b)
    with cpu_blas.single_threaded_blas():
        cpu_blas_gemm._cblas("s" if a.dtype == np.float32 else "d")(
            101, ta, tb, a.shape[0], b.shape[1], a.shape[1], 1.0, a.ctypes.data, lda, b.ctypes.data, ldb, 0.0,
            out.ctypes.data, b.shape[1])
    return out


def _operands(m: int, k: int, n: int, dtype: type, layout: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if "aT" in layout:  # a transposed view (a weight gradient's x.T)
        a = np.ascontiguousarray(a.T).T
    if "bT" in layout:  # b transposed (linear's W.T)
        b = np.ascontiguousarray(b.T).T
    if "strided" in layout:  # rows further apart than their length (a slice of a wider matrix)
        a = np.pad(a, ((0, 0), (0, 5)))[:, :k]
        b = np.pad(b, ((0, 0), (0, 3)))[:, :n]
    return a, b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["", "aT", "bT", "aT bT", "strided"])
@pytest.mark.parametrize("axis", [0, 1])
def test_split_is_bitwise_the_one_thread_product(dtype, layout, axis):
    for m, k, n in [(64, 1000, 100), (37, 1003, 131), (100, 64, 1000), (257, 1001, 53)]:
        a, b = _operands(m, k, n, dtype, layout)
        out = np.empty((m, n), dtype)
        assert cpu_hot_worker.split_gemm_into(a, b, out, axis=axis, force=True)
        np.testing.assert_array_equal(out, _one_thread(a, b), err_msg=f"{(m, k, n)} {layout} axis {axis}")
        exact = a.astype(np.float64) @ b.astype(np.float64)
        tol = 1e-4 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(out, exact, rtol=tol, atol=tol * np.sqrt(k) * 4)


def test_split_adds_into_the_output_with_beta_one():
    a, b = _operands(64, 400, 96, np.float32, "bT")
    bias = np.linspace(-2, 2, 96, dtype=np.float32)
    out = np.empty((64, 96), np.float32)
    out[:] = bias
    assert cpu_hot_worker.split_gemm_into(a, b, out, beta=1, axis=1, force=True)
    expected = np.empty_like(out)
    expected[:] = bias
    with cpu_blas.single_threaded_blas():  # the same BLAS call whole: bias first, then the product added in
        cpu_blas_gemm._cblas("s")(101, 111, 112, 64, 96, 400, 1.0, a.ctypes.data, 400, b.ctypes.data, 400, 1.0,
                                  expected.ctypes.data, 96)
    np.testing.assert_array_equal(out, expected)


def test_special_values_propagate_as_in_the_one_thread_product():
    a, b = _operands(64, 500, 80, np.float32, "")
    a[3, 7], a[40, 0], b[5, 70], b[499, 2] = np.inf, np.nan, -np.inf, np.inf
    for axis in (0, 1):
        out = np.empty((64, 80), np.float32)
        assert cpu_hot_worker.split_gemm_into(a, b, out, axis=axis, force=True)
        np.testing.assert_array_equal(out, _one_thread(a, b))  # NaN where NaN, same infinities
        exact = a.astype(np.float64) @ b.astype(np.float64)  # where float64 NumPy has NaN or inf, so do we
        np.testing.assert_array_equal(np.isnan(out), np.isnan(exact))
        np.testing.assert_array_equal(out[np.isinf(exact)], exact[np.isinf(exact)])
        assert np.isnan(out[40]).all()


def test_split_matches_torch():
    torch = pytest.importorskip("torch")
    a, b = _operands(64, 1000, 100, np.float32, "")
    out = np.empty((64, 100), np.float32)
    assert cpu_hot_worker.split_gemm_into(a, b, out, force=True)
    expected = torch.from_numpy(a) @ torch.from_numpy(b)
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=2e-4)


def test_a_job_not_taken_is_taken_back_by_the_caller():
    """A slot with no thread serving it: the caller posts, runs its part, finds the job still posted and runs
    it too (what happens when the worker is asleep or descheduled)."""
    k = cpu_hot_worker._STATE["worker"].kernels
    live = cpu_hot_worker._STATE["worker"].slot
    slot = k.new_slot()
    slot[:k.BUDGET] = live[:k.BUDGET]
    slot[k.STATE], slot[k.ASLEEP], slot[k.TAKEN_BACK] = k.IDLE, 0, 0
    a, b = _operands(48, 70, 40, np.float32, "")
    out = np.zeros((48, 40), np.float32)
    item = 4
    own = (0, 111, 111, 16, 40, 70, a.ctypes.data, 70, b.ctypes.data, 40, 0, out.ctypes.data, 40)
    job = (0, 111, 111, 32, 40, 70, a.ctypes.data + 16 * 70 * item, 70, b.ctypes.data, 40, 0,
           out.ctypes.data + 16 * 40 * item, 40)
    slot[k.JOB:k.OWN + k.JOB_WORDS] = job + own
    with cpu_blas.single_threaded_blas():
        assert k.split(slot) == 0
    assert slot[k.TAKEN_BACK] == 1 and slot[k.STATE] == k.IDLE
    np.testing.assert_array_equal(out, _one_thread(a, b))
    assert k.post(slot) == 0 and k.post(slot) == -1  # a second post while one is in flight is refused
    k.own_and_finish(slot)


def test_concurrent_callers_each_get_the_right_product():
    """Threads calling at once: one holds the worker, the others multiply on one thread (False from
    ``split_gemm_into``, then ``split_gemm`` falls back); every result is the one-thread product."""
    cases = [_operands(64, 400, 100, np.float32, "", seed) for seed in range(4)]
    expected = [_one_thread(a, b) for a, b in cases]
    errors: list = []

    def run(i: int) -> None:
        a, b = cases[i]
        for _ in range(30):
            out = cpu_blas_gemm.split_gemm(a, b)
            if out is None:
                out = _one_thread(a, b)
            if not np.array_equal(out, expected[i]):
                errors.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_off_switch_and_declines(monkeypatch):
    a, b = _operands(64, 1000, 100, np.float32, "")
    out = np.empty((64, 100), np.float32)
    monkeypatch.setattr(_config, "HOT_WORKER", False)
    assert not cpu_hot_worker.split_gemm_into(a, b, out)
    assert not cpu_hot_worker.worth_it(64, 1000, 100)
    assert cpu_blas_gemm.split_gemm(a, b) is None  # below the pool's split size: the caller's one thread
    monkeypatch.setattr(_config, "HOT_WORKER", True)
    assert not cpu_hot_worker.split_gemm_into(a.astype(np.float64), b, out)  # mixed dtypes
    assert not cpu_hot_worker.split_gemm_into(a, b, np.empty((100, 64), np.float32).T)  # output not C-contiguous
    assert not cpu_hot_worker.worth_it(64, 64, 64)  # too small to repay the hand-off
    small = _operands(37, 129, 53, np.float32, "")  # parts within OpenBLAS's small-matrix kernels: other bits
    assert not cpu_hot_worker.split_gemm_into(*small, np.empty((37, 53), np.float32))
    assert cpu_hot_worker.cut(64) == 32 and cpu_hot_worker.cut(100) == 48 and cpu_hot_worker.cut(7) == 3


def test_both_parts_run_with_openblas_held_to_one_thread(monkeypatch):
    """OpenBLAS's own workers must never wake for a split (blas18): its thread count is 1 while the parts run and
    restored afterwards, when the parts call OpenBLAS (not when they call MKL's sequential layer, w1hot21)."""
    get, put = cpu_blas._controls()
    saved = get()
    put(2)
    seen: list = []
    real = cpu_hot_worker.single_threaded_blas

    class Spy:
        def __enter__(self):
            self.inner = real()
            self.inner.__enter__()
            seen.append(get())

        def __exit__(self, *exc):
            self.inner.__exit__(*exc)

    monkeypatch.setattr(cpu_hot_worker, "single_threaded_blas", Spy)
    worker = cpu_hot_worker._STATE["worker"]
    try:
        a, b = _operands(64, 1000, 100, np.float32, "")
        monkeypatch.setattr(worker, "openblas", True)  # the parts call OpenBLAS: held to one thread
        assert cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32), force=True)
        assert seen == [1] and get() == 2
        monkeypatch.setattr(worker, "openblas", False)  # they call MKL's sequential layer: OpenBLAS left alone
        assert cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32), force=True)
        assert seen == [1] and get() == 2
    finally:
        put(saved)


def test_a_paused_or_sleeping_worker_is_not_waited_for(monkeypatch):
    """After jobs the worker did not start in time (a loaded machine) the caller multiplies whole for a while;
    ``split_gemm`` then returns None below the pool's size (the caller's one-thread product)."""
    worker = cpu_hot_worker._STATE["worker"]
    a, b = _operands(64, 1000, 100, np.float32, "")
    monkeypatch.setattr(worker, "paused_until", float("inf"))
    assert not cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32))
    assert cpu_blas_gemm.split_gemm(a, b) is None
    assert cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32), force=True)
