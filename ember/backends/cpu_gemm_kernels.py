"""A float32 GEMM for AVX-512 CPUs (numba): ``C = A @ B`` at 200-260 GFLOP/s per core.

Why ember has its own GEMM: NumPy's OpenBLAS picks its kernels by ``OPENBLAS_CORETYPE``, and where that
says ``Haswell`` (this project's VM sets it) an AVX-512 CPU runs AVX2 kernels at ~130 GFLOP/s per core,
while XLA (JAX) and oneDNN (PyTorch) run AVX-512 at ~230. A W2 step (MLP 784-512-10, Adam) is ~85% two
GEMMs, a GPT step ~75%, so no graph pass can close that gap; a GEMM can. ember never changes a user's
``OPENBLAS_CORETYPE``; this kernel is used for float32 products only, on CPUs with AVX-512F, when numba
is installed, for the products ``cpu_gemm_choice`` gives it (by default: when NumPy's OpenBLAS runs no
AVX-512 kernels, the shapes where this kernel measured faster; ``EMBER_GEMM=ember``: every product of 1M+
multiply-adds; ``EMBER_CPU_KERNELS=numpy`` or ``EMBER_GEMM=blas``: none).

How (the textbook register-blocked scheme, written for ember): the micro-kernel keeps a 12 x 32 tile of
``C`` in 24 AVX-512 registers and, for each ``k``, loads 32 values of a row of ``B`` (two vectors) and
multiplies them by 12 broadcast values of a column of ``A`` (24 fused multiply-adds). It is emitted
as LLVM IR through a numba ``intrinsic`` (explicit ``<16 x float>`` vectors and ``llvm.fma``), because
LLVM does not keep a tile of scalar accumulators in vector registers by itself (an earlier attempt with
generated scalar code reached 8-15 GFLOP/s). ``A`` is read in place through its two strides (a
transposed operand costs nothing); ``B`` is read in place when its rows are contiguous and copied into
32-column panels otherwise. The loops over ``k`` blocks (K cut into equal blocks of at most 384), row
blocks of ``A`` (96 rows, in L2) and column panels are a numba driver that takes only addresses and
integers (one compiled signature for every layout; compiled once, then cached on disk). Edges use masked loads and
stores, so any shape works without padding copies.

Products of ``PACKED_MIN_ROWS``+ rows run on ``cpu_gemm_blocked.sgemm_packed`` instead, which also copies A
block by block into a buffer of constant strides and always reads B from panels (why: that module's
docstring; 10-40% faster on GPT's products); a product whose B is at least twice as wide as A is tall runs as
``(B^T A^T)^T``, fewer elements to copy. Both drivers give the same bits.

Results: each element of ``C`` is summed in ``k`` order within the k blocks and the blocks added in
order, so a result does not depend on how the columns were split over threads; the rounding differs
from OpenBLAS's (both are float32 sums of the same products, ~1e-7 relative).

Imported by ``cpu_kernels`` only once numba has imported; ops reach it as the native kernel
``matmul_f32`` (``ember/ops/linalg.py``'s ``gemm_2d``: matmul, linear, matmul_t).

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_kernels import get
    >>> gemm = get("matmul_f32")   # None without numba or AVX-512
    >>> a = np.ones((128, 128), np.float32)
    >>> out = gemm and gemm(a, a.T)  # None as well for products it leaves to BLAS
    >>> out is None or float(out[0, 0]) == 128.0
    True
"""
from __future__ import annotations

from typing import Any, Callable

import llvmlite.binding as llvm
import numba
import numpy as np

from ember.backends import cpu_blas, cpu_gemm_choice
from ember.backends.cpu_gemm_blocked import sgemm_packed
from ember.backends.cpu_gemm_microkernel import COLUMNS, K_BLOCK, ROWS, VECTORS, _microkernel  # noqa: F401 (re-exported)
from ember.backends.cpu_gemm_pack import pack_transposed
from ember.backends.cpu_threads import num_threads, parallel_for

ROW_BLOCK = 96  # rows of A per block: 96 x 384 floats (144 KB) stay in L2


