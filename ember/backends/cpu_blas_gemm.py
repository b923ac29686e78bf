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

from ember.backends import cpu_blas
from ember.backends.cpu_threads import num_threads, parallel_for

# A product of this many multiply-adds or more is split over ember's threads by ``split_gemm`` (each part one
# BLAS call on one BLAS thread); below it BLAS's own threads take it (cpu_gemm_choice.MIN_MACS_SPLIT's reasoning).
SPLIT_MACS = 1 << 23

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_FUNCS: dict[str, Any] = {}
# Output elements from which the bias fill is split over ember's threads (a hand-off costs ~20-30 us).
SPLIT_FILL = 1 << 20


def _cblas(kind: str) -> Any:
    """``cblas_sgemm`` (kind "s") or ``cblas_dgemm`` ("d") of the OpenBLAS NumPy loaded, or None."""
    if kind not in _FUNCS:
        found = None
        for path in cpu_blas._loaded_openblas():
            try:
                lib = ctypes.CDLL(path)  # (CDLL releases the GIL during the call)
            except OSError:
                continue
            for name, integer in ((f"scipy_cblas_{kind}gemm64_", ctypes.c_int64), (f"cblas_{kind}gemm64_", ctypes.c_int64),
                                  (f"scipy_cblas_{kind}gemm", ctypes.c_int), (f"cblas_{kind}gemm", ctypes.c_int)):
                fn = getattr(lib, name, None)
                if fn is not None:
                    real = ctypes.c_float if kind == "s" else ctypes.c_double
                    fn.restype = None
                    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer, real,
                                   ctypes.c_void_p, integer, ctypes.c_void_p, integer, real, ctypes.c_void_p, integer]
                    found = fn
                    break
            if found is not None:
                break
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


def split_gemm(a: Any, b: Any, bias: Any = None) -> Any:
    """``a @ b`` (``+ bias``, added as in :func:`addmm`) as one BLAS call per ember thread, each on its own block
    of rows of ``a`` (or of columns of ``b`` when ``b`` is the wider), with NumPy's BLAS held to one thread:
    OpenBLAS's own workers are never woken, so none spins afterwards on the core ember's threads need for the
    elementwise passes between the GEMMs (a GPT step at two threads burned ~45% more CPU than on one). None when
    ember does not hold BLAS's threads here (``cpu_blas.owns_gemm_threads()``: OpenBLAS found and
    ``EMBER_BLAS_SPLIT`` not ``0``), with one thread, for products below ``SPLIT_MACS``, or for operands ``addmm``
    declines; the caller then multiplies on one BLAS thread (``cpu_blas.small_gemm``). Every element is one BLAS
    call's sum over all of K."""
    kind = _kind(a, b, bias)
    if kind is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    if m * k * n < SPLIT_MACS or num_threads() <= 1 or not cpu_blas.owns_gemm_threads():
        return None
    fa, fb = _operand(a), _operand(b)
    gemm = _cblas(kind) if fa is not None and fb is not None else None
    if gemm is None or (bias is not None and bias.shape[0] != n):
        return None
    out = numpy.empty((m, n), a.dtype)
    item = a.itemsize
    beta = 0.0 if bias is None else 1.0
    if m >= n:  # blocks of rows: A's rows and C's rows move together
        row_step = a.strides[0] // item

        def rows(start: int, stop: int) -> None:
            if bias is not None:
                numpy.copyto(out[start:stop], bias)
            gemm(_ROW_MAJOR, fa[0], fb[0], stop - start, n, k, 1.0, a.ctypes.data + start * row_step * item, fa[1],
                 b.ctypes.data, fb[1], beta, out.ctypes.data + start * n * item, n)
        _split(rows, m)
    else:  # blocks of columns: B's columns and C's columns move together
        col_step = b.strides[1] // item

        def cols(start: int, stop: int) -> None:
            if bias is not None:
                numpy.copyto(out[:, start:stop], bias[start:stop])
            gemm(_ROW_MAJOR, fa[0], fb[0], m, stop - start, k, 1.0, a.ctypes.data, fa[1],
                 b.ctypes.data + start * col_step * item, fb[1], beta, out.ctypes.data + start * item, n)
        _split(cols, n)
    return out


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
        numpy.matmul(a[start:stop], b[start:stop], out=out[start:stop])

    with cpu_blas.single_threaded_blas():
        parallel_for(block, a.shape[0], 1)
    return out
