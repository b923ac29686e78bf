"""Float32 passes in explicit 16-lane (AVX-512) vectors (numba): softmax rows (maximum, exp-and-sum, normalize),
log_softmax rows, erf and gelu.

Why: numba's loops are vectorized by LLVM, which on AVX-512 CPUs prefers 256-bit vectors (8 lanes) and does not
vectorize a reduction at all without reassociation, so a softmax over one attention row (128-256 floats) ran its
maximum and sum one float at a time and its exp 8 lanes at a time: ~130 ns a row of 128 in
``cpu_attention_kernels``, about as long as that row's share of both products. Here each pass is one numba
``intrinsic`` emitting LLVM IR over ``<16 x float>`` values (as ``cpu_gemm_kernels``' micro-kernel does), with a
masked load and store for the row's tail, so any length works without padding.

Numerics: ``row_max`` skips NaN elements (``x > m`` selects; a row with a NaN becomes NaN in the exp pass anyway);
``exp_sum`` writes ``exp(x * s - m)`` (``x * s`` rounded, then ``- m``) by a branch-free float32 exp (Cody-Waite
reduction, degree-7 Taylor polynomial, within 2 ulp on the softmax's range; -inf -> 0, NaN -> NaN, results below
float32's smallest normal flushed to 0) and returns the sum, summed in 16 lanes then halved pairwise (a fixed order:
the same bits every call); ``divide`` divides (one rounding, as NumPy's ``p /= p.sum()``), ``multiply`` multiplies
(by a reciprocal: PyTorch's CPU softmax and attention kernels normalize so). ``erf_vector`` evaluates the float64
kernels' fitted pieces in float32 (within 0.8 ulp of the exact erf); ``gelu_map`` is gelu's NumPy formula around it,
operation by operation, so eager gelu equals a fused graph's replay of the formula bit for bit.

Example:
    >>> import numba, numpy as np
    >>> from ember.backends.cpu_vector_rows import row_max, exp_sum, divide
    >>> @numba.njit
    ... def softmax(row):
    ...     m = row_max(row.ctypes.data, row.size)
    ...     total = exp_sum(row.ctypes.data, row.ctypes.data, row.size, np.float32(1.0), m)
    ...     divide(row.ctypes.data, row.size, total)
    >>> row = np.array([0.0, 1.0, 2.0], np.float32)
    >>> softmax(row)
    >>> bool(abs(row.sum() - 1) < 1e-6)
    True
"""
from __future__ import annotations

from typing import Any, Callable

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ember.backends import _fast_math_coeffs as C

LANES = 16
_F32, _I32, _I64, _I1 = ir.FloatType(), ir.IntType(32), ir.IntType(64), ir.IntType(1)
_VEC, _IVEC, _BITS = ir.VectorType(_F32, LANES), ir.VectorType(_I32, LANES), ir.VectorType(_I1, LANES)

# exp(x) = 2^n exp(r): the constants of cpu_attention_kernels._exp (ln 2 in two parts, 1.5 * 2^23 rounding trick)
_LOG2E, _LN2_HI, _LN2_LO = 1.4426950408889634, 0.693359375, -2.12194440e-4
_ROUND, _LOWEST, _HIGHEST = 12582912.0, -87.33654, 88.0
_TAYLOR = [1.0 / f for f in (5040, 720, 120, 24, 6, 2, 1, 1)]  # degree 7 down to 0


def _splat(value: float) -> Any:
    return ir.Constant(_VEC, [ir.Constant(_F32, float(np.float32(value)))] * LANES)


def _broadcast(builder: Any, scalar: Any) -> Any:
    one = builder.insert_element(ir.Constant(_VEC, ir.Undefined), scalar, ir.Constant(_I32, 0))
    return builder.shuffle_vector(one, ir.Constant(_VEC, ir.Undefined), ir.Constant(_IVEC, None))


