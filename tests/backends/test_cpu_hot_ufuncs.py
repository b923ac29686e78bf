"""Eager elementwise passes in two halves on the hot worker (ember/backends/cpu_hot_ufuncs.py) against NumPy.

Each element is one IEEE operation in either half, so every pass must give the bits of one NumPy call: float32 and
float64, array-array, array-number and number-array forms, fresh and in-place outputs, fills, with +-0, +-inf, NaN
(payloads included), subnormals and overflow. The halves run either on a job slot no thread serves (the caller runs
its half, then takes the worker's back: deterministic) or on the real worker; the eager paths that use them (the
gradient sum into ``.grad``, ``lr * grad``, ``w.sub_(...)``, ``zero_()``) must give the bits of the same step with the
halves off, and torch's values. Non-contiguous, broadcast, mixed-dtype, small and overlapping operands, a caller's
``errstate``, the off switches, and a forked child (no worker until its own first product) take NumPy's path.
"""
from __future__ import annotations

import os
import time
from types import SimpleNamespace

import numpy as np
import pytest

import ember
from ember import _config
from ember.autograd import grad_into
from ember.backends import cpu_hot_ufuncs, cpu_hot_worker, cpu_threads

pytestmark = pytest.mark.skipif(not cpu_hot_worker.available(), reason="hot worker off here (no numba, no "
                                "OpenBLAS whose threads ember holds, one thread, or EMBER_HOT_WORKER=0)")

_UFUNCS = [np.add, np.subtract, np.multiply, np.true_divide]


def _unserved(calls: list | None = None):
    """A ``split_native`` on a slot no thread serves: the caller runs its half, finds the other still posted and
    runs it too (the take-back path), so both halves run natively, deterministically, on this thread."""
    live = cpu_hot_worker._STATE["worker"]

    def split(fn, *args) -> bool:
        k = live.kernels
        slot = k.new_slot()
        slot[:k.BUDGET] = live.slot[:k.BUDGET]
        slot[k.STATE], slot[k.ASLEEP] = k.IDLE, 0
        if calls is not None:
            calls.append(args[1:3] + (args[-1],))  # op, form, cut
        return fn(slot, *args) >= 0
    return split


@pytest.fixture
def halves(monkeypatch):
    """Every eligible pass in halves on an unserved slot; the list of (op, form, cut) run."""
    cpu_hot_worker.available()
    calls: list = []
    monkeypatch.setattr(cpu_hot_ufuncs, "_spinning", lambda: True)
    monkeypatch.setattr(cpu_hot_worker, "split_native", _unserved(calls))
    return calls


