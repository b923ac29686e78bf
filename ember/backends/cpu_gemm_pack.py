"""Packing a transposed weight into the GEMM's 32-column panels with in-register 16 x 16 transposes (AVX-512).

``nn.Linear``'s forward is ``x @ W.T``: ember's GEMM (``cpu_gemm_kernels``) reads ``B = W.T``, whose rows are
not contiguous, from a copy in 32-column panels ``(panels, K, 32)``. NumPy's strided copy moved one element
at a time, reading 32 rows of ``W`` a row apart for every ``k`` (0.27 ns per element on W2's 512 x 784
weight, 11% of that layer's forward; up to 0.9 ns where ``W``'s rows are 4 KB apart and share cache sets).
Here each step loads 16 values of each of 16 rows of ``W`` (16 vector loads along ``k``), transposes the
16 x 16 block in registers (four rounds of two-source shuffles) and stores 16 contiguous half-rows of the
panel; the panel's columns past ``N`` come out as zeros (masked-off loads), which the GEMM's edge tiles
expect. Emitted as LLVM IR through a numba ``intrinsic``, as the GEMM's micro-kernel is (LLVM does not
turn a scalar transposing loop into shuffles).

The values are copied, not computed: the packed panels equal NumPy's copy bit for bit (NaN payloads and
signed zeros included).

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_gemm_pack import pack_transposed
    >>> w = np.arange(40 * 20, dtype=np.float32).reshape(40, 20)      # B = w.T: K = 20, N = 40
    >>> packed = np.empty((2, 20, 32), np.float32)
    >>> pack_transposed(w.ctypes.data, 20, 40, 20, packed.ctypes.data, 0, 2)
    >>> bool((packed[0] == w[:32].T).all() and (packed[1, :, :8] == w[32:].T).all() and (packed[1, :, 8:] == 0).all())
    True
"""
from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

LANES = 16  # floats in an AVX-512 vector; the block transposed in registers is LANES x LANES
PANEL = 32  # the GEMM's panel width (cpu_gemm_kernels.COLUMNS): two blocks side by side


def _stage_masks(half: int) -> tuple[list[int], list[int]]:
    """The two shuffles of one transpose round for rows ``i`` and ``i + half``: within each run of
    ``2 * half`` lanes, the low output takes the first ``half`` lanes of both rows, the high output the
    last ``half`` (lanes of the second row numbered from 16, as ``shufflevector`` does)."""
    low, high = [], []
    for lane in range(LANES):
        block, pos = divmod(lane, 2 * half)
        base = block * 2 * half
        if pos < half:
            low.append(base + pos)
            high.append(base + half + pos)
        else:
            low.append(LANES + base + pos - half)
            high.append(LANES + base + pos)
    return low, high


@intrinsic
def _transpose16(typingctx: Any, src: Any, ld: Any, rows: Any, kc: Any, dst: Any, ldd: Any) -> Any:
    """``transpose16(src, ld, rows, kc, dst, ldd)`` (64-bit ints; src, dst addresses of float32 data): for
    ``k < kc`` (1..16), ``dst[k * ldd + r] = src[r * ld + k]`` for the 16 values ``r`` of row ``k``, the rows
    ``r >= rows`` (``rows`` may be 0 or less) written as 0.0 and never read."""
    operands = (src, ld, rows, kc, dst, ldd)
    if not all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in operands):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        src_, ld_, rows_, kc_, dst_, ldd_ = args
        i1, i16, i32, i64, f32 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64), ir.FloatType()
        vec, bits = ir.VectorType(f32, LANES), ir.VectorType(i1, LANES)
        fptr, vptr = f32.as_pointer(), vec.as_pointer()
        module = builder.module
        load = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vptr, i32, bits, vec]),
                                              "llvm.masked.load.v16f32.p0")
        store = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, bits]),
                                               "llvm.masked.store.v16f32.p0")
        zero, none = ir.Constant(vec, None), ir.Constant(bits, None)
        every = ir.Constant(bits, [ir.Constant(i1, 1)] * LANES)
        align = ir.Constant(i32, 4)
        k_lanes = builder.bitcast(builder.trunc(builder.sub(builder.shl(ir.Constant(i64, 1), kc_), ir.Constant(i64, 1)),
                                                i16), bits)
        src_ptr, dst_ptr = builder.inttoptr(src_, fptr), builder.inttoptr(dst_, fptr)
        values = []
        for r in range(LANES):
            lanes = builder.select(builder.icmp_signed("<", ir.Constant(i64, r), rows_), k_lanes, none)
            p = builder.bitcast(builder.gep(src_ptr, [builder.mul(ld_, ir.Constant(i64, r))]), vptr)
            values.append(builder.call(load, [p, align, lanes, zero]))
        half = LANES // 2
        while half >= 1:
            low, high = (ir.Constant(ir.VectorType(i32, LANES), [ir.Constant(i32, v) for v in m])
                         for m in _stage_masks(half))
            for i in range(LANES):
                if i & half == 0:
                    a, b = values[i], values[i + half]
                    values[i], values[i + half] = builder.shuffle_vector(a, b, low), builder.shuffle_vector(a, b, high)
            half //= 2
        for k in range(LANES):
            lanes = builder.select(builder.icmp_signed("<", ir.Constant(i64, k), kc_), every, none)
            p = builder.bitcast(builder.gep(dst_ptr, [builder.mul(ldd_, ir.Constant(i64, k))]), vptr)
            builder.call(store, [values[k], p, align, lanes])

    return types.void(*operands), codegen


@numba.njit(cache=True, nogil=True)
def pack_transposed(w, ld, n, k_total, dst, p0, p1):  # pragma: no cover - compiled
    """Panels ``[p0, p1)`` of ``B = W.T`` (``B[k, j] = W[j, k]`` at ``w + 4 * (j * ld + k)``, ``N`` columns,
    ``K = k_total``) into ``dst`` (float32 ``(panels, K, 32)`` at address ``dst``): panel ``p`` row ``k`` holds
    ``B[k, 32p : 32p + 32]``, zero past column ``N``. Addresses and integers only (one signature)."""
    for p in range(p0, p1):
        for k0 in range(0, k_total, LANES):  # both halves of a panel row in turn: each 128-byte row written at once
            for half in range(PANEL // LANES):
                j0 = p * PANEL + half * LANES
                _transpose16(w + 4 * (j0 * ld + k0), ld, min(LANES, n - j0), min(LANES, k_total - k0),
                             dst + 4 * ((p * k_total + k0) * PANEL + half * LANES), PANEL)
