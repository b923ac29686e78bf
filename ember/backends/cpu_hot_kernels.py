"""The hot worker's native side (numba, ``nogil``): a job slot, its atomics, and GEMM calls by address.

``cpu_hot_worker`` imports this lazily (numba compiles on first use and caches). The job slot is one int64 NumPy
array shared by the calling thread and the worker thread; its flags are read and written with LLVM atomics
(``seq_cst``: on x86 plain loads, ``xchg``/``lock cmpxchg`` stores), so neither the compiler nor the CPU moves a
job's parameters past the flag that publishes them. BLAS is called through its C address (``cblas_sgemm`` /
``cblas_dgemm`` of the OpenBLAS NumPy loaded, found by ``cpu_blas_gemm._cblas``), held in the slot: the compiled
code embeds no address, so numba's cache stays valid across processes. The spin calls ``sched_yield`` (libc, by
address too) on every turn, so a waiting thread gives its core to any other runnable thread at once.

Example:
    >>> import numpy as np
    >>> slot = new_slot()
    >>> int(slot[STATE]) == IDLE
    True
"""
from __future__ import annotations

import sys
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

# The slot's words. Flags first, then two GEMM descriptions (the worker's part, the caller's part) of JOB_WORDS
# words each: kind (0 float32, 1 float64), transpose A, transpose B, M, N, K, A, lda, B, ldb, beta (0 or 1), C, ldc.
STATE, ASLEEP, STOP, S_GEMM, D_GEMM, WIDE, YIELD, BUDGET, JOBS, TAKEN_BACK = range(10)
JOB, OWN, JOB_WORDS = 16, 29, 13  # OWN = JOB + JOB_WORDS: one slice assignment writes both
# w1hot21: words a CALL job's ``args`` may point to while the job is in flight (an elementwise pass's operation and
# addresses, ember/backends/cpu_hot_ufunc_kernels.py), on their own cache lines, apart from the flags the spin reads
ARGS, ARGS_WORDS = 48, 16
SLOT_WORDS = 64
IDLE, POSTED, RUNNING, DONE = 0, 1, 2, 3
# w2jax20: a job's kind word CALL runs ``void f(int64 start, int64 stop, int64 args)`` at the address in the next word
# with the three words after it (a fused Numba loop's range, ember/graph/passes/fuse_numba_chunks.py)
CALL = 2
MAX_TURNS = 200_000  # spin turns without a job before sleeping whatever the clock says (~20-200 ms)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def new_slot() -> np.ndarray:
    """A zeroed job slot (state ``IDLE``)."""
    return np.zeros(SLOT_WORDS, np.int64)


def _pointer(context, builder, aryty, ary, index):
    """Address of ``ary[index]`` (a 1-D contiguous int64 array; no bounds check: the indices are constants)."""
    arr = context.make_array(aryty)(context, builder, ary)
    return builder.gep(arr.data, [index])


@intrinsic
def load(typingctx, ary, index):
    """``ary[index]`` as a sequentially consistent atomic load (never hoisted out of a loop)."""
    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1])
        return builder.load_atomic(ptr, "seq_cst", 8)
    return types.int64(ary, index), codegen


@intrinsic
def store(typingctx, ary, index, value):
    """``ary[index] = value`` as a sequentially consistent atomic store (earlier writes become visible first)."""
    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1])
        value = context.cast(builder, args[2], sig.args[2], types.int64)
        builder.store_atomic(value, ptr, "seq_cst", 8)
        return context.get_dummy_value()
    return types.none(ary, index, value), codegen