def _special(shape: tuple, dtype: type, seed: int) -> np.ndarray:
    """Random values with +-0, +-inf, NaNs (two payloads, both signs), subnormals and near-overflow values."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    flat = x.reshape(-1)
    info = np.finfo(dtype)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, info.tiny / 4, -info.tiny / 3, info.max,
                         -info.max, info.max / 3, 1.0], dtype)
    where = rng.choice(flat.size, 400, replace=False)
    flat[where] = specials[np.arange(where.size) % specials.size]
    bits = flat.view(np.uint32 if dtype == np.float32 else np.uint64)
    nans = np.flatnonzero(np.isnan(flat))[:3]  # quiet NaNs with payloads 1, 2, 3
    quiet = 0x7FC00000 if dtype == np.float32 else 0x7FF8000000000000
    bits[nans] = np.asarray(quiet, bits.dtype) | np.arange(1, nans.size + 1).astype(bits.dtype)
    return x


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), np.flatnonzero(got.reshape(-1).view(np.uint8) != want.reshape(-1).view(
        np.uint8))[:10]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_halves_are_numpy_bit_for_bit(halves, dtype):
    with np.errstate(all="ignore"):
        for k, ufunc in enumerate(_UFUNCS):
            x, y = _special((513, 129), dtype, 2 * k), _special((513, 129), dtype, 2 * k + 1)
            _same_bits(cpu_hot_ufuncs.binary(ufunc, x, y), ufunc(x, y))
            for number in (1e-6, -0.0, 3, -2.5, float("inf"), float("nan"), 1e-300):
                _same_bits(cpu_hot_ufuncs.binary(ufunc, x, number), ufunc(x, number))
                _same_bits(cpu_hot_ufuncs.binary(ufunc, number, x), ufunc(number, x))
            # in place: the output is the first operand, the second, or (a number) the array
            for first in (True, False):
                out = (x if first else y).copy()
                want = ufunc(x, y)
                got = cpu_hot_ufuncs.binary(ufunc, out if first else x, y if first else out, out=out)
                assert got is out
                _same_bits(out, want)
            out = x.copy()
            assert cpu_hot_ufuncs.binary(ufunc, out, 0.1, out=out) is out
            _same_bits(out, ufunc(x, 0.1))
    assert {call[:2] for call in halves} == {(op, form) for op in range(4) for form in range(3)}
    assert all(cut == 256 * 129 for *_, cut in halves)  # cpu_hot_worker.cut(513) rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fills_and_odd_sizes(halves, dtype):
    for size in (1 << 15, 100_003, 262_147):
        buffer = _special((size,), dtype, size)
        assert cpu_hot_ufuncs.fill(buffer, 0)
        _same_bits(buffer, np.zeros(size, dtype))
        assert cpu_hot_ufuncs.fill(buffer, -0.0)
        _same_bits(buffer, np.full(size, -0.0, dtype))
        assert cpu_hot_ufuncs.fill(buffer, 1e-40)  # a float32 subnormal
        _same_bits(buffer, np.full(size, 1e-40, dtype))
        x = _special((size,), dtype, size + 1)
        _same_bits(cpu_hot_ufuncs.binary(np.multiply, 1e-6, x), np.multiply(1e-6, x))
    assert {cut for *_, cut in halves} == {16384, 50000, 131072}  # the middle, on 16 elements


def test_numbers_numpy_would_overflow_are_left_to_numpy(halves):
    x = np.ones(1 << 16, np.float32)
    assert cpu_hot_ufuncs.binary(np.multiply, x, 1e39) is None  # float32(1e39) overflows: NumPy's warning
    assert cpu_hot_ufuncs.binary(np.add, x, 1 << 60) is None
    assert not cpu_hot_ufuncs.fill(x, 1e39)
    _same_bits(cpu_hot_ufuncs.binary(np.multiply, x.astype(np.float64), 1e39), x.astype(np.float64) * 1e39)


def test_what_numpy_must_do_is_declined(halves):
    x = np.ones((512, 128), np.float32)
    assert cpu_hot_ufuncs.binary(np.add, x, x[0]) is None  # broadcasting
    assert cpu_hot_ufuncs.binary(np.add, x.T, x.T) is None  # not C-contiguous
    assert cpu_hot_ufuncs.binary(np.add, x[:, ::2], x[:, 1::2]) is None  # strided
    assert cpu_hot_ufuncs.binary(np.add, x, x.astype(np.float64)) is None  # mixed dtypes
    assert cpu_hot_ufuncs.binary(np.add, x.astype(np.int32), 1) is None
    assert cpu_hot_ufuncs.binary(np.add, x.astype(np.float16), 1.0) is None
    swapped = x.astype(">f4")  # byte-swapped: char "f" too
    assert cpu_hot_ufuncs.binary(np.add, swapped, swapped) is None and not cpu_hot_ufuncs.fill(swapped, 0.0)
    assert not cpu_hot_worker.split_gemm_into(np.ones((64, 1000), ">f4"), np.ones((1000, 100), ">f4"),
                                              np.empty((64, 100), ">f4"), force=True)
    assert cpu_hot_ufuncs.binary(np.add, x[:8], x[:8]) is None  # small
    assert cpu_hot_ufuncs.binary(np.maximum, x, x) is None  # not one of the four
    assert cpu_hot_ufuncs.binary(np.add, x, np.float32(1.0)) is None  # a NumPy scalar: NumPy's promotion
    base = np.ones(600 * 128, np.float32)
    view = base[128:].reshape(599, 128)
    other = base[:-128].reshape(599, 128)
    assert cpu_hot_ufuncs.binary(np.add, view, other, out=view) is None  # overlap in part: NumPy buffers it
    assert cpu_hot_ufuncs.binary(np.add, x, x, out=np.empty_like(x)) is None  # an output not an operand
    frozen = x.copy()
    frozen.flags.writeable = False
    assert cpu_hot_ufuncs.binary(np.add, frozen, 1.0, out=frozen) is None
    assert not cpu_hot_ufuncs.fill(x.T, 0.0) and not cpu_hot_ufuncs.fill(frozen, 0.0)
    assert halves == []


def test_switches_and_error_state_keep_numpy(monkeypatch):
    cpu_hot_worker.available()
    kernels = cpu_hot_worker._STATE["worker"].kernels
    fake = SimpleNamespace(slot=kernels.new_slot(), kernels=kernels, paused_until=0.0)  # a worker that spins
    monkeypatch.setitem(cpu_hot_worker._STATE, "worker", fake)
    assert cpu_hot_ufuncs._spinning()
    for target, name, value in ((_config, "HOT_WORKER", False), (_config, "CPU_KERNELS", "numpy"),
                                (cpu_threads, "num_threads", lambda: 1), (fake, "paused_until", 1.0)):
        with monkeypatch.context() as patch:
            patch.setattr(target, name, value)
            assert not cpu_hot_ufuncs._spinning(), name
    fake.slot[kernels.ASLEEP] = 1
    assert not cpu_hot_ufuncs._spinning()
    fake.slot[kernels.ASLEEP] = 0
    with np.errstate(over="raise"):  # a caller who asked NumPy to raise gets NumPy
        assert not cpu_hot_ufuncs._spinning()
    assert cpu_hot_ufuncs._spinning()
    monkeypatch.setitem(cpu_hot_worker._STATE, "worker", None)
    assert cpu_hot_ufuncs.binary(np.add, np.ones(1 << 16, np.float32), 1.0) is None  # a pass never starts one


def test_the_real_worker_gives_the_same_bits(monkeypatch):
    """Passes right after a split product, as in a step. (On a loaded machine the worker misses jobs and pauses
    itself; the pause is lifted here before each pass, so the pass splits whenever the worker is awake: the
    worker runs its half or the caller takes it back, the same bits either way.)"""
    worker = cpu_hot_worker._STATE["worker"]
    a, b = np.ones((64, 1000), np.float32), np.ones((1000, 100), np.float32)
    product = np.empty((64, 100), np.float32)
    x, y = _special((1000, 100), np.float32, 5), _special((1000, 100), np.float32, 6)
    split = 0
    with np.errstate(all="ignore"):
        for _ in range(40):
            cpu_hot_worker.split_gemm_into(a, b, product, force=True)  # wakes the worker; it spins ~1 ms after
            monkeypatch.setattr(worker, "paused_until", 0.0)
            if not cpu_hot_ufuncs._spinning():
                time.sleep(0.001)  # (releases the GIL: the woken worker needs it to return to its native spin)
                continue
            split += 1
            for ufunc in _UFUNCS:
                got = cpu_hot_ufuncs.binary(ufunc, x, y)
                if got is not None:
                    _same_bits(got, ufunc(x, y))
            out = x.copy()
            if cpu_hot_ufuncs.binary(np.subtract, out, y, out=out) is not None:
                _same_bits(out, x - y)
            if cpu_hot_ufuncs.fill(out, 0.0):
                _same_bits(out, np.zeros_like(x))
    if split == 0:
        pytest.skip("the worker never woke (a loaded machine)")


def _w1_steps(steps: int = 3) -> list:
    """W1's eager step (benchmarks/workload_models.two_layer_step) at W1's size; the weights and gradients after
    each step."""
    rng = np.random.default_rng(0)
    x, y = ember.tensor(rng.standard_normal((64, 1000), np.float32)), ember.tensor(rng.standard_normal((64, 10),
                                                                                                        np.float32))
    w1 = ember.tensor(rng.standard_normal((1000, 100), np.float32), requires_grad=True)
    w2 = ember.tensor(rng.standard_normal((100, 10), np.float32), requires_grad=True)
    seen = []
    for step in range(steps):
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        if step == 0:
            w1.grad.mul_(0.5)  # (so the next backward adds into a nonzero .grad)
        seen.append(w1.grad.numpy().copy())
        with ember.no_grad():
            w1.sub_(1e-6 * w1.grad)
            w2.sub_(1e-6 * w2.grad)
            if step:
                w1.grad.zero_()
                w2.grad.zero_()
        seen.append(w1.detach().numpy().copy())
    return seen


def test_w1_eager_step_in_halves_is_the_one_thread_step(halves, monkeypatch):
    monkeypatch.setattr(grad_into, "MAX_K", 0)  # (the gradient sum as a pass, not added by the GEMM: grad_into)
    with_halves = _w1_steps()
    ops = {call[0] for call in halves}
    assert {0, 1, 2, 4} <= ops  # the gradient sum, lr * grad, sub_, zero_ all ran in halves
    monkeypatch.setattr(cpu_hot_ufuncs, "MIN_ELEMENTS", 1 << 40)
    count = len(halves)
    plain = _w1_steps()
    assert len(halves) == count
    for got, want in zip(with_halves, plain):
        _same_bits(got, want)


def test_gradient_slot_sums_in_halves(halves, monkeypatch):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 300, 200), np.float32)

    def grad() -> np.ndarray:
        w = ember.tensor(a, requires_grad=True)
        v = ember.tensor(b)
        ((w * v).sum() + (w * w).sum() + (w * 3.0).sum()).backward()  # three gradients into w's slot
        return w.grad.numpy()

    got = grad()
    assert any(call[0] == 0 for call in halves)  # the slot's sums ran in halves
    monkeypatch.setattr(cpu_hot_ufuncs, "MIN_ELEMENTS", 1 << 40)
    _same_bits(got, grad())
    np.testing.assert_allclose(got, b + 2 * a + 3, rtol=1e-6, atol=1e-6)


def test_a_forked_child_uses_numpy_until_its_own_worker_runs():
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    a, b = np.ones((64, 1000), np.float32), np.ones((1000, 100), np.float32)
    cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32), force=True)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        code = 1
        try:
            x = np.arange(1 << 16, dtype=np.float32)
            fresh = cpu_hot_worker._STATE["worker"] is None and cpu_hot_ufuncs.binary(np.add, x, x) is None
            ok = fresh and cpu_hot_worker.available()  # its own worker, started on first use
            for _ in range(50):
                cpu_hot_worker.split_gemm_into(a, b, np.empty((64, 100), np.float32), force=True)
                out = cpu_hot_ufuncs.binary(np.add, x, 0.5)
                if out is not None:
                    ok = ok and out.tobytes() == (x + 0.5).tobytes()
                    break
                time.sleep(0.001)
            code = 0 if ok else 2
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 1)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    assert answer == b"\x00"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_copies_and_broadcast_constants(halves, dtype):
    value = _special((700, 97), dtype, 9)
    target = np.zeros_like(value)
    assert cpu_hot_ufuncs.copy_into(target, value)
    _same_bits(target, value)  # NaN payloads, -0.0 and subnormals moved as they are
    assert cpu_hot_ufuncs.copy_into(target, np.broadcast_to(np.array(-0.0, dtype), value.shape))  # a fill
    _same_bits(target, np.full_like(value, -0.0))
    assert [call[0] for call in halves] == [5, 4]  # COPY, then FILL
    assert not cpu_hot_ufuncs.copy_into(target, target)  # overlap: NumPy's
    assert not cpu_hot_ufuncs.copy_into(target[:, :50], value[:, :50])  # strided
    assert not cpu_hot_ufuncs.copy_into(target, np.zeros(value.shape, np.float32 if dtype == np.float64
                                                         else np.float64))  # another dtype
    assert not cpu_hot_ufuncs.copy_into(target, value[:10])  # shape (broadcasting rows)


def test_compiled_w1_write_back_in_halves_is_the_same(halves, monkeypatch):
    """W1 compiled: the write-back of w1.grad's zeros (a broadcast constant) runs as a fill in halves; the states
    after each step are those of the plain write-back."""
    import sys
    import pathlib
    sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "benchmarks"))
    import workload_models as models

    def run() -> list:
        rng = np.random.default_rng(5)
        x, y = (ember.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((64, 1000), (64, 10)))
        w1 = ember.tensor(rng.standard_normal((1000, 100)).astype(np.float32), requires_grad=True)
        w2 = ember.tensor(rng.standard_normal((100, 10)).astype(np.float32), requires_grad=True)
        step = ember.compile(models.two_layer_step(ember, w1, w2, 1e-6), measure=False)
        seen = []
        for _ in range(4):
            seen.append(step(x, y).detach().numpy().item())
            seen += [w1.detach().numpy().copy(), w1.grad.numpy().copy()]
        return seen

    got = run()
    assert any(call[0] == 4 for call in halves)  # the write-back's fill
    monkeypatch.setattr(cpu_hot_ufuncs, "MIN_ELEMENTS", 1 << 40)
    for g, w in zip(got, run()):
        if isinstance(g, float):
            assert g == w
        else:
            _same_bits(g, w)
