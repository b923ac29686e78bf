"""A hot hand-off for medium GEMMs: one worker thread that spins briefly (without the GIL) for the next half-product.

Why: ember holds OpenBLAS to one thread per product (its own workers spin on ``sched_yield`` for ~0.1 s and wreck
loaded machines, docs/cpu-performance.md "blas18") and splits large products over its pool, whose workers sleep on
a lock: waking one costs 40-80 us on this project's VM, more than half of W1's 64 x 1000 x 100 product (~100 us),
so W1's products ran on one core while torch's threads, which never sleep between ops, used two. Here one worker
(``ember-hot``) waits for a job in native code (numba, ``nogil``) for at most ``SPIN_SECONDS`` after its last job,
calling ``sched_yield`` on every turn (a loaded machine gets the core back at once), then sleeps on an event.

A product (``split``): the caller writes the worker's part (the second block of rows or columns; K is never cut,
so every element is one BLAS call's full sum, bit for bit the one-thread product's) and its own part into the job
slot, publishes it with one compare-and-swap, runs its part on one BLAS thread, and waits, spinning natively, for
the worker's. A worker that has not taken the job by then (asleep, or descheduled on a loaded machine) does not
hold the caller up: the caller takes the job back with the same compare-and-swap and runs it itself, so a split is
never much slower than one thread. A sleeping worker is woken by the caller (an event), in parallel with the
caller's own part, and spins again for the next product.

One job at a time: a second Python thread calling while a job is in flight (or a call from inside another
split) gets False and multiplies on one thread. Off (``available()`` False) with ``EMBER_HOT_WORKER=0``, one
ember thread (``EMBER_CPU_THREADS=1``), no numba, no OpenBLAS whose ``cblas_?gemm`` and thread count ember can
reach, or a CPU without a cycle counter numba knows (not x86-64); callers then use ``cpu_threads``' pool or one
thread as before. After ``fork`` the child starts its own worker on first use; at exit the worker is stopped.

Example:
    >>> import numpy as np
    >>> a, b = np.ones((64, 300), np.float32), np.ones((300, 100), np.float32)
    >>> out = np.empty((64, 100), np.float32)
    >>> done = split_gemm_into(a, b, out)   # False where the hot worker is off
    >>> not done or float(out[0, 0]) == 300.0
    True
"""
from __future__ import annotations

import atexit
import ctypes
import os
import platform
import threading
import time
from typing import Any

import numpy as np

from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_kernels, cpu_mkl, cpu_threads
from ember.backends.cpu_blas import single_threaded_blas

# The worker spins this long after its last job before it sleeps (W1's step issues a product every ~0.1-0.3 ms).
SPIN_SECONDS = 1e-3

_STATE: dict[str, Any] = {"worker": None, "failed": False}
_START = threading.Lock()


