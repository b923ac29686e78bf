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
from ember.ops import dispatch, fma_fast, layout
from ember.ops.fma_exact import _fma32, _fma32_numpy, _fma64, _round_to_odd, _two_sum  # noqa: F401 (re-exported)
from ember.ops.elementwise import sum_to, elementwise_rule
from ember.ops.registry import OpDef, register

_PIECE = 1 << 14  # elements per piece of the one-pass routes: their complex scratch (256 KiB) stays in cache


def _fma_routes(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray) -> bool:
    """``out = fma(a, b, c)`` by :mod:`ember.ops.fma_fast`'s one-pass routes, piece by piece (each piece read
    before it is written: ``out`` may be an operand); False (nothing written) where no route is verified.
    Operands broadcast to ``out`` (C-contiguous): size-1 ones act as numbers, others are made contiguous."""
    n = out.size
    flat = []
    for v in (a, b, c):
        if v.size == 1:
            flat.append(v.reshape(()))
        elif v.shape == out.shape:
            flat.append(np.ascontiguousarray(v).reshape(-1))
        else:
            flat.append(np.ascontiguousarray(np.broadcast_to(v, out.shape)).reshape(-1))
    target = out.reshape(-1)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # the complex route's imaginary part
        for start in range(0, n, _PIECE):
            piece = [v if v.ndim == 0 else v[start:start + _PIECE] for v in flat]
            if not fma_fast.fma_into(*piece, target[start:start + _PIECE]):
                return False  # decided on the first piece (a route's verdict holds for the process)
    return True


def fma_arrays(xp: Any, a: Any, b: Any, c: Any, out: Any = None) -> Any:
    """``a * b + c`` with one rounding for float32/float64 arrays (scalars take the arrays' dtype); other
    dtypes (integers, complex) compute ``a * b + c`` as written. ``out``: an array of the result's shape and
    dtype to write into; it may be one of the inputs.

    NumPy arrays take a one-pass route of :mod:`ember.ops.fma_fast` where this machine passed its self-test
    (BLAS axpy for a number times an array, NumPy's fused complex multiply otherwise), else the float64
    methods below.

    Example: fma_arrays(np, np.float32([0.1]), np.float32([3]), np.float32([1]))  # 1.3 rounded once
    """
    dt = next((v.dtype for v in (a, b, c) if isinstance(v, xp.ndarray)), None)
    if out is not None and dt is None:
        dt = out.dtype
    if dt is None or dt not in (np.float32, np.float64):
        if out is not None:
            xp.copyto(out, a * b + c, casting="unsafe")
            return out
        return a * b + c
    a, b, c = (v if isinstance(v, xp.ndarray) and v.dtype == dt else xp.asarray(v, dtype=dt) for v in (a, b, c))
    if xp is not np:  # a device namespace (CuPy): the elementwise steps broadcast by themselves
        result = (_fma64 if dt == np.float64 else _fma32)(xp, a, b, c)
        if out is None:
            return result
        xp.copyto(out, result, casting="unsafe")
        return out
    shape = np.broadcast_shapes(a.shape, b.shape, c.shape)
    direct = (out is not None and isinstance(out, np.ndarray) and out.dtype == dt and out.shape == shape
              and out.flags.c_contiguous)
    result = out if direct else np.empty(shape, dtype=dt)
    if result.size == 0:
        return out if out is not None else result
    if not _fma_routes(a, b, c, result):
        if dt == np.float32:
            a, b, c = np.broadcast_arrays(a, b, c)
            _fma32_numpy(a, b, c, result)
        else:
            result[...] = _fma64(np, *np.broadcast_arrays(a, b, c))
    if out is not None and not direct:
        np.copyto(out, result, casting="unsafe")
        return out
    return result


def _fma_impl(xp: Any, a: Any, b: Any, c: Any) -> Any:
    # the fuser's symbolic namespace: one "fma" step (asked off NumPy only: a missing attribute of the numpy module
    # costs ~4 us, through its module __getattr__)
    if xp is not np and getattr(xp, "records_steps", False):
        return special_function(xp, "fma")(a, b, c)
    out = fma_arrays(xp, a, b, c)  # NumPy, or a device namespace (CuPy: the same bit-level steps)
    if out.ndim > 1 and xp is np:
        for v in (a, b, c):
            if v.__class__ is np.ndarray and not v.flags.c_contiguous and v.ndim > 1:
                # torch's TensorIterator result layout, the add's operand (``input``: addcmul's, lerp's, add's) first
                return layout.elementwise_result(np, out, (c, a, b))
    return out


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
