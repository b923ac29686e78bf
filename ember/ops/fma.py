"""Fused multiply-add: ``a * b + c`` rounded once, as PyTorch's vectorized CPU kernels compute it.

PyTorch's CPU kernels for ``add(alpha=)``/``sub(alpha=)``, ``addcmul`` and ``lerp`` are compiled with fused
multiply-adds (``vec::fmadd`` or the compiler's contraction of ``x + alpha * y``), so their results are the
exact ``a * b + c`` rounded once; NumPy has no fma, and two roundings differ in the last bit in ~20% of
values, enough to make SGD-momentum/Adam trajectories drift from torch's after a few steps. This module
computes the single rounding exactly with NumPy:

* float32: the float64 product of two float32 values is exact; the float64 sum is made *round-to-odd*
  (TwoSum gives its exact error; an inexact sum with an even last bit moves one step toward the error), and
  rounding a round-to-odd value with 53 bits to 24 bits is the correct rounding of the exact value (Boldo and
  Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using rounding to odd", 2008:
  round-to-odd at precision p + 2 or more never double-rounds).
* float64: the same paper's emulation: Dekker/Veltkamp's exact product ``uh + ul = a * b``, TwoSum
  ``th + tl = c + uh``, ``v = RO(tl + ul)`` (round-to-odd), result ``RN(th + v)``. Exact while nothing over- or
  underflows (products above ~2**995 or below ~2**-969 in magnitude); those fall back to ``a * b + c``.

Fused kernels (ember/graph/passes/fuse.py) take the op as one ``fma`` step: their NumPy replay calls
:func:`fma_arrays`, their Numba loops LLVM's ``llvm.fma`` (the hardware's single rounding, or the C library's
exact ``fma``). On a CUDA device (CuPy) the same array steps run there.

Example:
    >>> import numpy as np
    >>> a, b, c = np.float32([1 + 2**-12]), np.float32([1 - 2**-12]), np.float32([-1])
    >>> float(fma_arrays(np, a, b, c)[0]) == -2.0**-24   # two roundings give 0
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.backends import special_function
from ember.ops import dispatch
from ember.ops.elementwise import sum_to, elementwise_rule
from ember.ops.registry import OpDef, register

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into two 26-bit halves
_SAFE_PRODUCT = 2.0 ** 995  # |a|, |b| below this: the split cannot overflow
_TINY_PRODUCT = 2.0 ** -969  # |a * b| above this: the product's error is representable (no underflow)


def _two_sum(xp: Any, x: Any, y: Any) -> tuple:
    """s, e with s = fl(x + y) and s + e == x + y exactly (Knuth's TwoSum, no ordering needed)."""
    s = x + y
    bv = s - x
    e = (x - (s - bv)) + (y - bv)
    return s, e


def _round_to_odd(xp: Any, s: Any, e: Any) -> Any:
    """The round-to-odd value of s + e (s = fl(s + e)): an inexact s with an even last bit becomes its
    neighbour on e's side (the two neighbours of an exact value differ in the last bit, so that one is odd)."""
    bits = s.view(xp.int64)
    move = (e != 0) & xp.isfinite(e) & ((bits & 1) == 0)  # (e is NaN when s is infinite: leave s)
    if not bool(move.any()):
        return s
    # a step toward e: +1 on the bit pattern when e has s's sign (away from zero), else -1
    step = xp.where((e > 0) == (s > 0), 1, -1).astype(xp.int64)
    return xp.where(move, (bits + step).view(xp.float64), s)


def _split(xp: Any, x: Any) -> tuple:
    t = x * _SPLIT
    hi = t - (t - x)
    return hi, x - hi


def _fma64(xp: Any, a: Any, b: Any, c: Any) -> Any:
    uh = a * b
    ah, al = _split(xp, a)
    bh, bl = _split(xp, b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl  # uh + ul == a * b exactly (Dekker)
    th, tl = _two_sum(xp, c, uh)
    v = _round_to_odd(xp, *_two_sum(xp, tl, ul))
    out = th + v
    # out of the proof's range (overflowing split, underflowing product error, inf/nan): the plain formula
    risky = ~((xp.abs(a) < _SAFE_PRODUCT) & (xp.abs(b) < _SAFE_PRODUCT)
              & ((xp.abs(uh) > _TINY_PRODUCT) | (uh == 0)) & xp.isfinite(out))
    if bool(risky.any()):
        out = xp.where(risky, a * b + c, out)
    return out


_CHUNK = 1 << 15  # elements per piece: float64 temporaries of 256 KiB stay in cache
_LOW29 = np.uint64((1 << 29) - 1)
_MID29 = np.uint64(1 << 28)  # a float64 whose 29 dropped bits are 1000...0 lies on a float32 rounding midpoint


def _fma32_numpy(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 path on NumPy arrays, fast: the float64 sum rounded to float32 is already right unless it
    landed exactly on a float32 midpoint (or in float32's subnormal range), which only those elements
    recompute with the round-to-odd method. In cache-sized pieces; each piece reads all its inputs before it
    writes, so ``out`` may be one of the inputs (a compiled optimizer's update in place)."""
    if out is None:
        out = np.empty(a.shape, dtype=np.float32)
    fa, fb, fc = a.reshape(-1), b.reshape(-1), c.reshape(-1)
    fo = out.reshape(-1)  # a view: `out` is contiguous (fresh, or a planner-chosen state of this shape)
    n = fo.size
    s = np.empty(min(n, _CHUNK), dtype=np.float64)
    low = np.empty(s.size, dtype=np.uint64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        piece = s[:stop - start]
        np.multiply(fa[start:stop], fb[start:stop], out=piece, dtype=np.float64)  # exact
        np.add(piece, fc[start:stop], out=piece, dtype=np.float64)
        bits = np.bitwise_and(piece.view(np.uint64), _LOW29, out=low[:stop - start])
        suspect = np.equal(bits, _MID29)
        # float32's subnormal range (below 2^-126) with a margin; judged on the float64 sum, before writing
        magnitude = np.abs(piece)
        if magnitude.min() < 2.0 ** -124:
            suspect |= magnitude < 2.0 ** -124
        k = np.flatnonzero(suspect) + start if suspect.any() else None
        fixed = _fma32(np, fa[k], fb[k], fc[k]) if k is not None else None  # read before `out` is written
        fo[start:stop] = piece
        if k is not None:
            fo[k] = fixed
    return out


def _fma32(xp: Any, a: Any, b: Any, c: Any) -> Any:
    p = a.astype(xp.float64) * b.astype(xp.float64)  # exact: 24 + 24 bits
    s = _round_to_odd(xp, *_two_sum(xp, p, c.astype(xp.float64)))
    return s.astype(xp.float32)


def fma_arrays(xp: Any, a: Any, b: Any, c: Any, out: Any = None) -> Any:
    """``a * b + c`` with one rounding for float32/float64 arrays (scalars take the arrays' dtype); other
    dtypes (integers, complex) compute ``a * b + c`` as written. ``out``: an array of the result's shape and
    dtype to write into; it may be one of the inputs.

    Example: fma_arrays(np, np.float32([0.1]), np.float32([3]), np.float32([1]))  # 1.3 rounded once
    """
    if out is not None:
        if isinstance(out, np.ndarray) and out.dtype == np.float32 and out.flags.c_contiguous and xp is np:
            a, b, c = (v if isinstance(v, np.ndarray) and v.dtype == np.float32 else np.asarray(v, np.float32)
                       for v in (a, b, c))
            a, b, c = np.broadcast_arrays(a, b, c)
            if a.shape == out.shape:
                return _fma32_numpy(a, b, c, out) if out.size else out
        xp.copyto(out, fma_arrays(xp, a, b, c), casting="unsafe")  # the whole result exists before the write
        return out
    dt = next((v.dtype for v in (a, b, c) if hasattr(v, "dtype") and getattr(v, "ndim", 0) >= 0
               and isinstance(v, xp.ndarray)), None)
    if dt is None or dt not in (np.float32, np.float64):
        return a * b + c
    a, b, c = (v if isinstance(v, xp.ndarray) and v.dtype == dt else xp.asarray(v, dtype=dt) for v in (a, b, c))
    if xp is not np:  # a device namespace (CuPy): the elementwise steps broadcast by themselves
        return (_fma64 if dt == np.float64 else _fma32)(xp, a, b, c)
    a, b, c = np.broadcast_arrays(a, b, c)
    if a.size == 0:
        return np.empty(a.shape, dtype=dt)
    return _fma32_numpy(a, b, c) if dt == np.float32 else _fma64(np, a, b, c)


def _fma_impl(xp: Any, a: Any, b: Any, c: Any) -> Any:
    if getattr(xp, "records_steps", False):  # the fuser's symbolic namespace: one "fma" step
        return special_function(xp, "fma")(a, b, c)
    return fma_arrays(xp, a, b, c)  # NumPy, or a device namespace (CuPy: the same bit-level steps)


_NUMBA_FMA: list = []


def numba_fma() -> Any:
    """A Numba function ``fma(a, b, c)`` for compiled fused loops: LLVM's ``llvm.fma`` (one instruction with
    FMA hardware, the C library's exact ``fma`` otherwise) on float32 when all three are float32, else on
    float64. (A float32 fma whose scalar operand became a float64 literal in a float64 loop rounds twice; the
    fuser's loops keep one float dtype, so that mix does not arise from ember's ops.)"""
    if _NUMBA_FMA:
        return _NUMBA_FMA[0]
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def fma(typingctx: Any, x: Any, y: Any, z: Any) -> Any:
        if not all(isinstance(t, (types.Float, types.Integer)) for t in (x, y, z)):
            return None
        # float32 unless a float64 takes part (an integer literal, e.g. alpha=3, is the float32 torch converts to)
        out = types.float64 if any(t == types.float64 for t in (x, y, z)) else types.float32

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            values = [context.cast(builder, v, t, out) for v, t in zip(args, signature.args)]
            lty = context.get_value_type(out)
            name = "llvm.fma.f32" if out == types.float32 else "llvm.fma.f64"
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lty, [lty, lty, lty]), name)
            return builder.call(fn, values)

        return out(x, y, z), codegen

    _NUMBA_FMA.append(fma)
    return fma


def _grad(ctx: Any, g: Any, k: int) -> Any:
    """d(a*b + c): g * b for a, g * a for b, g for c, summed back over broadcast dimensions."""
    target = ctx.inputs[k]
    if not isinstance(target, dispatch.Tensor):
        return None
    part = g if k == 2 else g * ctx.inputs[1 - k]
    return sum_to(part, tuple(target.shape))


def _onnx(b: Any, n: Any) -> str:
    return b.node("Add", [b.node("Mul", list(n.inputs[:2])), n.inputs[2]])


FMA = register(OpDef(
    name="fma", category="ternary", impl=_fma_impl,
    vjp=(lambda ctx, g: _grad(ctx, g, 0), lambda ctx, g: _grad(ctx, g, 1), lambda ctx, g: _grad(ctx, g, 2)),
    shape_rule=elementwise_rule(), onnx=_onnx,
    doc="a * b + c rounded once (PyTorch's CPU kernels' fused multiply-add)",
))


def fma(a: Any, b: Any, c: Any) -> Any:
    """``a * b + c`` rounded once, on tensors (at least one) and numbers of one floating dtype.

    Example:
        >>> import ember
        >>> x = ember.tensor([1 + 2**-12]); y = ember.tensor([1 - 2**-12])
        >>> float(fma(x, y, -1.0)) == -2.0**-24
        True
    """
    return dispatch.apply(FMA, (a, b, c))


def fusable_floats(*values: Any) -> bool:
    """Whether a kernel PyTorch fuses applies here: every tensor among ``values`` is floating (float16,
    bfloat16, float32, float64: half dtypes compute in float32) with one dtype, and none is complex."""
    dt = None
    for v in values:
        if isinstance(v, dispatch.Tensor):
            if v.dtype not in (dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16):
                return False
            if dt is None:
                dt = v.dtype
            elif v.dtype is not dt:
                return False
        elif not isinstance(v, (int, float)) or isinstance(v, bool):
            return False
    return dt is not None
