"""Fused Numba loops in two halves on the hot worker (ember/graph/passes/fuse_numba_chunks.py, fuse_numba._hot_halves):
each element by the loop's own body, so a compiled Adam step gives the one-thread bits, NaN and inf gradients
included; the halves' C function reads one-element inputs whole and advances the others to its range."""
from __future__ import annotations

import ctypes

import numba
import numpy as np
import pytest

import ember
from ember.backends import cpu_hot_worker
from ember.graph.passes import fuse_numba
from ember.graph.passes.fuse_numba_chunks import chunk_function
from train_steps import classification_step

_RANGE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


@numba.njit(nogil=True)
def _axpy(n, x, a, y, out):  # noqa: ANN001
    for i in range(n):
        out[i] = a[0] * x[i] + y[i]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunk_function_runs_its_range_only(dtype) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(37).astype(dtype), rng.standard_normal(37).astype(dtype)
    x[3], y[30] = np.nan, np.inf
    a = np.array([0.75], dtype)
    out = np.full(37, -1.0, dtype)
    fn = chunk_function(_axpy, [np.dtype(dtype)] * 4, [False, True, False, False])
    words = np.array([x.ctypes.data, a.ctypes.data, y.ctypes.data, out.ctypes.data], np.int64)
    call = _RANGE(fn.address)
    call(20, 37, words.ctypes.data)
    assert (out[:20] == -1).all()
    call(0, 20, words.ctypes.data)
    whole = np.empty_like(out)
    _axpy(37, x, a, y, whole)
    assert out.tobytes() == whole.tobytes()


def _train(hot: str, monkeypatch, steps: int = 4) -> tuple:
    """A small MLP's compiled Adam steps with the loops' halves: "off", "fake" (both halves on this thread, the
    worker's half first) or "real" (the hot worker)."""
    calls = []
    if hot == "off":
        monkeypatch.setattr(fuse_numba, "HOT_MIN_ELEMENTS", 1 << 60)
    else:
        monkeypatch.setattr(fuse_numba, "HOT_MIN_ELEMENTS", 64)
    if hot == "fake":
        def fake(address: int, own: tuple, other: tuple) -> bool:
            calls.append((own, other))
            call = _RANGE(address)
            call(*other)
            call(*own)
            return True
        monkeypatch.setattr(cpu_hot_worker, "split_call_into", fake)
        monkeypatch.setattr(cpu_hot_worker, "available", lambda: True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 40)).astype(np.float32)
    x[2, 5], x[7, 0] = np.nan, np.inf  # NaN and inf reach the first layer's gradient and its Adam state
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(40, 32), ember.nn.ReLU(), ember.nn.Linear(32, 4))
    opt = ember.optim.Adam(model.parameters(), 1e-2)
    xt, t = ember.tensor(x), ember.tensor(np.arange(16) % 4)

    step = classification_step(model, opt)

    with fuse_numba.every_group():  # small loops compile to Numba too (the test's arrays are small)
        fn = ember.compile(step, fallback="raise", measure=False)
        for _ in range(steps):
            fn(xt, t)
    monkeypatch.undo()
    state = [p.detach().numpy().copy() for p in model.parameters()]
    state += [s[k].numpy().copy() for s in opt.state.values() for k in ("exp_avg", "exp_avg_sq")]
    return state, calls


def test_adam_loops_in_halves_give_the_one_thread_bits(monkeypatch) -> None:
    pytest.importorskip("numba")
    ref, _ = _train("off", monkeypatch)
    got, calls = _train("fake", monkeypatch)
    assert calls, "no loop ran in halves"
    assert any(np.isnan(a).any() for a in ref)  # the special values did reach the state
    for a, b in zip(ref, got):
        assert a.tobytes() == b.tobytes()


def test_adam_loops_on_the_real_hot_worker(monkeypatch) -> None:
    if not hasattr(cpu_hot_worker, "split_call_into") or not cpu_hot_worker.available():
        pytest.skip("the hot worker is off here (one thread, no numba, or BLAS ember cannot reach)")
    ref, _ = _train("off", monkeypatch)
    got, _ = _train("real", monkeypatch)
    for a, b in zip(ref, got):
        assert a.tobytes() == b.tobytes()


def test_addresses_are_the_arrays_data_pointers() -> None:
    # The words the halves' C function reads: each array's data address, also for views with an offset, 2-D and
    # bool arrays, as ndarray.ctypes.data says.
    base = np.arange(40, dtype=np.float64)
    arrays = [base[3:], np.ones((4, 5), np.float32), np.zeros(7, bool), base.reshape(5, 8)[1:], np.arange(3)]
    for count in (1, 3, 5):
        words = np.zeros(count, np.int64)
        fuse_numba._addresses(count)(words, *arrays[:count])
        assert words.tolist() == [a.ctypes.data for a in arrays[:count]]