@intrinsic
def swap_if(typingctx, ary, index, expected, value):
    """Atomically set ``ary[index] = value`` if it holds ``expected``; whether it did (compare-and-swap)."""
    def codegen(context, builder, sig, args):
        ptr = _pointer(context, builder, sig.args[0], args[0], args[1])
        old = context.cast(builder, args[2], sig.args[2], types.int64)
        new = context.cast(builder, args[3], sig.args[3], types.int64)
        pair = builder.cmpxchg(ptr, old, new, "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)
    return types.boolean(ary, index, expected, value), codegen


@intrinsic
def cycles(typingctx):
    """The CPU's cycle counter (``rdtsc`` on x86): a clock for the spin's budget without a system call."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


@intrinsic
def call_void(typingctx, address):
    """Call the C function ``int f(void)`` at ``address`` (``sched_yield``), ignoring its result."""
    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.IntType(32), [])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), [])
        return context.get_dummy_value()
    return types.none(address), codegen


@intrinsic
def call_gemm(typingctx, address, order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """Call the cblas GEMM at ``address`` with these arguments, passed with the C types of their numba types
    (int32 or int64 sizes, float32 or float64 scalars, pointers as 64-bit integers)."""
    arguments = (order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, sig, args):
        fnty = ir.FunctionType(ir.VoidType(), [context.get_value_type(t) for t in sig.args[1:]])
        builder.call(builder.inttoptr(args[0], fnty.as_pointer()), list(args[1:]))
        return context.get_dummy_value()
    return types.none(address, *arguments), codegen


@intrinsic
def call_range(typingctx, address, start, stop, args):
    """Call the C function ``void f(int64 start, int64 stop, int64 args)`` at ``address`` (a fused loop's range)."""
    def codegen(context, builder, sig, values):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(ir.VoidType(), [i64, i64, i64])
        builder.call(builder.inttoptr(values[0], fnty.as_pointer()), list(values[1:]))
        return context.get_dummy_value()
    return types.none(address, start, stop, args), codegen


@numba.njit(nogil=True, cache=True)
def now():
    """``cycles()`` for Python (the budget's calibration)."""
    return cycles()


@numba.njit(nogil=True, cache=True)
def run_gemm(slot, base):
    """The GEMM described at ``slot[base:base + JOB_WORDS]`` by one call to BLAS (or, kind ``CALL``, a loop's range)."""
    if slot[base] == CALL:
        call_range(slot[base + 1], slot[base + 2], slot[base + 3], slot[base + 4])
        return
    kind, ta, tb = slot[base], np.int32(slot[base + 1]), np.int32(slot[base + 2])
    m, n, k = slot[base + 3], slot[base + 4], slot[base + 5]
    a, lda, b, ldb = slot[base + 6], slot[base + 7], slot[base + 8], slot[base + 9]
    beta, c, ldc = slot[base + 10], slot[base + 11], slot[base + 12]
    if m <= 0 or n <= 0:
        return
    order = np.int32(ROW_MAJOR)
    if slot[WIDE] != 0:
        if kind == 0:
            call_gemm(slot[S_GEMM], order, ta, tb, m, n, k, np.float32(1.0), a, lda, b, ldb, np.float32(beta), c, ldc)
        else:
            call_gemm(slot[D_GEMM], order, ta, tb, m, n, k, 1.0, a, lda, b, ldb, np.float64(beta), c, ldc)
    else:
        m32, n32, k32, lda32, ldb32, ldc32 = np.int32(m), np.int32(n), np.int32(k), np.int32(lda), np.int32(ldb), \
            np.int32(ldc)
        if kind == 0:
            call_gemm(slot[S_GEMM], order, ta, tb, m32, n32, k32, np.float32(1.0), a, lda32, b, ldb32,
                      np.float32(beta), c, ldc32)
        else:
            call_gemm(slot[D_GEMM], order, ta, tb, m32, n32, k32, 1.0, a, lda32, b, ldb32, np.float64(beta), c,
                      ldc32)


@numba.njit(nogil=True, cache=True)
def serve(slot):
    """The worker's spin: take and run posted jobs until ``slot[BUDGET]`` cycles pass with none (then mark the
    worker asleep and return 0: the Python side sleeps on an event) or ``slot[STOP]`` is set (return 1)."""
    store(slot, ASLEEP, 0)
    budget = slot[BUDGET]
    since = cycles()
    turns = 0
    while True:
        turns += 1
        if load(slot, STOP) != 0:
            store(slot, ASLEEP, 1)
            return 1
        if load(slot, STATE) == POSTED and swap_if(slot, STATE, POSTED, RUNNING):
            run_gemm(slot, JOB)
            slot[JOBS] += 1
            store(slot, STATE, DONE)
            since = cycles()
            turns = 0
            continue
        # The cycle counter bounds the spin in time; the turn count bounds it even if the counter misbehaves
        # (a VM migrating the thread between unsynchronized counters): each turn is a system call, >= ~0.1 us.
        if abs(cycles() - since) > budget or turns > MAX_TURNS:
            store(slot, ASLEEP, 1)
            # A caller that posted before it could see ASLEEP will not wake us: look once more (Dekker's order:
            # both sides write their flag, then read the other's, all sequentially consistent).
            if load(slot, STATE) == POSTED:
                store(slot, ASLEEP, 0)
                continue
            return 0
        call_void(slot[YIELD])


@numba.njit(nogil=True, cache=True)
def post(slot):
    """Publish the job written at ``slot[JOB:]``: 1 if the worker must be woken first (it sleeps), 0 if it
    spins, -1 if a job is in flight (nothing posted: the caller computes everything itself)."""
    if not swap_if(slot, STATE, IDLE, POSTED):
        return -1
    return 1 if load(slot, ASLEEP) != 0 else 0


@numba.njit(nogil=True, cache=True)
def own_and_finish(slot):
    """Run the caller's part (``slot[OWN:]``), then wait for the worker's: done, or not yet taken (the worker is
    asleep or descheduled), then taken back and run here. Returns 1 if taken back. Leaves the slot ``IDLE``."""
    run_gemm(slot, OWN)
    while True:
        state = load(slot, STATE)
        if state == DONE:
            store(slot, STATE, IDLE)
            return 0
        if state == POSTED and swap_if(slot, STATE, POSTED, IDLE):
            run_gemm(slot, JOB)
            slot[TAKEN_BACK] += 1
            return 1
        if state == IDLE:  # nothing posted (not reached through ``split``)
            return 0
        call_void(slot[YIELD])


@numba.njit(nogil=True, cache=True)
def split(slot):
    """``post`` then, when the worker spins, ``own_and_finish``: the whole product in one native call. Returns
    ``post``'s code (1: the caller wakes the worker, then calls ``own_and_finish`` itself; -1: nothing posted)."""
    code = post(slot)
    if code == 0:
        own_and_finish(slot)
    return code


@numba.njit(nogil=True, cache=True)
def _layout(x):  # pragma: no cover - compiled
    """(transpose flag, leading dimension) of a matrix BLAS reads in place in row-major terms, or (0, 0)
    (``cpu_blas_gemm._operand``'s rule)."""
    item = x.itemsize
    rows, cols = x.shape
    s_row, s_col = x.strides
    if (s_col == item or cols == 1) and s_row % item == 0 and s_row // item >= max(cols, 1):
        return NO_TRANS, s_row // item
    if (s_row == item or rows == 1) and s_col % item == 0 and s_col // item >= max(rows, 1):
        return TRANS, s_col // item
    return 0, 0


@numba.njit(nogil=True, cache=True)
def split_gemm(slot, a, b, out, beta, axis, c0):  # pragma: no cover - compiled
    """(w1hot21) ``out = a @ b (+ out)`` in two parts cut at row (``axis`` 0) or column ``c0``: the parts'
    descriptions written into the slot (the arrays' layouts and addresses read here, not through Python's
    ``ctypes`` objects: ~8 us a product from Python before), then ``split``. -2, nothing posted, where BLAS cannot
    read ``a`` or ``b`` in place; else ``split``'s code."""
    ta, lda = _layout(a)
    tb, ldb = _layout(b)
    if ta == 0 or tb == 0:
        return -2
    item = a.itemsize
    kind = 0 if item == 4 else 1
    m, k = a.shape
    n = b.shape[1]
    pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
    own, job = OWN, JOB
    for base in (own, job):
        slot[base], slot[base + 1], slot[base + 2], slot[base + 5] = kind, ta, tb, k
        slot[base + 6], slot[base + 7], slot[base + 8], slot[base + 9] = pa, lda, pb, ldb
        slot[base + 10], slot[base + 11], slot[base + 12] = beta, pc, n
    if axis == 0:  # rows: A's rows and C's rows move together
        slot[own + 3], slot[own + 4] = c0, n
        slot[job + 3], slot[job + 4] = m - c0, n
        slot[job + 6] = pa + c0 * (lda if ta == NO_TRANS else 1) * item
        slot[job + 11] = pc + c0 * n * item
    else:  # columns: B's columns and C's columns move together
        slot[own + 3], slot[own + 4] = m, c0
        slot[job + 3], slot[job + 4] = m, n - c0
        slot[job + 8] = pb + c0 * (1 if tb == NO_TRANS else ldb) * item
        slot[job + 11] = pc + c0 * item
    return split(slot)


def build() -> dict[str, Any]:
    """For ``cpu_kernels``' table: this module under ``"hot_worker"`` (the worker uses its functions and slot
    layout together)."""
    return {"hot_worker": sys.modules[__name__]}
