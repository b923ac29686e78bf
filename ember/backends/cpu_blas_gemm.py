"""``a @ b + bias`` as one BLAS call: the output starts as the bias rows and the GEMM adds into it (``beta = 1``).

NumPy's ``matmul`` has no ``beta``: ``linear`` computed ``x @ W.T`` and then added the bias in a second pass
over the output (read and write), while OpenBLAS had already swept the output once to zero it (its GEMM driver
scales C by ``beta`` before accumulating, and ``beta = 0`` is a zero fill). Calling NumPy's own OpenBLAS
through ``cblas_sgemm``/``cblas_dgemm`` with the output filled with the bias and ``beta = 1`` replaces that zero
fill with the bias fill and drops the extra pass: what PyTorch's ``addmm`` does. The bias then enters the sum
first instead of last (torch's order too), so results differ from ``matmul + bias`` in rounding, by the
float32 error of the product. The fill of a large output runs on ember's threads (one contiguous block of
rows each), as OpenBLAS's own zero fill is spread over its threads.

Used for NumPy float32/float64 operands whose matrices BLAS reads in place (rows or columns contiguous);
``addmm`` returns None for anything else (no OpenBLAS found, other dtypes, odd strides), and the caller
multiplies and adds as before.

Example:
    >>> import numpy as np
    >>> out = addmm(np.ones((4, 3), np.float32), np.ones((3, 2), np.float32), np.arange(2, dtype=np.float32))
    >>> out is None or out.tolist() == [[3.0, 4.0]] * 4
    True
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy

from ember.backends import cpu_blas, cpu_hot_worker, cpu_mkl
from ember.backends.cpu_threads import num_threads, parallel_for

# A product of this many multiply-adds or more is split over ember's threads by ``split_gemm`` (each part one
# BLAS call on one BLAS thread); below it BLAS's own threads take it (cpu_gemm_choice.MIN_MACS_SPLIT's reasoning).
SPLIT_MACS = 1 << 23
# Products from ``cpu_hot_worker.MIN_MACS`` (2M) multiply-adds, where ``cpu_hot_worker.worth_it`` says the shape
# gains, are split in two with the hot worker (no sleeping thread to wake); with two threads it takes the large
# products too (the pool's hand-off costs 40-80 us on this project's VM, the hot worker's a few).

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_FUNCS: dict[str, Any] = {}
# Output elements from which the bias fill is split over ember's threads (a hand-off costs ~20-30 us).
SPLIT_FILL = 1 << 20


def _cblas(kind: str) -> Any:
    """``cblas_sgemm`` (kind "s") or ``cblas_dgemm`` ("d") of the OpenBLAS NumPy loaded, or None; Intel MKL's
    where it is ember's provider (``cpu_mkl``, mkl20)."""
    mkl = cpu_mkl.cblas(kind)
    if mkl is not None:
        return mkl
    if kind not in _FUNCS:
        found = None
        located = cpu_blas.openblas_cblas(f"{kind}gemm")
        if located is not None:
            (found,), integer = located
            real = ctypes.c_float if kind == "s" else ctypes.c_double
            found.restype = None
            found.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer, real,
                              ctypes.c_void_p, integer, ctypes.c_void_p, integer, real, ctypes.c_void_p, integer]
        _FUNCS[kind] = found
    return _FUNCS[kind]


def _operand(m: Any) -> tuple[int, int] | None:
    """(transpose flag, leading dimension) of a matrix BLAS reads in place in row-major terms, or None."""
    item = m.itemsize
    rows, cols = m.shape
    s_row, s_col = m.strides
    if (s_col == item or cols == 1) and s_row % item == 0 and s_row // item >= max(cols, 1):
        return _NO_TRANS, s_row // item
    if (s_row == item or rows == 1) and s_col % item == 0 and s_col // item >= max(rows, 1):
        return _TRANS, s_col // item
    return None


