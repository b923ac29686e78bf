"""The micro-kernel of ember's float32 GEMM (AVX-512): a 12 x 32 tile of ``C`` in 24 vector registers.

Emitted as LLVM IR through a numba ``intrinsic`` (explicit ``<16 x float>`` vectors and ``llvm.fma``): for each
``k`` it loads 32 values of a row of ``B`` (two vectors) and multiplies them by 12 broadcast values of a column
of ``A`` (24 fused multiply-adds). The drivers are ``cpu_gemm_kernels.sgemm`` (A read in place) and
``cpu_gemm_blocked.sgemm_packed`` (A and B packed); ``cpu_attention_kernels`` and the indirect convolution
call the tiles too. Kept apart from the drivers so both can import it.

Example:
    >>> from ember.backends.cpu_gemm_microkernel import ROWS, COLUMNS, _microkernel
    >>> (ROWS, COLUMNS)
    (12, 32)
    >>> tile = _microkernel(12)   # a numba intrinsic, called from njit code only
"""
from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

ROWS = 12  # micro-tile rows (broadcast values of A per k)
VECTORS = 2  # micro-tile columns in 16-wide vectors (32 columns)
COLUMNS = 16 * VECTORS
# k values per pass over C, at most (K is cut into equal blocks): fewer passes over C and longer runs of the
# micro-kernel's loop; 384 measured ~10% faster than 256 on GPT's products (4096 x 384 x 1152: 247 vs 206
# GFLOP/s, one thread) and the same on W2's
K_BLOCK = 384