def host_has_avx512() -> bool:
    """Whether this CPU runs AVX-512F and numba compiles for it (not when ``NUMBA_CPU_NAME`` names another
    CPU, e.g. ``generic`` for portable caches: the kernel would lose its vector registers and run slower
    than BLAS)."""
    if numba.config.CPU_NAME not in (None, "host"):
        return False
    features = llvm.get_host_cpu_features()
    return bool(features.get("avx512f", False)) and bool(features.get("fma", False))




t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12 = (_microkernel(r) for r in range(1, ROWS + 1))
# the indirect tiles (row tables for A and B), for cpu_indirect_conv_kernels
x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12 = (_microkernel(r, indirect=True) for r in range(1, ROWS + 1))


@numba.njit(inline="always")
def _tile(rows, kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias):  # pragma: no cover - compiled
    """The micro-kernel for a tile of ``rows`` (1..12) rows."""
    if rows == 12:
        t12(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 11:
        t11(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 10:
        t10(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 9:
        t9(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 8:
        t8(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 7:
        t7(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 6:
        t6(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 5:
        t5(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 4:
        t4(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 3:
        t3(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    elif rows == 2:
        t2(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
    else:
        t1(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)


@numba.njit(inline="always")
def _tile_indirect(rows, kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias):  # pragma: no cover - compiled
    """The indirect micro-kernel (``_microkernel(rows, indirect=True)``) for ``rows`` (1..12) rows."""
    if rows == 12:
        x12(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 11:
        x11(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 10:
        x10(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 9:
        x9(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 8:
        x8(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 7:
        x7(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 6:
        x6(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 5:
        x5(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 4:
        x4(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 3:
        x3(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    elif rows == 2:
        x2(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)
    else:
        x1(kc, a, a_rows, sak, b, b_rows, c, ldc, accumulate, mask, bias)


@numba.njit(cache=True, nogil=True)
def sgemm(m, n, k_total, a, sai, sak, b, ldb, panel_stride, c, ldc, bias):  # pragma: no cover - compiled
    """``C[:m, :n] = A[:m, :k_total] @ B[:k_total, :n]`` on float32 data given by addresses (int64) and
    strides in elements: A's element (i, k) at ``a + 4 * (i * sai + k * sak)``; B in 32-column panels,
    panel p's row k at ``b + 4 * (p * panel_stride + k * ldb)`` (a row-major B: ``panel_stride = 32``,
    ``ldb`` its row stride; a packed one: ``panel_stride = 32 * k_total``, ``ldb = 32``); C's row i at
    ``c + 4 * i * ldc``; ``bias`` (an address, or 0 for none) is added to each row after the sum. Only
    addresses and integers: one compiled signature serves every layout."""
    full = (1 << COLUMNS) - 1
    panels = (n + COLUMNS - 1) // COLUMNS
    k_blocks = (k_total + K_BLOCK - 1) // K_BLOCK
    k_step = (k_total + k_blocks - 1) // k_blocks  # blocks of equal size: no short last block
    for k0 in range(0, k_total, k_step):
        kc = min(k_step, k_total - k0)
        accumulate = 1 if k0 > 0 else 0
        last = bias if k0 + kc >= k_total else 0
        for i_block in range(0, m, ROW_BLOCK):
            i_stop = min(m, i_block + ROW_BLOCK)
            for p in range(panels):
                j0 = p * COLUMNS
                width = min(COLUMNS, n - j0)
                mask = full if width == COLUMNS else (1 << width) - 1
                b_panel = b + 4 * (p * panel_stride + k0 * ldb)
                for i0 in range(i_block, i_stop, ROWS):
                    # Two calls of the inlined tile, one with a literal 0 for the bias: LLVM then drops the bias
                    # code from the tiles of all but the last k block. One call with a run-time bias address
                    # made every tile ~20% slower (W2's products, one thread: 200 -> 235 GFLOP/s), though its
                    # k loop compiled the same: the cost is in how the driver around the inlined tiles compiled.
                    if last:
                        _tile(min(ROWS, i_stop - i0), kc, a + 4 * (i0 * sai + k0 * sak), sai, sak, b_panel, ldb,
                              c + 4 * (i0 * ldc + j0), ldc, accumulate, mask, last + 4 * j0)
                    else:
                        _tile(min(ROWS, i_stop - i0), kc, a + 4 * (i0 * sai + k0 * sak), sai, sak, b_panel, ldb,
                              c + 4 * (i0 * ldc + j0), ldc, accumulate, mask, 0)


def build() -> dict[str, Callable]:
    """``{"matmul_f32": ...}`` on AVX-512 CPUs, else ``{}``: ``matmul_f32(a, b)`` is :func:`matmul`
    (``a @ b``, or None for operands it does not take)."""
    return {"matmul_f32": matmul} if host_has_avx512() else {}


# A product of this many multiply-adds or more is split over ember's threads (~40 us of work on one core; a
# hand-off measured 11-18 us under load), the same bound below which a product BLAS takes is held to one
# BLAS thread (cpu_blas.SMALL_GEMM_MACS): below it every product runs on one thread, whichever library
# multiplies, so neither wakes threads that then spin; from it on, every product uses all threads.
THREADED_MACS = int(cpu_blas.SMALL_GEMM_MACS)
# Products with this many rows or more run on the driver that packs A as well as B (cpu_gemm_blocked: 10-40%
# faster on GPT's products, one thread, Intel Xeon); fewer rows do not repay copying a large B into panels (a
# 65 x 4096 @ 4096 x 384 weight gradient: 0.5-0.8x).
PACKED_MIN_ROWS = 384


def matmul(a: Any, b: Any, bias: Any = None, out: Any = None, local: bool = False) -> Any:
    """``a @ b`` (``+ bias`` when given: a float32 vector of b's columns is added inside the kernel after the
    sum, the same result as adding it afterwards without another pass; any other bias is added afterwards)
    by :func:`sgemm` for float32 matrices ``cpu_gemm_choice.use_ember`` gives it, else None (the caller then
    calls BLAS). ``b`` is read in place when its rows are contiguous, else copied into 32-column panels
    first. Large products run on ember's threads: column panels, or row blocks when there are too few
    panels; either way each element is summed in the same order. ``out``: a float32 (m, n) array with
    contiguous rows, not overlapping ``a`` or ``b``, to write into (returned); another ``out`` gives None.
    ``local``: run on the calling thread only, at any thread count: for a caller
    that already splits its work over ember's threads with NumPy's BLAS held to one thread (the BLAS split,
    ``cpu_blas.blas_for``), so no OpenBLAS thread is left spinning against this kernel."""
    if (a.ndim != 2 or b.ndim != 2 or a.dtype != np.float32 or b.dtype != np.float32
            or not (a.flags.aligned and b.flags.aligned)):
        return None
    m, k = a.shape
    n = b.shape[1]
    macs = m * n * k
    threads = num_threads() if macs >= THREADED_MACS and not local else 1
    if macs < cpu_gemm_choice.MIN_MACS or not cpu_gemm_choice.use_ember(m, k, n, b.strides[1] == 4
                                                                        and b.strides[0] % 4 == 0, threads):
        return None
    return _run(a, b, bias, out, threads)


def _run(a: Any, b: Any, bias: Any, out: Any, threads: int) -> Any:
    """``a @ b`` (``+ bias``) by :func:`sgemm` on ``threads`` of ember's threads (1: the calling thread), no
    questions asked about whether it should (float32 matrices; ``out`` None or usable, else None)."""
    m, k = a.shape
    n = b.shape[1]
    if bias is None and out is None and m >= PACKED_MIN_ROWS and n >= 2 * m:
        # C = (B^T A^T)^T: panels of A^T (K x M) instead of B (K x N) and one transpose of C, far less copying
        # when B is the wider (GPT's 384 x 4096 @ 4096 x 1536 weight gradient: 96 -> 119 GFLOP/s); each element
        # is the same sum of the same products in the same order: the same bits.
        return np.ascontiguousarray(_run(b.T, a.T, None, None, threads).T)
    item = 4
    if out is None:
        out = np.empty((m, n), np.float32)
    elif not _usable_out(out, m, n):
        return None
    ldc = out.strides[0] // item
    sai, sak = a.strides[0] // item, a.strides[1] // item
    a_addr, c_addr = a.ctypes.data, out.ctypes.data
    inside = bias is not None and _usable_bias(bias, n)
    bias_addr = bias.ctypes.data if inside else 0
    both_packed = m >= PACKED_MIN_ROWS  # the driver that packs A too (cpu_gemm_blocked): B always in panels
    in_place = b.strides[1] == item and b.strides[0] % item == 0 and not both_packed
    packed = None if in_place else np.empty((-(-n // COLUMNS), k, COLUMNS), np.float32)

    def multiply(rows: int, cols: int, a0: int, b_addr: int, ldb: int, panel_stride: int, c0: int, bias0: int) -> None:
        if both_packed:  # the same sums in the same order as sgemm's: the same bits
            sgemm_packed(rows, cols, k, a0, sai, sak, b_addr, panel_stride, c0, ldc, bias0)
        else:
            sgemm(rows, cols, k, a0, sai, sak, b_addr, ldb, panel_stride, c0, ldc, bias0)

    def columns(j0: int, j1: int) -> None:  # out[:, j0:j1], j0 a multiple of 32
        if in_place:
            b_addr, ldb, panel_stride = b.ctypes.data + item * j0, b.strides[0] // item, COLUMNS
        else:
            p0, p1 = j0 // COLUMNS, -(-j1 // COLUMNS)
            _pack(b, packed, p0, p1)
            b_addr, ldb, panel_stride = packed.ctypes.data + item * p0 * k * COLUMNS, COLUMNS, k * COLUMNS
        multiply(m, j1 - j0, a_addr, b_addr, ldb, panel_stride, c_addr + item * j0, bias_addr + item * j0 if bias_addr else 0)

    def rows(i0: int, i1: int) -> None:  # out[i0:i1, :]
        if in_place:
            b_addr, ldb, panel_stride = b.ctypes.data, b.strides[0] // item, COLUMNS
        else:
            b_addr, ldb, panel_stride = packed.ctypes.data, COLUMNS, k * COLUMNS
        multiply(i1 - i0, n, a_addr + item * i0 * sai, b_addr, ldb, panel_stride, c_addr + item * i0 * ldc, bias_addr)

    panels = -(-n // COLUMNS)
    if threads <= 1:
        columns(0, n)
    elif panels >= 2 * threads or m < 2 * ROWS * threads:
        parallel_for(lambda p0, p1: columns(p0 * COLUMNS, min(n, p1 * COLUMNS)), panels)
    else:
        if packed is not None:
            _pack(b, packed, 0, panels)
        blocks = -(-m // ROWS)
        parallel_for(lambda r0, r1: rows(r0 * ROWS, min(m, r1 * ROWS)), blocks)
    if bias is not None and not inside:
        out += bias
    return out


def _usable_out(out: Any, m: int, n: int) -> bool:
    """An output the kernel writes in place: float32 (m, n), contiguous rows, aligned, writeable."""
    return (out.dtype == np.float32 and out.shape == (m, n) and out.strides[1] == 4 and out.strides[0] % 4 == 0
            and out.strides[0] >= 4 * n and out.flags.aligned and out.flags.writeable)


def _usable_bias(bias: Any, n: int) -> bool:
    """A bias the kernel adds itself: float32, shape (n,), contiguous, aligned."""
    return (bias.dtype == np.float32 and bias.shape == (n,) and bias.flags.c_contiguous and bias.flags.aligned)


def _pack(b: Any, packed: Any, p0: int, p1: int) -> None:
    """Copy column panels ``[p0, p1)`` of ``b`` (K, N) into ``packed`` (panels, K, 32), zero-padding the last
    panel past column N: by 16 x 16 transposes in registers when ``b`` is a transposed matrix with contiguous
    rows (``W.T``: a linear layer's weight; ``cpu_gemm_pack``, 2.5x faster on W2's, 9x where W's rows are 4 KB
    apart), else by one strided NumPy copy (both release the GIL)."""
    n = b.shape[1]
    if b.strides[0] == 4 and b.strides[1] > 0 and b.strides[1] % 4 == 0:
        pack_transposed(b.ctypes.data, b.strides[1] // 4, n, b.shape[0], packed.ctypes.data, p0, p1)
        return
    full = min(p1, n // COLUMNS)
    if full > p0:
        source = np.lib.stride_tricks.as_strided(
            b[:, p0 * COLUMNS:], (full - p0, b.shape[0], COLUMNS), (COLUMNS * b.strides[1], b.strides[0], b.strides[1]),
            writeable=False)
        packed[p0:full] = source
    if p1 > full:  # the last, partial panel
        width = n - full * COLUMNS
        packed[full, :, :width] = b[:, full * COLUMNS:]
        packed[full, :, width:] = 0.0
