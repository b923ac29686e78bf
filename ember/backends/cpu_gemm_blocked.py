"""ember's float32 GEMM driver with both operands packed: ``C = A @ B`` at ~160-180 GFLOP/s per core (AVX-512).

``cpu_gemm_kernels.sgemm`` reads ``A`` in place and ``B`` in place when its rows are contiguous. Two things
cost it a third of the micro-kernel's rate on large products (found on an Intel Xeon with AVX-512, gpt18):

- ``B`` in place: a tile's ``kc`` rows of a 32-column panel lie ``ldb`` floats apart; for ``ldb`` = 1152
  (GPT's ``4 d``) they fall into 16 of L1's 64 sets, so the panel (48 KB at ``kc`` = 384) does not stay in L1
  (in-cache test, 96 x 384 x 1152: 118 GFLOP/s in place, 156 packed).
- ``A`` through run-time strides: LLVM walks the 12 rows' addresses with a chain of 12 dependent adds per
  ``k``, as long as the 24 multiply-adds it feeds; a transposed ``A`` (a weight gradient's ``g.T``) jumps a row
  of ``g`` per ``k``, again into few cache sets.

Here ``B`` is always in 32-column panels (``(panels, K, 32)``, each ``kc x 32`` block contiguous) and each block
of ``MC`` rows of ``A`` and ``kc`` columns is copied, once per block, into a buffer whose strides are constants
of the micro-kernel (``cpu_gemm_kernels._microkernel(rows, a_strides=...)``): rows ``KP`` floats apart for a
row-major ``A`` (contiguous row copies), ``k`` columns ``MC`` floats apart for a transposed one (contiguous
column copies). The loops, the blocks of ``k`` and the order of every sum are those of ``sgemm``: each element of
``C`` is the float32 sum of its products in ``k`` order within a ``k`` block, blocks added in order, bias added
after the last, whatever the thread split.

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_gemm_blocked import sgemm_packed
    >>> a, b = np.ones((40, 20), np.float32), np.ones((20, 32), np.float32)   # b: one panel already
    >>> c = np.empty((40, 32), np.float32)
    >>> sgemm_packed(40, 32, 20, a.ctypes.data, 20, 1, b.ctypes.data, 20 * 32, c.ctypes.data, 32, 0)
    >>> float(c[0, 0])
    20.0
"""
from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from ember.backends.cpu_gemm_microkernel import COLUMNS, K_BLOCK, ROWS, _microkernel

KC = K_BLOCK  # k values per block (K cut into equal blocks of at most KC): sgemm's, so the same sums
MC = 96  # rows of A per packed block (MC x KC floats, 144 KB, stay in L2)
KP = KC + 16  # a packed row-major block's row stride: 1600 bytes, so 12 rows do not share L1 sets


@intrinsic
def _f32_ptr(typingctx: Any, address: Any) -> Any:
    """A float32 pointer from an int64 address (indexable in numba: ``p[i]``)."""
    if not (isinstance(address, types.Integer) and address.bitwidth == 64):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.inttoptr(args[0], context.get_value_type(types.CPointer(types.float32)))

    return types.CPointer(types.float32)(address), codegen


r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11, r12 = (_microkernel(r, a_strides=(KP, 1), prefetch_c=True) for r in range(1, ROWS + 1))
c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12 = (_microkernel(r, a_strides=(1, MC), prefetch_c=True) for r in range(1, ROWS + 1))