class _Ops:
    """The LLVM functions one intrinsic calls (fma, masked load/store), declared in the builder's module."""

    def __init__(self, builder: Any) -> None:
        module, vptr = builder.module, _VEC.as_pointer()
        self.builder = builder
        self.fma_ = cgutils.get_or_insert_function(module, ir.FunctionType(_VEC, [_VEC, _VEC, _VEC]), "llvm.fma.v16f32")
        self.load_ = cgutils.get_or_insert_function(module, ir.FunctionType(_VEC, [vptr, _I32, _BITS, _VEC]),
                                                    "llvm.masked.load.v16f32.p0")
        self.store_ = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [_VEC, vptr, _I32, _BITS]),
                                                     "llvm.masked.store.v16f32.p0")

    def fma(self, a: Any, b: Any, c: Any) -> Any:
        return self.builder.call(self.fma_, [a, b, c])

    def load(self, pointer: Any, mask: Any, fill: Any) -> Any:
        return self.builder.call(self.load_, [self.builder.bitcast(pointer, _VEC.as_pointer()), ir.Constant(_I32, 4),
                                              mask, fill])

    def store(self, value: Any, pointer: Any, mask: Any) -> None:
        self.builder.call(self.store_, [value, self.builder.bitcast(pointer, _VEC.as_pointer()), ir.Constant(_I32, 4),
                                        mask])

    def exp(self, x: Any) -> Any:
        """exp of 16 float32 values at or below 88 (cpu_attention_kernels._exp, lane by lane)."""
        b = self.builder
        lowest, highest = _splat(_LOWEST), _splat(_HIGHEST)
        xc = b.select(b.fcmp_ordered(">", x, lowest), x, lowest)  # NaN too: fixed at the end
        xc = b.select(b.fcmp_ordered("<", xc, highest), xc, highest)
        t = self.fma(xc, _splat(_LOG2E), _splat(_ROUND))
        n = b.fsub(t, _splat(_ROUND))
        r = self.fma(b.fneg(n), _splat(_LN2_HI), xc)
        r = self.fma(b.fneg(n), _splat(_LN2_LO), r)
        p = _splat(_TAYLOR[0])
        for c in _TAYLOR[1:]:
            p = self.fma(p, r, _splat(c))
        bits = b.bitcast(t, _IVEC)
        exponent = b.shl(b.add(b.sub(bits, ir.Constant(_IVEC, [ir.Constant(_I32, 0x4B400000)] * LANES)),
                               ir.Constant(_IVEC, [ir.Constant(_I32, 127)] * LANES)),
                         ir.Constant(_IVEC, [ir.Constant(_I32, 23)] * LANES))
        y = b.fmul(p, b.bitcast(exponent, _VEC))
        y = b.select(b.fcmp_ordered(">=", x, lowest), y, _splat(0.0))
        return b.select(b.fcmp_ordered("==", x, x), y, x)


def _horner(ops: _Ops, coeffs: tuple, s: Any) -> Any:
    """``p(s)`` by Horner's rule in fused multiply-adds, float32 coefficients (highest degree first)."""
    p = _splat(coeffs[0])
    for c in coeffs[1:]:
        p = ops.fma(p, s, _splat(c))
    return p


def erf_vector(ops: _Ops, x: Any) -> Any:
    """erf of 16 float32 values in float32 arithmetic: the pieces of ``_fast_math_coeffs`` (fitted for the float64
    kernels) evaluated in float32, the small one as ``x + x (p(x^2) - 1)`` so the polynomial's rounding is scaled
    by ``erf(x) / x - 1`` (at most 0.13); every piece computed, then selected. Within 0.8 ulp of the exact value
    (so within 1 ulp of the correctly rounded one); erf(-0.0) = -0.0, NaN -> NaN, +-inf -> +-1."""
    b = ops.builder
    sign_bit = ir.Constant(_IVEC, [ir.Constant(_I32, -0x80000000)] * LANES)
    bits = b.bitcast(x, _IVEC)
    a = b.bitcast(b.and_(bits, b.not_(sign_bit)), _VEC)  # |x|
    sign = b.and_(bits, sign_bit)
    small = C.ERF_SMALL[:-1] + (C.ERF_SMALL[-1] - 1.0,)
    t = b.fmul(ops.fma(x, x, _splat(-C.ERF_SMALL_MID)), _splat(C.ERF_SMALL_INV_HALF))
    p0 = ops.fma(x, _horner(ops, small, t), x)
    mid_top, far_top = _splat(2.5), _splat(3.925)  # erf rounds to 1.0 in float32 from 3.9192 on
    a_mid = b.select(b.fcmp_ordered("<", a, mid_top), a, mid_top)
    p1 = _horner(ops, C.ERF_MID, b.fmul(b.fsub(a_mid, _splat(C.ERF_MID_MID)), _splat(C.ERF_MID_INV_HALF)))
    a_far = b.select(b.fcmp_ordered("<", a, far_top), a, far_top)
    p2 = _horner(ops, C.ERF_FAR, b.fmul(b.fsub(a_far, _splat(C.ERF_FAR_MID)), _splat(C.ERF_FAR_INV_HALF)))
    r = b.select(b.fcmp_ordered("<", a, mid_top), p1, b.select(b.fcmp_ordered("<", a, far_top), p2, _splat(1.0)))
    r = b.bitcast(b.or_(b.bitcast(r, _IVEC), sign), _VEC)  # copysign (r >= 0)
    r = b.select(b.fcmp_unordered("uno", x, x), x, r)
    return b.select(b.fcmp_ordered("<", a, _splat(1.0)), p0, r)