def _microkernel(rows: int, indirect: bool = False, a_strides: tuple[int, int] | None = None,
                 prefetch_c: bool = False) -> Any:
    """A numba intrinsic ``tile(kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)`` (all 64-bit ints;
    a, b, c, bias are addresses of float32 data): ``C[:rows, cols] (+)= A[:rows, :kc] @ B[:kc, cols]``, plus
    ``bias[cols]`` after the sum when ``bias`` is not 0 (the same rounding as adding it afterwards), for the
    columns whose bits are set in ``mask`` (bit j: column j of the 32), A's element (i, k) at
    ``a + 4 * (i * sai + k * sak)``, B's row k at ``b + 4 * k * ldb``, C's row i at ``c + 4 * i * ldc``.
    ``kc`` must be at least 1.

    ``indirect``: ``sai`` and ``ldb`` are addresses of int64 tables instead, A's row i at ``a + 4 * sai[i]``
    and B's row k at ``b + 4 * ldb[k]`` (offsets in elements): the indirect convolution of
    ``cpu_indirect_conv_kernels``, whose rows of B are shifted windows of an input plane.

    ``a_strides``: A's two strides (elements) as constants of the code, ``sai`` and ``sak`` then ignored: for a
    packed A (``cpu_gemm_packed``). With run-time strides LLVM walks the 12 rows' addresses by a chain of 12
    dependent adds per k, as long as the 24 multiply-adds it feeds; constant strides are displacements.
    ``prefetch_c``: ask for the tile's lines of C (for writing) before the k loop, so that the misses of a C too
    large for L2 overlap the multiply-adds instead of stalling the stores after them."""
    i64, i32, f32 = ir.IntType(64), ir.IntType(32), ir.FloatType()
    vec, bits = ir.VectorType(f32, 16), ir.VectorType(ir.IntType(1), 16)
    fptr, vptr = f32.as_pointer(), vec.as_pointer()

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias = args
        module = builder.module
        fma = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vec, vec, vec]), "llvm.fma.v16f32")
        load = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vptr, i32, bits, vec]),
                                              "llvm.masked.load.v16f32.p0")
        store = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, bits]),
                                               "llvm.masked.store.v16f32.p0")
        zero = ir.Constant(vec, None)
        align = ir.Constant(i32, 4)
        a_ptr, b_ptr, c_ptr = (builder.inttoptr(x, fptr) for x in (a, b, c))
        masks = [builder.bitcast(builder.trunc(builder.lshr(mask, ir.Constant(i64, 16 * j)), ir.IntType(16)), bits)
                 for j in range(VECTORS)]
        if indirect:  # the rows' offsets are read once, before the loop
            a_rows, b_rows = builder.inttoptr(sai, i64.as_pointer()), builder.inttoptr(ldb, i64.as_pointer())
            row_offsets = [builder.load(builder.gep(a_rows, [ir.Constant(i64, i)])) for i in range(rows)]
        elif a_strides is not None:
            row_offsets = [ir.Constant(i64, a_strides[0] * i) for i in range(rows)]
            sak = ir.Constant(i64, a_strides[1])
        else:
            row_offsets = [builder.mul(sai, ir.Constant(i64, i)) for i in range(rows)]

        if prefetch_c:
            i8p = ir.IntType(8).as_pointer()
            prefetch = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                                      "llvm.prefetch.p0")
            for i in range(rows):
                for offset in (0, 16, COLUMNS - 1):  # the 128 bytes of a row's 32 columns touch 2-3 lines
                    p = builder.gep(c_ptr, [builder.add(builder.mul(ldc, ir.Constant(i64, i)), ir.Constant(i64, offset))])
                    builder.call(prefetch, [builder.bitcast(p, i8p), ir.Constant(i32, 1), ir.Constant(i32, 3),
                                            ir.Constant(i32, 1)])
        entry = builder.block
        loop = builder.append_basic_block("gemm_k")
        done = builder.append_basic_block("gemm_store")
        builder.branch(loop)
        builder.position_at_end(loop)
        k = builder.phi(i64)
        k.add_incoming(ir.Constant(i64, 0), entry)
        acc = [[builder.phi(vec) for _ in range(VECTORS)] for _ in range(rows)]
        for row in acc:
            for phi in row:
                phi.add_incoming(zero, entry)
        b_row = builder.load(builder.gep(b_rows, [k])) if indirect else builder.mul(k, ldb)
        b_vectors = []
        for j in range(VECTORS):
            p = builder.gep(b_ptr, [builder.add(b_row, ir.Constant(i64, 16 * j))])
            b_vectors.append(builder.call(load, [builder.bitcast(p, vptr), align, masks[j], zero]))
        a_col = builder.mul(k, sak)
        new = []
        for i in range(rows):
            value = builder.load(builder.gep(a_ptr, [builder.add(a_col, row_offsets[i])]))
            splat = builder.shuffle_vector(builder.insert_element(ir.Constant(vec, ir.Undefined), value, ir.Constant(i32, 0)),
                                           ir.Constant(vec, ir.Undefined), ir.Constant(ir.VectorType(i32, 16), None))
            new.append([builder.call(fma, [splat, b_vectors[j], acc[i][j]]) for j in range(VECTORS)])
        k_next = builder.add(k, ir.Constant(i64, 1))
        k.add_incoming(k_next, loop)
        for i in range(rows):
            for j in range(VECTORS):
                acc[i][j].add_incoming(new[i][j], loop)
        builder.cbranch(builder.icmp_signed("<", k_next, kc), loop, done)

        builder.position_at_end(done)
        add_old = builder.icmp_signed("!=", accumulate, ir.Constant(i64, 0))
        has_bias = builder.icmp_signed("!=", bias, ir.Constant(i64, 0))
        bias_ptr = builder.inttoptr(bias, fptr)
        no_lanes = ir.Constant(bits, None)
        bias_vectors = []  # masked-off lanes are not read: no access at all without a bias
        for j in range(VECTORS):
            p = builder.bitcast(builder.gep(bias_ptr, [ir.Constant(i64, 16 * j)]), vptr)
            lanes = builder.select(has_bias, masks[j], no_lanes)
            bias_vectors.append(builder.call(load, [p, align, lanes, zero]))
        for i in range(rows):
            c_row = builder.mul(ldc, ir.Constant(i64, i))
            for j in range(VECTORS):
                p = builder.bitcast(builder.gep(c_ptr, [builder.add(c_row, ir.Constant(i64, 16 * j))]), vptr)
                old = builder.call(load, [p, align, masks[j], zero])
                value = builder.select(add_old, builder.fadd(old, new[i][j]), new[i][j])
                value = builder.select(has_bias, builder.fadd(value, bias_vectors[j]), value)
                builder.call(store, [value, p, align, masks[j]])

    @intrinsic
    def tile(typingctx: Any, kc: Any, a: Any, sai: Any, sak: Any, b: Any, ldb: Any, c: Any, ldc: Any,
             accumulate: Any, mask: Any, bias: Any) -> Any:
        operands = (kc, a, sai, sak, b, ldb, c, ldc, accumulate, mask, bias)
        if not all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in operands):
            return None
        return types.void(*operands), codegen

    return tile