class _Worker:
    """The slot, the thread serving it, the event it sleeps on, and the lock that admits one caller at a time."""

    def __init__(self, kernels: Any, s_gemm: int, d_gemm: int, wide: bool, yield_address: int) -> None:
        self.kernels = kernels
        self.openblas = cpu_mkl.cblas("s") is None  # whose GEMM the parts call (rebind updates it)
        self.slot = slot = kernels.new_slot()
        slot[kernels.S_GEMM], slot[kernels.D_GEMM], slot[kernels.WIDE] = s_gemm, d_gemm, int(wide)
        slot[kernels.YIELD] = yield_address
        slot[kernels.ASLEEP] = 1  # until the thread has calibrated its budget and spins
        self.busy = threading.Lock()
        self.wake = threading.Event()
        # jobs taken back in a row; no splits before this perf_counter; the next pause's length
        self.misses, self.paused_until, self.pause = 0, 0.0, PAUSE_SECONDS
        self.thread = threading.Thread(target=_serve, args=(kernels, slot, self.wake), name="ember-hot", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.slot[self.kernels.STOP] = 1
        self.wake.set()


def _serve(kernels: Any, slot: Any, wake: threading.Event) -> None:
    """The worker thread: calibrate the cycle counter, then spin (natively) and sleep in turn until stopped."""
    kernels.now()  # compiled (or loaded from the cache) before it is timed
    start, ticks = time.perf_counter(), kernels.now()
    time.sleep(0.002)
    rate = (kernels.now() - ticks) / max(time.perf_counter() - start, 1e-6)
    slot[kernels.BUDGET] = max(int(rate * SPIN_SECONDS), 1)
    while not kernels.serve(slot):
        wake.wait()
        wake.clear()


def _cblas_addresses() -> tuple[int, int, bool] | None:
    """Addresses of NumPy's OpenBLAS ``cblas_sgemm``/``cblas_dgemm`` and whether their sizes are 64-bit."""
    s, d = cpu_blas_gemm._cblas("s"), cpu_blas_gemm._cblas("d")
    if s is None or d is None:
        return None
    wide = s.argtypes[3] is ctypes.c_int64
    return ctypes.cast(s, ctypes.c_void_p).value, ctypes.cast(d, ctypes.c_void_p).value, wide


def rebind() -> None:
    """Point a running worker at the BLAS ember calls now (``cpu_mkl.use`` switched between OpenBLAS and MKL, for
    tests and ``bench_workloads.py --blas``; mkl20): the worker reads the addresses at each job. Between products
    only (no job in flight)."""
    worker = _STATE["worker"]
    addresses = _cblas_addresses() if worker is not None else None
    if addresses is not None:
        slot, kernels = worker.slot, worker.kernels
        slot[kernels.S_GEMM], slot[kernels.D_GEMM], slot[kernels.WIDE] = addresses[0], addresses[1], int(addresses[2])
        worker.openblas = cpu_mkl.cblas("s") is None


def _worker() -> _Worker | None:
    """The running worker, started on first use; None where the hot hand-off is off here."""
    worker = _STATE["worker"]
    if worker is not None or _STATE["failed"]:
        return worker
    with _START:
        if _STATE["worker"] is None and not _STATE["failed"]:
            _STATE["worker"] = _start()
            _STATE["failed"] = _STATE["worker"] is None
    return _STATE["worker"]


def _start() -> _Worker | None:
    if platform.machine().lower() not in ("x86_64", "amd64") or cpu_blas._controls() is None:
        return None
    addresses = _cblas_addresses()
    if addresses is None:
        return None
    kernels = cpu_kernels.get("hot_worker")  # None without numba or with EMBER_CPU_KERNELS=numpy
    if kernels is None:
        return None
    try:
        libc = ctypes.CDLL(None)
        yield_address = ctypes.cast(libc.sched_yield, ctypes.c_void_p).value
        idle, stopped = kernels.new_slot(), kernels.new_slot()
        stopped[kernels.STOP] = 1
        # compile (or load from numba's cache) here, once, before any thread relies on them
        kernels.split(idle), kernels.own_and_finish(idle), kernels.serve(stopped), kernels.now()
    except Exception:  # noqa: BLE001 - no libc symbol, or numba cannot compile these here: today's path
        return None
    worker = _Worker(kernels, *addresses, yield_address)
    atexit.register(worker.stop)
    return worker


def available() -> bool:
    """Whether products may be split with the hot worker: ``EMBER_HOT_WORKER`` not ``0``, more than one ember
    thread, NumPy's OpenBLAS reachable and its thread count held by ember (``cpu_blas.owns_gemm_threads``)."""
    if not _config.HOT_WORKER or cpu_threads.num_threads() <= 1 or not cpu_blas.owns_gemm_threads():
        return False
    return _worker() is not None


def _forget() -> None:
    """After fork: the child has the worker object but not its thread; start a new one there on first use."""
    global _START
    _STATE["worker"], _STATE["failed"], _START = None, False, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


# After two splits in a row whose second part the caller had to take back, products run whole on the calling thread
# for this long (two halves in a row on one thread cost ~20% more than the whole product).
PAUSE_SECONDS, MAX_PAUSE_SECONDS = 0.02, 1.0
# A product this large is split even when the worker sleeps: the caller's half (~120 us and up at one thread's ~67G
# multiply-adds a second) outlasts the worker's wake-up (40-80 us on this project's VM).
WAKE_MACS = 1 << 24

# Products below this many multiply-adds stay on one thread: the hand-off (~5-8 us from Python) costs what the
# second core saves. Measured per shape (docs/cpu-performance.md, "hot20").
MIN_MACS = 1 << 21
# OpenBLAS multiplies products of at most 100^3 multiply-adds with its "small matrix" kernels, which sum in another
# order than its blocked kernels: a part at or below this size would round differently from the whole product
# (measured: 211 of 2607 splits of 0.2-2.7M-MAC products differed in some bits, none with both parts above it).
SMALL_KERNEL_MACS = 100 ** 3
MIN_SPLIT = 16  # rows (or columns) the split axis needs (16 x 1000 x 100: 36 -> 22 us split 8 + 8)


def worth_it(m: int, k: int, n: int, axis: int | None = None) -> bool:
    """Whether an ``(m, k) @ (k, n)`` product gains from ``split_gemm_into`` (split along ``axis``, default rows
    when M >= N): enough multiply-adds and a split axis long enough for two parts; never with
    ``EMBER_HOT_WORKER=0`` or inside a chunk of ``cpu_threads.parallel_for`` (both cores are busy there).

    Example:
        >>> worth_it(64, 1000, 100), worth_it(256, 784, 512), worth_it(256, 512, 10), worth_it(64, 64, 64)
        (True, True, False, False)
    """
    if not _config.HOT_WORKER or _config.CPU_KERNELS != "numba" or getattr(cpu_threads._LOCAL, "inside", False):
        return False
    axis = (0 if m >= n else 1) if axis is None else axis
    total = m if axis == 0 else n
    part = min(cut(total), total - cut(total)) * k * (n if axis == 0 else m)
    return m * k * n >= MIN_MACS and total >= MIN_SPLIT and part > SMALL_KERNEL_MACS


def cut(total: int) -> int:
    """Where a block of ``total`` rows or columns is cut in two: near the middle, on a multiple of 16 (OpenBLAS's
    AVX-512 tiles are 16 rows of float32) when that leaves both parts at least 16.

    Example:
        >>> cut(64), cut(100), cut(53), cut(7)
        (32, 48, 26, 3)
    """
    half = total // 2
    aligned = (total + 16) // 32 * 16  # the multiple of 16 nearest the middle
    return aligned if aligned >= 16 and 0.4 * total <= aligned <= 0.6 * total else half


def _ready(worker: _Worker, macs: int = 0) -> bool:
    """Whether to split a product of ``macs`` multiply-adds now. Paused (``split_gemm_into``): no, and the worker is
    not woken. Asleep: woken; a product of ``WAKE_MACS`` or more is split anyway (the caller's half outlasts the
    wake-up, so the worker still takes its part), a smaller one runs whole on the caller (two halves in a row on
    one thread cost ~20% more than the whole: OpenBLAS is less efficient on half the rows). ``macs`` 0 (a job of
    unknown size, ``split_call_into``): never split while the worker sleeps."""
    if not worker.slot[worker.kernels.ASLEEP] and worker.paused_until == 0.0:
        return True
    if worker.paused_until > time.perf_counter():
        return False
    worker.paused_until = 0.0
    if worker.slot[worker.kernels.ASLEEP]:
        worker.wake.set()
        return macs >= WAKE_MACS
    return True


def ready(macs: int) -> bool:
    """``_ready`` for callers that allocate before splitting (``cpu_blas_gemm.split_gemm``): False when the hot
    worker is off, paused, or asleep (then woken) for a product under ``WAKE_MACS``, so nothing is allocated for a
    split that will not happen."""
    worker = _STATE["worker"] or _worker()
    return worker is not None and _ready(worker, macs)


def split_gemm_into(a: Any, b: Any, out: Any, beta: int = 0, axis: int | None = None, force: bool = False) -> bool:
    """``out = a @ b`` (``+ out`` when ``beta`` is 1), ``a`` (M, K) and ``b`` (K, N) float32 or float64 matrices BLAS
    reads in place, ``out`` a C-contiguous (M, N) array of their dtype, split in two: one part on the calling
    thread, the other on the hot worker, along rows (``axis`` 0) or columns (1; default: rows when M >= N). Each
    part is one BLAS call with the whole sum K (the parts' layouts and addresses are read natively,
    ``cpu_hot_kernels.split_gemm``). The caller holds NumPy's OpenBLAS to one thread meanwhile when the parts call
    it (``cpu_blas.single_threaded_blas``; not with MKL's sequential layer). False, with nothing computed, where the
    worker is off or busy (another thread's product in flight), the operands do not fit, or a part would have at most
    ``SMALL_KERNEL_MACS`` multiply-adds (its bits could differ from the whole product's): then multiply another way.
    Also False while the worker sleeps (it is woken for the next product; products of ``WAKE_MACS`` or more are split
    anyway) and for ``PAUSE_SECONDS`` after two jobs
    in a row that the worker did not start before the caller finished its part (it is not getting a core: a
    loaded machine), unless ``force`` (tests)."""
    dtype = a.dtype
    if dtype != b.dtype or dtype != out.dtype or dtype.char not in "fd" or not dtype.isnative \
            or not out.flags.c_contiguous:  # (a byte-swapped array: BLAS reads native floats)
        return False
    m, k = a.shape
    n = b.shape[1]
    axis = (0 if m >= n else 1) if axis is None else axis
    total = m if axis == 0 else n
    c0 = cut(total)
    if min(c0, total - c0) * k * (n if axis == 0 else m) <= SMALL_KERNEL_MACS:  # a part would round differently
        return False
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray or out.__class__ is not np.ndarray:
        return False
    worker = _STATE["worker"] or _worker()
    if worker is None or not _config.HOT_WORKER or _config.CPU_KERNELS != "numba":
        return False
    if not force and not _ready(worker, m * k * n):
        return False
    return run_split(worker, a, b, out, beta, axis, c0)


def run_split(worker: _Worker, a: Any, b: Any, out: Any, beta: int, axis: int, c0: int) -> bool:
    """``split_gemm_into``'s job once its checks passed (``cpu_gemm_plan`` makes them once per product signature):
    ``out = a @ b (+ out)`` cut at ``c0`` along ``axis``, one part on ``worker``; False, nothing computed, where the
    worker is busy or BLAS cannot read an operand in place."""
    if not worker.busy.acquire(blocking=False):
        return False
    try:
        kernels, slot = worker.kernels, worker.slot
        taken_back = slot[kernels.TAKEN_BACK]
        # (NumPy's OpenBLAS held to one thread meanwhile, when the parts call it: its own workers never wake; MKL's
        # sequential layer, ember's provider on Intel CPUs since mkl20, has none)
        hold = single_threaded_blas() if worker.openblas else None  # (MKL: no context, whose calls cost ~1 us)
        if hold is not None:
            hold.__enter__()
        try:
            code = kernels.split_gemm(slot, a, b, out, beta, axis, c0)  # layouts, addresses, post, our part, wait
            if code == 1:  # the worker sleeps: wake it, then run our part (it takes the job, or we take it back)
                try:
                    worker.wake.set()
                finally:
                    kernels.own_and_finish(slot)  # never leave with the job posted: a, b and out must outlive it
        finally:
            if hold is not None:
                hold.__exit__(None, None, None)
        if code == -2:  # BLAS cannot read an operand in place: nothing posted
            return False
        if slot[kernels.TAKEN_BACK] == taken_back:
            worker.misses, worker.pause = 0, PAUSE_SECONDS
        else:  # the worker did not start in time (a loaded machine): after two in a row, one thread for a while,
            worker.misses += 1  # twice as long after each pause that ends the same way (up to MAX_PAUSE_SECONDS)
            if worker.misses >= 2:
                worker.paused_until, worker.misses = time.perf_counter() + worker.pause, 0
                worker.pause = min(2 * worker.pause, MAX_PAUSE_SECONDS)
        return code >= 0
    finally:
        worker.busy.release()


def split_call_into(address: int, own: tuple, other: tuple, wake_split: bool = False) -> bool:
    """(w2jax20) Run the C function ``void f(int64 start, int64 stop, int64 args)`` at ``address`` twice at once:
    ``own`` = (start, stop, args) on the calling thread, ``other`` on the worker (taken back and run here if the
    worker has not started it), as ``split_gemm_into`` runs a product's two parts. False, nothing run, where the
    worker is off or busy. What ``args`` points to must outlive the call (the caller holds it). ``wake_split``
    (mnist22: parts longer than a wake-up, ~0.1 ms and up): split even while the worker sleeps, as a product of
    ``WAKE_MACS``; it is woken and takes its part when up, or the caller takes it back."""
    if not _config.HOT_WORKER or _config.CPU_KERNELS != "numba" or getattr(cpu_threads._LOCAL, "inside", False):
        return False
    worker = _STATE["worker"] or _worker()
    if worker is None or not _ready(worker, WAKE_MACS if wake_split else 0):  # asleep (woken) or paused: run it whole
        return False
    if not worker.busy.acquire(blocking=False):
        return False
    try:
        kernels, slot = worker.kernels, worker.slot
        pad = (0,) * (kernels.JOB_WORDS - 5)
        slot[kernels.JOB:kernels.OWN + kernels.JOB_WORDS] = (kernels.CALL, address, *other) + pad + \
            (kernels.CALL, address, *own) + pad
        code = kernels.split(slot)
        if code == 1:  # the worker sleeps: wake it, then run our part (it takes the job, or we take it back)
            try:
                worker.wake.set()
            finally:
                kernels.own_and_finish(slot)  # never leave with the job posted: args must outlive it
        return code >= 0
    finally:
        worker.busy.release()


def split_native(fn: Any, *args: Any) -> bool:
    """(w1hot21) ``fn(slot, *args)``, a numba function that writes both parts of a job into the slot and runs
    ``split`` on it natively (``cpu_hot_ufunc_kernels.split_pass``: an eager elementwise pass in two halves), with
    ``split_call_into``'s rules and none of its Python per call: False, nothing run, where the worker is off, busy,
    paused, asleep (then woken for the next caller) or this is a chunk of ember's pool."""
    worker = _STATE["worker"]
    if worker is None or not _ready(worker, 0) or getattr(cpu_threads._LOCAL, "inside", False):
        return False
    if not worker.busy.acquire(blocking=False):
        return False
    try:
        code = fn(worker.slot, *args)
        if code == 1:  # the worker sleeps: wake it, then run our part (it takes the job, or we take it back)
            try:
                worker.wake.set()
            finally:
                worker.kernels.own_and_finish(worker.slot)  # never leave with the job posted
        return code >= 0
    finally:
        worker.busy.release()