def _tail_mask(builder: Any, remaining: Any) -> Any:
    """Lanes ``i < remaining`` (remaining in 1..16) as a 16-bit mask vector."""
    bits = builder.sub(builder.shl(ir.Constant(_I64, 1), remaining), ir.Constant(_I64, 1))
    return builder.bitcast(builder.trunc(bits, ir.IntType(LANES)), _BITS)


def _row_loop(builder: Any, n: Any, state: list, body: Callable) -> list:
    """``for j in range(0, n, 16): state = body(j, mask, state)`` in IR, the last vector masked; returns the final
    state (a list of IR values, threaded through phi nodes)."""
    entry = builder.block
    loop = builder.append_basic_block("row_loop")
    done = builder.append_basic_block("row_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(_I64, 0)), loop, done)
    builder.position_at_end(loop)
    j = builder.phi(_I64)
    j.add_incoming(ir.Constant(_I64, 0), entry)
    phis = []
    for value in state:
        phi = builder.phi(value.type)
        phi.add_incoming(value, entry)
        phis.append(phi)
    left = builder.sub(n, j)
    full = builder.icmp_signed(">=", left, ir.Constant(_I64, LANES))
    every = ir.Constant(_BITS, [ir.Constant(_I1, 1)] * LANES)
    mask = builder.select(full, every, _tail_mask(builder, builder.select(full, ir.Constant(_I64, LANES), left)))
    new = body(j, mask, phis)
    j_next = builder.add(j, ir.Constant(_I64, LANES))
    last = builder.block
    j.add_incoming(j_next, last)
    for phi, value in zip(phis, new):
        phi.add_incoming(value, last)
    builder.cbranch(builder.icmp_signed("<", j_next, n), loop, done)
    builder.position_at_end(done)
    results = []
    for value, phi_value in zip(state, new):
        merged = builder.phi(value.type)
        merged.add_incoming(value, entry)
        merged.add_incoming(phi_value, last)
        results.append(merged)
    return results


def _reduce(builder: Any, vector: Any, combine: Callable) -> Any:
    """The 16 lanes combined pairwise (lanes i and i + half, halving): a fixed order."""
    width = LANES
    while width > 1:
        half = width // 2
        low = builder.shuffle_vector(vector, vector, ir.Constant(_IVEC, [ir.Constant(_I32, i) for i in range(half)]
                                                                  + [ir.Constant(_I32, 0)] * (LANES - half)))
        high = builder.shuffle_vector(vector, vector, ir.Constant(_IVEC, [ir.Constant(_I32, half + i) for i in range(half)]
                                                                   + [ir.Constant(_I32, 0)] * (LANES - half)))
        vector = combine(low, high)
        width = half
    return builder.extract_element(vector, ir.Constant(_I32, 0))


def _pointer(builder: Any, address: Any, j: Any) -> Any:
    return builder.gep(builder.inttoptr(address, _F32.as_pointer()), [j])


@intrinsic
def row_max(typingctx: Any, address: Any, n: Any) -> Any:
    """``max(row[:n])`` of the float32 row at ``address`` (int64 address and length), NaN elements skipped;
    -inf for an empty row or one of NaN only."""
    if not (isinstance(address, types.Integer) and isinstance(n, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        address_, n_ = (context.cast(builder, a, t, types.int64) for a, t in zip(args, signature.args))
        lowest = _splat(-np.inf)

        def body(j: Any, mask: Any, state: list) -> list:
            x = ops.load(_pointer(builder, address_, j), mask, lowest)
            return [builder.select(builder.fcmp_ordered(">", x, state[0]), x, state[0])]

        (best,) = _row_loop(builder, n_, [lowest], body)
        return _reduce(builder, best, lambda a, b: builder.select(builder.fcmp_ordered(">", b, a), b, a))

    return types.float32(address, n), codegen


@intrinsic
def exp_sum(typingctx: Any, src: Any, dst: Any, n: Any, scale: Any, shift: Any) -> Any:
    """``dst[:n] = exp(src[:n] * scale - shift)`` (float32 rows at addresses; ``dst`` may be ``src``: in place),
    the product rounded before the subtraction, as NumPy's ``scores *= scale; scores -= max``: with ``shift`` the
    rounded scaled maximum, the maximum's exp is exactly 1, so a saturated row is exactly one-hot. Returns the
    sum of the new values (float32, 16 lanes combined pairwise)."""
    if not (all(isinstance(t, types.Integer) for t in (src, dst, n)) and scale == types.float32
            and shift == types.float32):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        src_, dst_, n_ = (context.cast(builder, x, t, types.int64) for x, t in zip(args[:3], signature.args[:3]))
        s, m = _broadcast(builder, args[3]), builder.fneg(_broadcast(builder, args[4]))
        zero = _splat(0.0)

        def body(j: Any, mask: Any, state: list) -> list:
            x = ops.load(_pointer(builder, src_, j), mask, zero)
            y = ops.exp(builder.fadd(builder.fmul(x, s), m))
            ops.store(y, _pointer(builder, dst_, j), mask)
            return [builder.fadd(state[0], builder.select(mask, y, zero))]

        (total,) = _row_loop(builder, n_, [zero], body)
        return _reduce(builder, total, builder.fadd)

    return types.float32(src, dst, n, scale, shift), codegen


@intrinsic
def subtract_twice(typingctx: Any, src: Any, dst: Any, n: Any, first: Any, second: Any) -> Any:
    """``dst[:n] = (src[:n] - first) - second`` (float32 rows at addresses, two roundings in that order: log_softmax's
    ``(x - max) - log(sum)``, where ``x - max`` is exact near the maximum)."""
    if not (all(isinstance(t, types.Integer) for t in (src, dst, n)) and first == types.float32
            and second == types.float32):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        src_, dst_, n_ = (context.cast(builder, x, t, types.int64) for x, t in zip(args[:3], signature.args[:3]))
        a, b = _broadcast(builder, args[3]), _broadcast(builder, args[4])

        def body(j: Any, mask: Any, state: list) -> list:
            x = ops.load(_pointer(builder, src_, j), mask, _splat(0.0))
            ops.store(builder.fsub(builder.fsub(x, a), b), _pointer(builder, dst_, j), mask)
            return state

        _row_loop(builder, n_, [], body)
        return context.get_dummy_value()

    return types.void(src, dst, n, first, second), codegen


@intrinsic
def row_sum(typingctx: Any, address: Any, n: Any) -> Any:
    """``sum(row[:n])`` of a float32 row at ``address``: 16 lanes, combined pairwise."""
    if not (isinstance(address, types.Integer) and isinstance(n, types.Integer)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        address_, n_ = (context.cast(builder, a, t, types.int64) for a, t in zip(args, signature.args))
        zero = _splat(0.0)

        def body(j: Any, mask: Any, state: list) -> list:
            return [builder.fadd(state[0], ops.load(_pointer(builder, address_, j), mask, zero))]

        (total,) = _row_loop(builder, n_, [zero], body)
        return _reduce(builder, total, builder.fadd)

    return types.float32(address, n), codegen


@intrinsic
def minus_exp_times(typingctx: Any, g: Any, y: Any, dst: Any, n: Any, factor: Any) -> Any:
    """``dst[:n] = g[:n] - exp(y[:n]) * factor`` (float32 rows at addresses): log_softmax's backward."""
    if not (all(isinstance(t, types.Integer) for t in (g, y, dst, n)) and factor == types.float32):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        g_, y_, dst_, n_ = (context.cast(builder, x, t, types.int64) for x, t in zip(args[:4], signature.args[:4]))
        f = _broadcast(builder, args[4])

        def body(j: Any, mask: Any, state: list) -> list:
            gv = ops.load(_pointer(builder, g_, j), mask, _splat(0.0))
            e = ops.exp(ops.load(_pointer(builder, y_, j), mask, _splat(0.0)))
            ops.store(builder.fsub(gv, builder.fmul(e, f)), _pointer(builder, dst_, j), mask)
            return state

        _row_loop(builder, n_, [], body)
        return context.get_dummy_value()

    return types.void(g, y, dst, n, factor), codegen


def _scaling(divides: bool) -> Any:
    """The intrinsic ``row[:n] /= total`` (``divides``) or ``row[:n] *= total`` in place (float32)."""

    def scaling(typingctx: Any, address: Any, n: Any, total: Any) -> Any:
        if not (isinstance(address, types.Integer) and isinstance(n, types.Integer) and total == types.float32):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            ops = _Ops(builder)
            address_ = context.cast(builder, args[0], signature.args[0], types.int64)
            n_ = context.cast(builder, args[1], signature.args[1], types.int64)
            by = _broadcast(builder, args[2])
            apply = builder.fdiv if divides else builder.fmul

            def body(j: Any, mask: Any, state: list) -> list:
                pointer = _pointer(builder, address_, j)
                ops.store(apply(ops.load(pointer, mask, _splat(1.0)), by), pointer, mask)
                return state

            _row_loop(builder, n_, [], body)
            return context.get_dummy_value()

        return types.void(address, n, total), codegen

    scaling.__name__ = "divide" if divides else "multiply"
    return intrinsic(scaling)


# row[:n] /= total (one rounding per element, as NumPy's ``p /= p.sum()``; a vector division takes ~7 cycles here)
divide = _scaling(True)
# row[:n] *= factor: with factor = 1 / total, softmax's normalization as PyTorch's CPU kernels do it (two roundings,
# within 1 ulp more than dividing; ~10x faster than the division)
multiply = _scaling(False)


def _mapping(name: str, body: Callable[[_Ops, Any], Any]) -> Any:
    """An intrinsic ``f(src, dst, n)``: ``dst[i] = body(src[i])`` for i < n over float32 arrays at addresses
    (16 at a time, the last vector masked)."""

    def mapping(typingctx: Any, src: Any, dst: Any, n: Any) -> Any:
        if not all(isinstance(t, types.Integer) for t in (src, dst, n)):
            return None

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            ops = _Ops(builder)
            src_, dst_, n_ = (context.cast(builder, x, t, types.int64) for x, t in zip(args, signature.args))

            def step(j: Any, mask: Any, state: list) -> list:
                ops.store(body(ops, ops.load(_pointer(builder, src_, j), mask, _splat(0.0))),
                          _pointer(builder, dst_, j), mask)
                return state

            _row_loop(builder, n_, [], step)
            return context.get_dummy_value()

        return types.void(src, dst, n), codegen

    mapping.__name__ = name
    return intrinsic(mapping)


def _gelu(ops: _Ops, x: Any) -> Any:
    """gelu's NumPy formula ``0.5 * x * (1 + erf(x * 0.70710677))`` operation by operation in float32 (no fused
    multiply-add outside erf): a fused graph replaying that formula with :data:`erf_map` gets the same bits."""
    b = ops.builder
    e = erf_vector(ops, b.fmul(x, _splat(1.0 / np.sqrt(2.0))))
    return b.fmul(b.fmul(_splat(0.5), x), b.fadd(_splat(1.0), e))


# dst[:n] = erf(src[:n]) and gelu(src[:n]) (float32, 16 lanes)
erf_map = _mapping("erf_map", erf_vector)
gelu_map = _mapping("gelu_map", _gelu)


_NEAR = 1.0  # gelu's derivative takes cdf from erf's small piece below this |x|


def _gelu_derivative(ops: _Ops, x: Any) -> Any:
    """gelu'(x) = cdf(x) + x pdf(x) of 16 float32 values in float32 arithmetic, without the cancellation of
    ``1 + erf`` for negative x (PyTorch's float32 kernel loses up to all digits of cdf there: 10% at x = -5):
    cdf(-|x|) = exp(-x^2 / 2) erfcx(|x| / sqrt 2) / 2, with erfcx (the scaled erfc, smooth and ~1 / s) a fitted
    polynomial in u = (s - 3) / (s + 3) and exp(-x^2 / 2) from x^2 split into its rounded value and the fma
    residual (exp(-hi / 2) (1 - lo / 2): x^2's rounding would cost up to 25 ulp at |x| = 10). cdf(x) is 1 - that
    for x >= 0. Within 1e-6 relative of the exact value away from gelu''s zero at x = -0.75 (there, within 4e-8
    absolute); exp(-x^2 / 2) below float32's normal range (|x| > 13.2) is flushed to 0 (the exact derivative is
    below 2e-37 there); +-inf and NaN give NaN, as PyTorch's (inf * pdf = inf * 0)."""
    b = ops.builder
    sign_bit = ir.Constant(_IVEC, [ir.Constant(_I32, -0x80000000)] * LANES)
    a = b.bitcast(b.and_(b.bitcast(x, _IVEC), b.not_(sign_bit)), _VEC)  # |x|
    s = b.fmul(a, _splat(1.0 / np.sqrt(2.0)))
    k = _splat(C.ERFCX_K)
    u = b.fdiv(b.fsub(s, k), b.fadd(s, k))
    r = _horner(ops, C.ERFCX, ops.fma(u, _splat(C.ERFCX_INV_HALF), _splat(-C.ERFCX_MID * C.ERFCX_INV_HALF)))
    hi = b.fmul(x, x)
    lo = ops.fma(x, x, b.fneg(hi))  # x^2 - hi exactly
    lo = b.select(b.fcmp_ordered("<", a, _splat(1e4)), lo, _splat(0.0))  # (x^2 overflows: no residual, no NaN)
    e0 = ops.exp(b.fmul(hi, _splat(-0.5)))
    e = ops.fma(e0, b.fmul(lo, _splat(-0.5)), e0)  # exp(-(hi + lo) / 2)
    tail = b.fmul(b.fmul(e, r), _splat(0.5))  # cdf(-|x|)
    cdf = b.select(b.fcmp_ordered("<", x, _splat(0.0)), tail, b.fsub(_splat(1.0), tail))
    # |x| < 1: 0.5 + 0.5 erf(x / sqrt 2) by erf's small piece (erf_vector's), more accurate near cdf = 0.5
    y = b.fmul(x, _splat(1.0 / np.sqrt(2.0)))
    small = C.ERF_SMALL[:-1] + (C.ERF_SMALL[-1] - 1.0,)
    t = b.fmul(ops.fma(y, y, _splat(-C.ERF_SMALL_MID)), _splat(C.ERF_SMALL_INV_HALF))
    near = ops.fma(ops.fma(y, _horner(ops, small, t), y), _splat(0.5), _splat(0.5))
    cdf = b.select(b.fcmp_ordered("<", a, _splat(_NEAR)), near, cdf)
    return ops.fma(x, b.fmul(e, _splat(1.0 / np.sqrt(2.0 * np.pi))), cdf)


@intrinsic
def gelu_backward_map(typingctx: Any, g: Any, x: Any, dst: Any, n: Any) -> Any:
    """``dst[:n] = g[:n] * gelu'(x[:n])`` (float32 arrays at addresses, 16 lanes): gelu's backward."""
    if not all(isinstance(t, types.Integer) for t in (g, x, dst, n)):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        ops = _Ops(builder)
        g_, x_, dst_, n_ = (context.cast(builder, v, t, types.int64) for v, t in zip(args, signature.args))

        def step(j: Any, mask: Any, state: list) -> list:
            d = _gelu_derivative(ops, ops.load(_pointer(builder, x_, j), mask, _splat(0.0)))
            gv = ops.load(_pointer(builder, g_, j), mask, _splat(0.0))
            ops.store(builder.fmul(gv, d), _pointer(builder, dst_, j), mask)
            return state

        _row_loop(builder, n_, [], step)
        return context.get_dummy_value()

    return types.void(g, x, dst, n), codegen


@numba.njit(cache=True, nogil=True)
def gelu_backward_f32(g, x, out, start, stop):  # pragma: no cover - compiled
    """``out[start:stop] = g * gelu'(x)`` over ``[start, stop)`` of flat float32 arrays (contiguous: run_elementwise's)."""
    gelu_backward_map(g[start:stop].ctypes.data, x[start:stop].ctypes.data, out[start:stop].ctypes.data, stop - start)


@numba.njit(inline="always")
def _map_addresses(which, src, dst, n):  # pragma: no cover - compiled
    if which == 0:
        erf_map(src, dst, n)
    else:
        gelu_map(src, dst, n)


@numba.njit(inline="always")
def _map(which, x, out, start, stop):  # pragma: no cover - compiled
    """erf (``which`` 0) or gelu (1) of ``x[start:stop]`` into ``out[start:stop]`` (1-D float32): the vector
    passes read and write contiguous memory, so strided views go through contiguous copies."""
    if x.strides[0] == 4 and out.strides[0] == 4:  # the flat arrays of run_elementwise
        _map_addresses(which, x[start:stop].ctypes.data, out[start:stop].ctypes.data, stop - start)
        return
    src = np.ascontiguousarray(x[start:stop])
    dst = np.empty(stop - start, np.float32)
    _map_addresses(which, src.ctypes.data, dst.ctypes.data, stop - start)
    out[start:stop] = dst


@numba.njit(cache=True, nogil=True)
def erf_f32(x, out, start, stop):  # pragma: no cover - compiled
    """``out[start:stop] = erf(x[start:stop])`` (float32, 1-D): ``cpu_math_kernels.erf_float32_first``'s kernel."""
    _map(0, x, out, start, stop)


@numba.njit(cache=True, nogil=True)
def gelu_f32(x, out, start, stop):  # pragma: no cover - compiled
    """``out[start:stop] = gelu(x[start:stop])``, bit for bit ``0.5 * x * (1 + erf_f32(x * 0.70710677))``."""
    _map(1, x, out, start, stop)


@numba.njit(cache=True, nogil=True)
def softmax_rows_f32(x, out, r0, r1):  # pragma: no cover - compiled
    """Rows ``[r0, r1)`` of ``out = softmax(x)`` over the last dim of (rows, n) C-contiguous float32 arrays: the
    row maximum subtracted, exp and sum in 16 lanes, times the sum's reciprocal (as PyTorch's CPU kernel)."""
    n = x.shape[1]
    one = np.float32(1.0)
    for r in range(r0, r1):
        src, dst = x[r].ctypes.data, out[r].ctypes.data
        total = exp_sum(src, dst, n, one, row_max(src, n))
        multiply(dst, n, one / total)


@numba.njit(cache=True, nogil=True)
def log_softmax_rows_f32(x, out, r0, r1):  # pragma: no cover - compiled
    """Rows ``[r0, r1)`` of ``out = (x - max) - log(sum(exp(x - max)))`` (float32 (rows, n), C-contiguous): the exps
    written to ``out`` as scratch and summed in 16 lanes, the log of the sum in float64, rounded once."""
    n = x.shape[1]
    one = np.float32(1.0)
    for r in range(r0, r1):
        src, dst = x[r].ctypes.data, out[r].ctypes.data
        top = row_max(src, n)
        total = exp_sum(src, dst, n, one, top)
        subtract_twice(src, dst, n, top, np.float32(np.log(np.float64(total))))


@numba.njit(cache=True, nogil=True)
def log_softmax_backward_rows_f32(g, y, out, r0, r1):  # pragma: no cover - compiled
    """Rows ``[r0, r1)`` of ``out = g - exp(y) * sum(g)`` (float32 (rows, n), C-contiguous), 16 lanes."""
    n = y.shape[1]
    for r in range(r0, r1):
        minus_exp_times(g[r].ctypes.data, y[r].ctypes.data, out[r].ctypes.data, n, row_sum(g[r].ctypes.data, n))


def build() -> dict[str, Callable]:
    """erf, gelu, softmax and log_softmax rows, log_softmax's backward rows (float32): eager gelu and a fused graph's erf (``special_function("erf")``
    on float32) run these, so they agree bit for bit. The 16-lane vectors are split in two on AVX2-only CPUs."""
    return {"erf_f32": erf_f32, "gelu_f32": gelu_f32, "gelu_backward_f32": gelu_backward_f32,
            "softmax_rows_f32": softmax_rows_f32,
            "log_softmax_rows_f32": log_softmax_rows_f32, "log_softmax_backward_rows_f32": log_softmax_backward_rows_f32}