@numba.njit(inline="always")
def _tile_rows(rows, kc, a, b, c, ldc, accumulate, mask, bias):  # pragma: no cover - compiled
    """The micro-kernel on a row-major packed block (rows ``KP`` apart) for a tile of ``rows`` (1..12) rows."""
    if rows == 12:
        r12(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 11:
        r11(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 10:
        r10(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 9:
        r9(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 8:
        r8(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 7:
        r7(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 6:
        r6(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 5:
        r5(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 4:
        r4(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 3:
        r3(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 2:
        r2(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    else:
        r1(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)


@numba.njit(inline="always")
def _tile_cols(rows, kc, a, b, c, ldc, accumulate, mask, bias):  # pragma: no cover - compiled
    """The micro-kernel on a column-major packed block (``k`` columns ``MC`` apart) for ``rows`` (1..12) rows."""
    if rows == 12:
        c12(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 11:
        c11(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 10:
        c10(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 9:
        c9(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 8:
        c8(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 7:
        c7(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 6:
        c6(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 5:
        c5(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 4:
        c4(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 3:
        c3(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    elif rows == 2:
        c2(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)
    else:
        c1(kc, a, 0, 0, b, COLUMNS, c, ldc, accumulate, mask, bias)


@numba.njit(cache=True, nogil=True)
def sgemm_packed(m, n, k_total, a, sai, sak, b, panel_stride, c, ldc, bias):  # pragma: no cover - compiled
    """``C[:m, :n] = A[:m, :k_total] @ B[:k_total, :n]`` (+ ``bias`` after the sum when not 0): A's element
    (i, k) at ``a + 4 * (i * sai + k * sak)`` (any strides; ``sai == 1`` packs by columns, else by rows), B in
    32-column panels, panel p's row k at ``b + 4 * (p * panel_stride + 32 * k)``, C's row i at
    ``c + 4 * i * ldc``. Addresses and integers only: one compiled signature for every layout."""
    full = (1 << COLUMNS) - 1
    panels = (n + COLUMNS - 1) // COLUMNS
    k_blocks = (k_total + KC - 1) // KC
    k_step = (k_total + k_blocks - 1) // k_blocks  # blocks of equal size, as sgemm's
    by_columns = sai == 1 and sak != 1
    block = np.empty(MC * KP, np.float32)
    packed = block.ctypes.data
    src = _f32_ptr(a)
    for k0 in range(0, k_total, k_step):
        kc = min(k_step, k_total - k0)
        accumulate = 1 if k0 > 0 else 0
        last = bias if k0 + kc >= k_total else 0
        for i_block in range(0, m, MC):
            i_stop = min(m, i_block + MC)
            if by_columns:  # block[k * MC + r] = A[i_block + r, k0 + k]: runs of contiguous rows
                for k in range(kc):
                    base = i_block + (k0 + k) * sak
                    for r in range(i_stop - i_block):
                        block[k * MC + r] = src[base + r]
            elif sak == 1:  # block[r * KP + k] = A[i_block + r, k0 + k], rows contiguous: copies LLVM vectorizes
                for r in range(i_stop - i_block):
                    base = (i_block + r) * sai + k0
                    for k in range(kc):
                        block[r * KP + k] = src[base + k]
            else:
                for r in range(i_stop - i_block):
                    base = (i_block + r) * sai + k0 * sak
                    for k in range(kc):
                        block[r * KP + k] = src[base + k * sak]
            for p in range(panels):
                j0 = p * COLUMNS
                width = min(COLUMNS, n - j0)
                mask = full if width == COLUMNS else (1 << width) - 1
                b_panel = b + 4 * (p * panel_stride + k0 * COLUMNS)
                for i0 in range(i_block, i_stop, ROWS):
                    rows = min(ROWS, i_stop - i0)
                    c_tile = c + 4 * (i0 * ldc + j0)
                    # a literal 0 bias in all but the last k block: LLVM drops the bias code there (see sgemm)
                    if by_columns:
                        a_tile = packed + 4 * (i0 - i_block)
                        if last:
                            _tile_cols(rows, kc, a_tile, b_panel, c_tile, ldc, accumulate, mask, last + 4 * j0)
                        else:
                            _tile_cols(rows, kc, a_tile, b_panel, c_tile, ldc, accumulate, mask, 0)
                    else:
                        a_tile = packed + 4 * (i0 - i_block) * KP
                        if last:
                            _tile_rows(rows, kc, a_tile, b_panel, c_tile, ldc, accumulate, mask, last + 4 * j0)
                        else:
                            _tile_rows(rows, kc, a_tile, b_panel, c_tile, ldc, accumulate, mask, 0)