def addmm(a: Any, b: Any, bias: Any) -> Any:
    """``a @ b + bias`` (``a`` (M, K), ``b`` (K, N), ``bias`` (N,), one float dtype) by one BLAS call into an
    output filled with the bias, or None when that is not possible here (then compute it another way)."""
    dtype = a.dtype
    if dtype != b.dtype or dtype != bias.dtype or bias.ndim != 1 or a.ndim != 2 or b.ndim != 2:
        return None
    kind = "s" if dtype == numpy.float32 else "d" if dtype == numpy.float64 else None
    if kind is None or a.__class__ is not numpy.ndarray or b.__class__ is not numpy.ndarray:
        return None
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0 or k == 0 or bias.shape[0] != n:
        return None
    fa, fb = _operand(a), _operand(b)
    gemm = _cblas(kind) if fa is not None and fb is not None else None
    if gemm is None:
        return None
    out = numpy.empty((m, n), dtype)
    if m * n >= SPLIT_FILL and num_threads() > 1:
        parallel_for(lambda start, stop: numpy.copyto(out[start:stop], bias), m, max(1, SPLIT_FILL // (2 * n)))
    else:
        numpy.copyto(out, bias)
    gemm(_ROW_MAJOR, fa[0], fb[0], m, n, k, 1.0, a.ctypes.data, fa[1], b.ctypes.data, fb[1], 1.0, out.ctypes.data, n)
    return out


def _kind(a: Any, b: Any, bias: Any) -> str | None:
    dtype = a.dtype
    if a.__class__ is not numpy.ndarray or b.__class__ is not numpy.ndarray or a.ndim != 2 or b.ndim != 2 \
            or b.dtype != dtype or (bias is not None and (bias.dtype != dtype or bias.ndim != 1)):
        return None
    return "s" if dtype == numpy.float32 else "d" if dtype == numpy.float64 else None


# ``split_gemm``'s axis, per product (threads19, docs/cpu-performance.md, "threads19"): rows when M >= N, else
# columns (the operand both threads read whole is then the smaller one). Cutting the sum K instead (each thread's
# part of the sum into its own output, the parts added after) was measured for the weight gradients whose K is
# 2-10x max(M, N): CPU under load 5-15% below the M/N splits in one run and within 3% in others, wall under
# SCHED_FIFO within 4% either way (W4's 256 x 2048 x 256: K 1.52, M 1.55, N 1.51 ms; GPT's head 65 x 4096 x 384:
# K 1.57, N 1.50), a W4 step with it 0.984x (noise-level). Not worth results that depend on the thread count (a K
# split's rounding differs from one thread's; M/N splits give the same bits), so it is off: ``SPLIT_K_RATIO`` = r
# turns it on for sums of r x max(M, N) or longer (``split_gemm(..., axis=2)`` forces it).
SPLIT_K_RATIO = 0


def split_axis(m: int, k: int, n: int) -> int:
    """The axis ``split_gemm`` cuts an ``(m, k) @ (k, n)`` product along: 0 rows (M), 1 columns (N), 2 the sum (K).

    Example:
        >>> split_axis(4096, 384, 1152), split_axis(64, 100, 1000), split_axis(256, 2048, 256)
        (0, 1, 0)
    """
    if SPLIT_K_RATIO and k >= SPLIT_K_RATIO * max(m, n):
        return 2
    return 0 if m >= n else 1


def split_gemm(a: Any, b: Any, bias: Any = None, axis: int | None = None) -> Any:
    """``a @ b`` (``+ bias``, added as in :func:`addmm`) as one BLAS call per ember thread, each on its own block
    of rows of ``a``, of columns of ``b``, or of the sum's ``k`` (``split_axis``; ``axis`` forces one), with NumPy's
    BLAS held to one thread: OpenBLAS's own workers are never woken, so none spins afterwards on the core ember's
    threads need for the elementwise passes between the GEMMs (a GPT step at two threads burned ~45% more CPU than
    on one). None when ember does not hold BLAS's threads here (``cpu_blas.owns_gemm_threads()``: OpenBLAS found
    and ``EMBER_BLAS_SPLIT`` not ``0``), with one thread, for products below ``SPLIT_MACS``, or for operands
    ``addmm`` declines; the caller then multiplies on one BLAS thread (``cpu_blas.small_gemm``). Split by rows or
    columns, every element is one BLAS call's sum over all of K; split along K, the sum of the threads' partial
    sums in thread order (a different rounding, within float32 GEMM error, and the same bits every call).

    Two parts on the hot worker instead (``cpu_hot_worker``, a thread that spins briefly for the next job instead
    of sleeping) for products from 2M multiply-adds that ``cpu_hot_worker.worth_it`` accepts: all such products
    below ``SPLIT_MACS``, and the large ones too with two threads; the pool takes them when the worker is busy."""
    kind = _kind(a, b, bias)
    if kind is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    macs = m * k * n
    threads = num_threads()
    if threads <= 1 or not cpu_blas.owns_gemm_threads():
        return None
    if (macs < SPLIT_MACS or threads == 2) and axis != 2 and cpu_hot_worker.worth_it(m, k, n, axis):
        out = _hot_split(a, b, bias, axis)  # None: the worker is off or busy (another thread's product)
        if out is not None:
            return out
    if macs < SPLIT_MACS:
        return None
    fa, fb = _operand(a), _operand(b)
    gemm = _cblas(kind) if fa is not None and fb is not None else None
    if gemm is None or (bias is not None and bias.shape[0] != n):
        return None
    out = numpy.empty((m, n), a.dtype)
    item = a.itemsize
    beta = 0.0 if bias is None else 1.0
    axis = split_axis(m, k, n) if axis is None else axis
    if axis == 0:  # blocks of rows: A's rows and C's rows move together
        row_step = a.strides[0] // item

        def rows(start: int, stop: int) -> None:
            if bias is not None:
                numpy.copyto(out[start:stop], bias)
            gemm(_ROW_MAJOR, fa[0], fb[0], stop - start, n, k, 1.0, a.ctypes.data + start * row_step * item, fa[1],
                 b.ctypes.data, fb[1], beta, out.ctypes.data + start * n * item, n)
        _split(rows, m)
    elif axis == 1:  # blocks of columns: B's columns and C's columns move together
        col_step = b.strides[1] // item

        def cols(start: int, stop: int) -> None:
            if bias is not None:
                numpy.copyto(out[:, start:stop], bias[start:stop])
            gemm(_ROW_MAJOR, fa[0], fb[0], m, stop - start, k, 1.0, a.ctypes.data, fa[1],
                 b.ctypes.data + start * col_step * item, fb[1], beta, out.ctypes.data + start * item, n)
        _split(cols, n)
    else:
        _split_k(gemm, a, b, fa, fb, bias, out)
    return out


def _hot_split(a: Any, b: Any, bias: Any, axis: int | None) -> Any:
    """``a @ b (+ bias)`` in two parts, one on the hot worker (``cpu_hot_worker``), or None (worker off or busy)."""
    n = b.shape[1]
    if (bias is not None and bias.shape[0] != n) or not cpu_hot_worker.ready(a.shape[0] * a.shape[1] * n):
        return None
    out = numpy.empty((a.shape[0], n), a.dtype)
    if bias is not None:
        numpy.copyto(out, bias)
    return out if cpu_hot_worker.split_gemm_into(a, b, out, 0 if bias is None else 1, axis, force=True) else None


def _split_k(gemm: Any, a: Any, b: Any, fa: tuple, fb: tuple, bias: Any, out: Any) -> None:
    """``out = a @ b (+ bias)`` with the sum cut into one block of ``k`` per thread: the first block's products
    go into ``out`` (after the bias, ``beta = 1``), each other block's into its own buffer, added to ``out`` in
    block order afterwards (by blocks of rows on ember's threads when ``out`` is large)."""
    m, k = a.shape
    n = b.shape[1]
    item = a.itemsize
    a_step, b_step = a.strides[1] // item, b.strides[0] // item  # elements from one k to the next
    partials: dict[int, Any] = {}

    def block(start: int, stop: int) -> None:
        if start == 0:
            target, beta = out, 0.0 if bias is None else 1.0
            if bias is not None:
                numpy.copyto(out, bias)
        else:
            target, beta = numpy.empty((m, n), a.dtype), 0.0
            partials[start] = target
        gemm(_ROW_MAJOR, fa[0], fb[0], m, n, stop - start, 1.0, a.ctypes.data + start * a_step * item, fa[1],
             b.ctypes.data + start * b_step * item, fb[1], beta, target.ctypes.data, n)
    _split(block, k)
    if not partials:
        return
    ordered = [partials[start] for start in sorted(partials)]

    def add(start: int, stop: int) -> None:
        for part in ordered:
            numpy.add(out[start:stop], part[start:stop], out=out[start:stop])
    parallel_for(add, m, max(1, SPLIT_FILL // (2 * n)))


def _split(fn: Any, total: int) -> None:
    """``fn`` over ``range(total)`` in one block per ember thread, NumPy's BLAS held to one thread."""
    with cpu_blas.single_threaded_blas():
        parallel_for(fn, total, 16)


def split_stack(a: Any, b: Any) -> Any:
    """``numpy.matmul(a, b)`` of two stacks with the same batch shape (attention's per-head products in the NumPy
    composite) split over ember's threads along the first batch axis, each block one ``matmul`` on one BLAS
    thread; None below ``SPLIT_MACS`` multiply-adds in all, with one thread, a first batch axis of 1, broadcast
    batch dims, or where ember does not hold BLAS's threads (then ``matmul`` runs on one BLAS thread).

    Example:
        >>> a = numpy.ones((4, 8, 8), numpy.float32)
        >>> out = split_stack(a, a)
        >>> out is None or out.shape == (4, 8, 8)
        True
    """
    if a.ndim < 3 or a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2] or a.shape[0] < 2 or a.dtype != b.dtype \
            or a.__class__ is not numpy.ndarray or b.__class__ is not numpy.ndarray or a.dtype.kind not in "fc":
        return None
    macs = a.shape[-2] * a.shape[-1] * b.shape[-1]
    for size in a.shape[:-2]:
        macs *= size
    if macs < SPLIT_MACS or num_threads() <= 1 or not cpu_blas.owns_gemm_threads():
        return None
    out = numpy.empty(a.shape[:-1] + b.shape[-1:], a.dtype)

    def block(start: int, stop: int) -> None:
        if cpu_mkl.matmul(a[start:stop], b[start:stop], out[start:stop]) is None:  # MKL's batch GEMM where it is
            numpy.matmul(a[start:stop], b[start:stop], out=out[start:stop])  # ember's BLAS (mkl20)

    with cpu_blas.single_threaded_blas():
        parallel_for(block, a.shape[0], 1)
    return out
