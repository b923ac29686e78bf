"""More of PyTorch's math: inverse/hyperbolic trig, log2/log10/exp2/expm1, erfinv, atan2, cumprod,
cummax/cummin (primitives) and composites over existing ops: square, frac, hypot, logaddexp, xlogy,
nan_to_num, lerp, addcmul/addcdiv, addmm/addmv/addr/baddbmm/addbmm, outer, tensordot, diag,
diagonal, trace, isclose, count_nonzero, masked_select, meshgrid, clamp_min/clamp_max.

A function is a primitive only where a composite would lose accuracy (expm1 near 0, sinh by
exps, exact log2 of powers of two) or has no decomposition (atan, erfinv, the cumulative scans).

Example:
    >>> import ember
    >>> ember.log2(ember.tensor([8.0])), ember.outer(ember.arange(2), ember.arange(3)).shape
    (tensor([3.]), ember.Size([2, 3]))
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes, return_types
from ember.backends import special_function
from ember.ops import dispatch, elementwise as ew, fma as _fma, grad_join, layout, linalg, movement, reductions as red, views
from ember.ops.elementwise import _unary, conj_if_complex as _cj, elementwise_rule
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops.opmath_composite import float32_composite
from ember.onnx import complex_emitters, emitters as to_onnx, special_emitters
from ember.amp.policy import autocast_policy
from ember.autograd import grad_mode
from ember.autograd.node import named_backward
from ember import _numpy_names

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


# ---- unary primitives ------------------------------------------------------------------------------
def _zero_grad(ctx: Any, g: Any) -> tuple:
    return ew._zero_grad(ctx, g)  # zeros, also for an infinite or NaN upstream (PyTorch's zeros_like)


TAN = _unary("tan", lambda xp, x: xp.tan(x), lambda ctx, g: (g * _cj(1 + ctx.out * ctx.out),), save="output", onnx=complex_emitters.tan, float_only=True)
ASIN = _unary("asin", lambda xp, x: xp.arcsin(x), lambda ctx, g: (g * _cj(ew.rsqrt(1 - ctx.inputs[0] * ctx.inputs[0])),),
              onnx="Asin", float_only=True)
ACOS = _unary("acos", lambda xp, x: xp.arccos(x), lambda ctx, g: (-g * _cj(ew.rsqrt(1 - ctx.inputs[0] * ctx.inputs[0])),),
              onnx="Acos", float_only=True)
ATAN = _unary("atan", lambda xp, x: xp.arctan(x), lambda ctx, g: (g / _cj(1 + ctx.inputs[0] * ctx.inputs[0]),),
              onnx="Atan", float_only=True)
SINH = _unary("sinh", lambda xp, x: xp.sinh(x), lambda ctx, g: (g * _cj(cosh(ctx.inputs[0])),), onnx=complex_emitters.sinh, float_only=True)
COSH = _unary("cosh", lambda xp, x: xp.cosh(x), lambda ctx, g: (g * _cj(sinh(ctx.inputs[0])),), onnx=complex_emitters.cosh, float_only=True)
ASINH = _unary("asinh", lambda xp, x: xp.arcsinh(x),
               lambda ctx, g: (g * _cj(ew.rsqrt(ctx.inputs[0] * ctx.inputs[0] + 1)),), onnx="Asinh",
               float_only=True)
ACOSH = _unary("acosh", lambda xp, x: xp.arccosh(x),
               lambda ctx, g: (g * _cj(ew.rsqrt(ctx.inputs[0] * ctx.inputs[0] - 1)),), onnx="Acosh",
               float_only=True)
ATANH = _unary("atanh", lambda xp, x: xp.arctanh(x), lambda ctx, g: (g / _cj(1 - ctx.inputs[0] * ctx.inputs[0]),),
               onnx="Atanh", float_only=True)
# The gradient is exp(x), not expm1(x) + 1, which rounds to 0 below x = -17 in float32 (elu's tail).
EXPM1 = _unary("expm1", lambda xp, x: xp.expm1(x), lambda ctx, g: (g * _cj(ew.exp(ctx.inputs[0])),), float_only=True, onnx=to_onnx.expm1)
LOG2 = _unary("log2", lambda xp, x: xp.log2(x), lambda ctx, g: (g / _cj(ctx.inputs[0] * _LN2),), float_only=True, onnx=to_onnx.log_base(2))
LOG10 = _unary("log10", lambda xp, x: xp.log10(x), lambda ctx, g: (g / _cj(ctx.inputs[0] * _LN10),), float_only=True, onnx=to_onnx.log_base(10))
EXP2 = _unary("exp2", lambda xp, x: xp.exp2(x), lambda ctx, g: (g * _cj(ctx.out) * _LN2,), save="output", float_only=True, onnx=to_onnx.exp2)
TRUNC = _unary("trunc", lambda xp, x: xp.trunc(x), _zero_grad, save="none", onnx=to_onnx.trunc)


def _erfinv_impl(xp: Any, x: Any) -> Any:
    ew.real_only("erfinv", x)
    out = special_function(xp, "erfinv")(x).astype(x.dtype, copy=False)
    # erfinv is odd: torch's erfinv(-0.0) is -0.0 (SciPy's gives +0.0); zeros pass through with their sign
    return xp.where(x == 0, x, out).astype(x.dtype, copy=False)


ERFINV = _unary("erfinv", _erfinv_impl, lambda ctx, g: (g * ew.exp(ctx.out * ctx.out) * (math.sqrt(math.pi) / 2),),
                save="output", float_only=True, onnx=special_emitters.erfinv)


# erfc and the scaled erfcx = exp(x^2) erfc(x) are primitives: 1 - erf(x) loses every digit of the upper
# tail (erfc(3) was off by 1e-3 in float32, erfc(6) was 0 in float64), and log_ndtr's lower tail needs erfcx.
def _special_impl(name: str) -> Any:
    return lambda xp, x: ew.real_only(name, x) or special_function(xp, name)(x).astype(x.dtype, copy=False)


ERFC = _unary("erfc", _special_impl("erfc"),
              lambda ctx, g: (g * ew.exp(-ctx.inputs[0] * ctx.inputs[0]) * (-2 / math.sqrt(math.pi)),),
              float_only=True, onnx=special_emitters.erfc)
def _erfcx_vjp(ctx: Any, g: Any) -> tuple:
    """d/dx erfcx(x) = 2 x erfcx(x) - 2 / sqrt(pi): the two terms cancel for large x (relative error ~ 2 x^2 eps),
    so it is formed in float64, and above x = 30 from the asymptotic series
    -(2 / sqrt(pi)) r (1/2 - 3/4 r + 15/8 r^2 - 105/16 r^3 + 945/32 r^4), r = 1 / x^2 (error < 1e-12)."""
    (x,), out = ctx.inputs, ctx.out
    wide = x.dtype.itemsize < 8
    xw, ow = (x.to(dtypes.float64), out.to(dtypes.float64)) if wide else (x, out)
    direct = xw * ow * 2.0 - 2 / math.sqrt(math.pi)
    big = ew.clamp(xw, min=30.0)
    r = 1.0 / (big * big)
    series = r * (0.5 - r * (0.75 - r * (1.875 - r * (6.5625 - r * 29.53125)))) * (-2 / math.sqrt(math.pi))
    slope = ew.where(xw > 30.0, series, direct)
    return (g * (slope.to(x.dtype) if wide else slope),)


ERFCX = _unary("erfcx", _special_impl("erfcx"), _erfcx_vjp, save="both", float_only=True, onnx=special_emitters.erfcx)


# ---- binary primitive: atan2 -----------------------------------------------------------------------
def _atan2_vjp(ctx: Any, g: Any) -> tuple:
    y, x = ctx.inputs
    # PyTorch's convention: where x^2 + y^2 is 0 (the origin, or both tiny enough to underflow) the
    # gradient is 0, not 0 * inf = NaN.
    denom = x * x + y * y
    recip = ew.where(denom == 0, 0.0, 1.0 / ew.where(denom == 0, 1.0, denom))
    gy = g * x * recip if ctx.needs[0] else None
    gx = -g * y * recip if ctx.needs[1] else None
    return gy, gx


def _hypot_vjp(ctx: Any, g: Any) -> tuple:
    a, b = ctx.inputs
    out = ctx.out
    safe = ew.where(out == 0, 1.0, out)  # hypot(0, 0): gradient 0 (norm's: a documented decision, docs/special-points.md; torch 2.13 gives NaN), not 0 / 0
    ga = ew.where(out == 0, 0.0, g * a / safe) if ctx.needs[0] else None
    gb = ew.where(out == 0, 0.0, g * b / safe) if ctx.needs[1] else None
    return ga, gb


# A primitive because sqrt(a^2 + b^2) overflows for |a| > 1.8e19 in float32 (hypot(0, 1e30) = inf);
# the namespace's hypot scales as C's does.
HYPOT = register(OpDef(
    name="hypot", category="binary", impl=lambda xp, a, b: xp.hypot(a, b), vjp=_hypot_vjp, save="both",
    shape_rule=elementwise_rule(), float_only=True, ufunc="hypot", onnx=to_onnx.hypot,
))


ATAN2 = register(OpDef(
    name="atan2", category="binary", impl=lambda xp, y, x: xp.arctan2(y, x), vjp=_atan2_vjp,
    shape_rule=elementwise_rule(), float_only=True, ufunc="arctan2", onnx=to_onnx.atan2,
))


# ---- cumulative scans ------------------------------------------------------------------------------
def _flip_cumsum(t: Any, dim: int) -> Any:
    """Reverse cumulative sum: out_k = sum_{i >= k} t_i."""
    return t.flip((dim,)).cumsum(dim).flip((dim,))


def _cumprod_impl(xp: Any, x: Any, dim: int) -> Any:
    if x.dtype.kind in "fc" and x.dtype.itemsize == 4 * (1 + (x.dtype.kind == "c")):
        # float32 / complex64 multiply in double and round each output, as PyTorch's CPU kernel (its acc_type):
        # cumprod([1e30, -1e30, 1e-40]) is [1e30, -inf, -1e20]
        wide = xp.cumprod(x.astype(xp.float64 if x.dtype.kind == "f" else xp.complex128), axis=dim)
        out = wide.astype(x.dtype).reshape(x.shape)
        return xp.ascontiguousarray(out) if x.ndim else out  # row-major, as torch's scans
    out = xp.cumprod(x, axis=dim, dtype=xp.int64 if x.dtype.kind in "biu" else None)
    return out.reshape(x.shape) if x.ndim == 0 else xp.ascontiguousarray(out)


def _cumprod_grad(x: Any, g: Any, dim: int, depth: int = 2) -> Any:
    """grad_k = sum_{i >= k} g_i prod_{j <= i, j != k} x_j, without dividing by zero.

    Before the first zero z of a slice it is revcumsum(g * cumprod(x)) / x_k; at z it is
    revcumsum(g * cumprod(y)) with y = x with x_z set to 1; after z it is x_z times the same
    gradient for y (recursively, ``depth`` levels). Each branch is the exact function on its
    region, so second derivatives are right too (for up to ``depth`` zeros per slice, as needed).
    """
    zero = x == 0
    zeros_so_far = zero.cumsum(dim)
    before = zeros_so_far == 0
    first_zero = ew.logical_and(zero, zeros_so_far == 1)
    plain = _flip_cumsum(g * cumprod(x, dim), dim) / ew.where(zero, 1.0, x)
    y = ew.where(first_zero, 1.0, x)
    at_zero = _flip_cumsum(g * cumprod(y, dim), dim)
    after: Any = 0.0
    if depth > 1:
        # x_z itself (0, but it carries the derivative with respect to x_z)
        zero_value = red.sum(ew.where(first_zero, x, 0.0), dim, keepdim=True)
        after = _cumprod_grad(y, g, dim, depth - 1) * zero_value
    return ew.where(before, plain, ew.where(first_zero, at_zero, after))


def _cumprod_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    if x.ndim == 0:
        return (g,)
    if x.dtype.is_complex:  # the rule is J^T g; PyTorch's convention wants J^H g = conj(J^T conj(g))
        return (ew.conj(_cumprod_grad(x, ew.conj(g), ctx.attrs["dim"])),)
    return (_cumprod_grad(x, g, ctx.attrs["dim"]),)


CUMPROD = register(OpDef(
    name="cumprod", batch="dim", category="reduction", impl=_cumprod_impl, vjp=_cumprod_vjp, save="inputs",
    shape_rule=lambda x, dim: Spec(x.shape, dtypes.int64 if x.dtype.category < 2 else x.dtype, x.device),
    onnx=None,
))


def _cum_extreme_impl(fn: str):
    def impl(xp: Any, x: Any, dim: int) -> tuple:
        ew._no_complex("cum" + fn[:3], x)
        if x.ndim == 0:
            return x.copy(), xp.zeros((), dtype=xp.int64)
        values = getattr(xp, fn).accumulate(x, axis=dim)
        # An element is the new running extreme when it equals it (ties: the later index wins) or is NaN
        # (NaN propagates, and each later NaN takes over), as in PyTorch.
        hit = x == values
        if x.dtype.kind == "f" or x.dtype.kind == "V":
            hit = hit | xp.isnan(x)
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        positions = xp.arange(x.shape[dim], dtype=xp.int64).reshape(shape)
        idx = xp.maximum.accumulate(xp.where(hit, positions, 0), axis=dim)
        return xp.ascontiguousarray(values), xp.ascontiguousarray(idx)  # row-major, as torch's scans

    return impl


def _cum_extreme_vjp(ctx: Any, g: Any) -> tuple:
    _, idx = ctx.out
    if len(ctx.input_meta[0]) == 0:
        return (g[0],)
    from ember.creation import zeros

    base = zeros(ctx.input_meta[0], dtype=g[0].dtype, device=g[0].device)
    return (base.scatter_add(ctx.attrs["dim"], idx.detach(), g[0]),)


def _cum_extreme_rule(x: Spec, dim: int) -> tuple:
    return Spec(x.shape, x.dtype, x.device), Spec(x.shape, dtypes.int64, x.device)


CUMMAX = register(OpDef(name="cummax", batch="dim", category="reduction", impl=_cum_extreme_impl("maximum"), vjp=_cum_extreme_vjp,
                        save="output", saved_outputs=(1,), num_outputs=2, nondiff_outputs=(1,), shape_rule=_cum_extreme_rule))
CUMMIN = register(OpDef(name="cummin", batch="dim", category="reduction", impl=_cum_extreme_impl("minimum"), vjp=_cum_extreme_vjp,
                        save="output", saved_outputs=(1,), num_outputs=2, nondiff_outputs=(1,), shape_rule=_cum_extreme_rule))


# ---- public: unary ---------------------------------------------------------------------------------
def tan(input: Any) -> Any:
    return dispatch.unary(TAN, input)


def asin(input: Any) -> Any:
    return dispatch.unary(ASIN, input)


def acos(input: Any) -> Any:
    return dispatch.unary(ACOS, input)


def atan(input: Any) -> Any:
    return dispatch.unary(ATAN, input)


def sinh(input: Any) -> Any:
    return dispatch.unary(SINH, input)


def cosh(input: Any) -> Any:
    return dispatch.unary(COSH, input)


def asinh(input: Any) -> Any:
    return dispatch.unary(ASINH, input)


def acosh(input: Any) -> Any:
    return dispatch.unary(ACOSH, input)


def atanh(input: Any) -> Any:
    return dispatch.unary(ATANH, input)


def expm1(input: Any) -> Any:
    return dispatch.unary(EXPM1, input)


def log2(input: Any) -> Any:
    return dispatch.unary(LOG2, input)


def log10(input: Any) -> Any:
    return dispatch.unary(LOG10, input)


def exp2(input: Any) -> Any:
    return dispatch.unary(EXP2, input)


def trunc(input: Any) -> Any:
    return dispatch.unary(TRUNC, input)


def erfinv(input: Any) -> Any:
    return dispatch.unary(ERFINV, input)


def erfc(input: Any) -> Any:
    """1 - erf(x) without cancellation: ``erfc(6.0)`` is 2.15e-17 in float64."""
    return dispatch.unary(ERFC, input)


def erfcx(input: Any) -> Any:
    """exp(x^2) * erfc(x), finite for large x (``torch.special.erfcx``)."""
    return dispatch.unary(ERFCX, input)


arcsin, arccos, arctan, arcsinh, arccosh, arctanh, fix = asin, acos, atan, asinh, acosh, atanh, trunc


def square(input: Any) -> Any:
    """``input * input``; bool becomes int64 as in PyTorch."""
    if input.dtype is dtypes.bool_:
        input = dispatch.cast(input, dtypes.int64)
    return input * input


def frac(input: Any) -> Any:
    """The fractional part, ``input - trunc(input)`` (keeps the sign)."""
    return input - trunc(input)


def logit(input: Any, eps: float | None = None) -> Any:
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    ew.real_only("logit", input)
    if isinstance(input, dispatch.Tensor) and not input.dtype.is_floating_point:  # bool/int: torch's float result
        input = input.to(dtypes.get_default_dtype())
    p = input if eps is None else ew.clamp(input, eps, 1 - eps)
    # The value is torch's log(p / (1 - p)), each step rounded to the dtype (half: every value as torch's; the
    # difference form was 1-2 half ulps off for ~50%, and up to 0.7% relative in float32 near p = 0.5).
    value = ew.log(p / (1 - p))
    if not (isinstance(p, dispatch.Tensor) and p.requires_grad and grad_mode.is_grad_enabled()):
        return value
    # log p - log1p(-p) carries the gradient: 1/p + 1/(1 - p) is inf at 0 and 1 (PyTorch's), not 0 * inf = NaN.
    grad_form = ew.log(p) - ew.log1p(-p)
    fixed = grad_form.detach()
    if eps is None:  # torch's logit_backward is NaN outside [0, 1] (1/p + 1/(1 - p) is finite there: -1.33 at -0.5)
        outside = ew.logical_or(p.detach() < 0, p.detach() > 1)
        # (in p's dtype: a where of two numbers is float32, which turned half results into float32)
        grad_form = grad_form * dispatch.cast(ew.where(outside, math.nan, 1.0), grad_form.dtype)
    return ew.where(ew.isfinite(fixed), value.detach() + (grad_form - fixed), grad_form)  # (exactly value's bits)


def deg2rad(input: Any) -> Any:
    if input.dtype.is_complex:  # torch's refusal (angles are real)
        raise RuntimeError(f"deg2rad is not supported for complex tensors (got {input.dtype}); convert .real")
    return input * (math.pi / 180.0)


def rad2deg(input: Any) -> Any:
    if input.dtype.is_complex:  # torch's refusal (angles are real)
        raise RuntimeError(f"rad2deg is not supported for complex tensors (got {input.dtype}); convert .real")
    return input * (180.0 / math.pi)


def clamp_min(input: Any, min: Any) -> Any:  # noqa: A002
    return ew.clamp(input, min=min)


def clamp_max(input: Any, max: Any) -> Any:  # noqa: A002
    return ew.clamp(input, max=max)


def _finfo(np_dtype: Any) -> Any:
    return dtypes.finfo_np(np_dtype)


def nan_to_num(input: Any, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Any:
    """Replace NaN by ``nan`` and +/-inf by ``posinf``/``neginf`` (default: the dtype's extremes); complex tensors
    in their real and imaginary parts separately, as PyTorch."""
    if input.dtype.is_complex:
        parts = [nan_to_num(p, nan, posinf, neginf) for p in (ew.real_part(input), ew.imag_part(input))]
        return dispatch.apply(OPS["complex"], tuple(parts))
    if not input.dtype.is_floating_point:
        return input.clone()
    if input.requires_grad and grad_mode.is_grad_enabled():
        # torch's gradient is g * isfinite(x): a NaN or infinite upstream stays NaN at the replaced elements (a where
        # gave exactly 0 there)
        value = nan_to_num(input.detach(), nan, posinf, neginf)
        return grad_join.scaled_grad_join(value, input, dispatch.cast(ew.isfinite(input.detach()), input.dtype))
    info = _finfo(input.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = ew.where(input == math.inf, posinf, input)
    out = ew.where(input == -math.inf, neginf, out)
    return ew.where(ew.isnan(input), nan, out)


# ---- public: binary --------------------------------------------------------------------------------
def _tensors(a: Any, b: Any, op: str) -> tuple:
    """Both operands as tensors of one floating dtype (Python numbers take the tensor's dtype)."""
    from ember.creation import tensor

    if not isinstance(a, dispatch.Tensor) and not isinstance(b, dispatch.Tensor):
        raise TypeError(f"{op}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}")
    target = dtypes.result_type(a, b)
    if not (target.is_floating_point or target.is_complex):  # complex stays complex (its imaginary part was cast away)
        target = dtypes.get_default_dtype()
    like = a if isinstance(a, dispatch.Tensor) else b
    a = dispatch.cast(a, target) if isinstance(a, dispatch.Tensor) else tensor(a, dtype=target, device=like.device)
    b = dispatch.cast(b, target) if isinstance(b, dispatch.Tensor) else tensor(b, dtype=target, device=like.device)
    return a, b


def atan2(input: Any, other: Any) -> Any:
    """Angle of the point (other, input), in (-pi, pi]."""
    return dispatch.binary(ATAN2, input, other)


arctan2 = atan2


def hypot(input: Any, other: Any) -> Any:
    """sqrt(input**2 + other**2)."""
    ew.real_only("hypot", input, other)
    a, b = _tensors(input, other, "hypot")
    return dispatch.apply(HYPOT, (a, b))


@float32_composite
def logaddexp(input: Any, other: Any) -> Any:
    """log(exp(input) + exp(other)) without overflow: max + log1p(exp(-|input - other|))."""
    a, b = _tensors(input, other, "logaddexp")
    if a.dtype.is_complex or b.dtype.is_complex:  # PyTorch's complex logaddexp (the imaginary part was dropped)
        first = ew.real_part(a) >= ew.real_part(b)
        big, small = ew.where(first, a, b), ew.where(first, b, a)
        return big + ew.log1p(ew.exp(small - big))
    # max + log1p(exp(min - max)) with max/min picked by where (not maximum/abs): the gradient is then
    # sigmoid(a - b) on both sides of a tie, so second derivatives at a == b are torch's (abs and maximum
    # have kinks there that cancel in the value but zeroed the curvature). Equal infinities would give
    # inf - inf = NaN; their difference is taken as 0 instead.
    first = a >= b
    big, small = ew.where(first, a, b), ew.where(first, b, a)
    diff = ew.where(ew.logical_and(a == b, ew.isinf(a)), 0.0, small - big)
    return big + ew.log1p(ew.exp(diff))


@float32_composite
def logaddexp2(input: Any, other: Any) -> Any:
    """log2(2**input + 2**other)."""
    a, b = _tensors(input, other, "logaddexp2")
    return logaddexp(a * _LN2, b * _LN2) / _LN2


def xlogy(input: Any, other: Any) -> Any:
    """input * log(other), defined as 0 where input == 0 (unless other is NaN).

    Where input == 0 and log(other) is not finite, other is replaced by 1 (so 0 * log 1 = 0 and no
    inf/NaN reaches the gradients); elsewhere d/d input = log(other), as in PyTorch. float16/bfloat16 as torch's
    kernel: log(other) in float32 rounded to the half dtype, then the product in float32 rounded once (rounding
    once at the end differed in the last bit for ~25% of values).
    """
    ew.real_only("xlogy", input, other)
    x, y = _tensors(input, other, "xlogy")
    low = x.dtype if x.dtype in (dtypes.float16, dtypes.bfloat16) else None
    if low is not None:
        x, y = dispatch.cast(x, dtypes.float32), dispatch.cast(y, dtypes.float32)
    bad_log = ew.logical_or(y <= 0, ew.isinf(y))
    log = ew.log(ew.where(ew.logical_and(x == 0, bad_log), 1.0, y))
    if low is not None:
        log = dispatch.cast(dispatch.cast(log, low), dtypes.float32)
    out = x * log
    # x == 0 gives +0 whatever log(y)'s sign (0 * log(0.5) is -0; -0 + 0 is +0), as PyTorch; the gradient
    # still flows through ``out`` in both branches
    out = ew.where(x == 0, out + 0.0, out)
    return out if low is None else dispatch.cast(out, low)


@named_backward("LerpBackward0", inputs=((0, "input"), (1, "end")))
def lerp(input: Any, end: Any, weight: Any) -> Any:
    """input + weight * (end - input), in PyTorch's two-sided form (exact at weight 0 and 1). ``end`` and a
    weight tensor of rank >= 1 must have input's dtype (checked before half inputs are widened to float32).

    Example:
        >>> ember.lerp(ember.tensor([0.0, 1.0]), ember.tensor([2.0, 3.0]), 0.5)
        tensor([1., 2.])
    """
    if isinstance(input, dispatch.Tensor):
        if isinstance(end, dispatch.Tensor) and end.dtype is not input.dtype:
            raise RuntimeError(f"lerp: expected dtype {input.dtype} for `end` but got dtype {end.dtype}; convert it "
                               f"with .to({input.dtype})")
        if isinstance(weight, dispatch.Tensor) and weight.ndim > 0 and weight.dtype is not input.dtype:
            raise RuntimeError(f"lerp: expected dtype {input.dtype} for `weight` but got dtype {weight.dtype}; "
                               f"convert it with .to({input.dtype})")
        if not isinstance(weight, dispatch.Tensor) and not input.is_complex():
            if isinstance(dtypes.python_scalar(weight), complex):
                raise RuntimeError(f"lerp: value {weight!r} cannot be converted to type {input.dtype} without "
                                   f"overflow (a complex weight needs complex tensors)")
    return _lerp(input, end, weight)


@float32_composite
def _lerp(input: Any, end: Any, weight: Any) -> Any:
    if isinstance(weight, dispatch.Tensor) and weight.ndim == 0 and isinstance(input, dispatch.Tensor):
        # a 0-d weight takes part in promotion like a number: cast first, so 1 - weight rounds as torch's does
        weight = dispatch.cast(weight, dtypes.result_type(input, weight))
    if _fma.fusable_floats(input, end, weight) and isinstance(input, dispatch.Tensor):
        return _lerp_fused(input, end, weight)
    diff = end - input
    if isinstance(weight, dispatch.Tensor):
        return ew.where(ew.abs(weight) < 0.5, input + weight * diff, end - diff * (1 - weight))
    if isinstance(input, dispatch.Tensor) and input.is_floating_point():
        # a number weight is rounded to input's dtype first and 1 - weight computed in it, as torch does
        # (in Python's float64, 1 - 0.9 rounds to a different float32 than float32(1) - float32(0.9))
        weight = input.dtype.np.type(weight)
        if abs(weight) < 0.5:
            return input + diff * weight.item()
        return end - diff * (1 - weight).item()
    if abs(weight) < 0.5:
        return input + diff * weight
    return end - diff * (1 - weight)


def _lerp_fused(input: Any, end: Any, weight: Any) -> Any:
    """PyTorch's CPU lerp for floating tensors: one fused multiply-add from the nearer end,
    ``fma(w, end - input, input)`` for ``|w| < 0.5``, else ``fma(w - 1, end - input, end)`` (w - 1 in the dtype)."""
    diff = end - input
    if isinstance(weight, dispatch.Tensor):
        small = ew.abs(weight) < 0.5
        # (1.0, not 1: a fused Numba kernel computes float32 - int in float64)
        out = _fma.fma(ew.where(small, weight, weight - 1.0), diff, ew.where(small, input, end))
    else:
        weight = input.dtype.np.type(weight)  # a number weight is rounded to input's dtype first
        if abs(weight) < 0.5:
            out = _fma.fma(weight.item(), diff, input)
        else:
            out = _fma.fma((weight - input.dtype.np.type(1)).item(), diff, end)
    data = input._data
    if type(data) is np.ndarray and data.ndim > 1 and not data.flags.c_contiguous:
        # torch's TensorIterator lays the result out by (input, end, weight), input first (diff and the fma's
        # own operands put end first on the w >= 0.5 side)
        out._data = layout.elementwise_result(np, out._data, tuple(
            v._data if isinstance(v, dispatch.Tensor) else v for v in (input, end, weight)))
    return out


def _pointwise3(name: str, input: Any, tensor1: Any, tensor2: Any, value: Any) -> tuple:
    """addcmul/addcdiv's operands in their common dtype (all three take part in promotion, as in PyTorch: an
    int8 * uint8 product inside a complex addcmul is computed in complex, not wrapped) and ``value`` checked."""
    # (a Python number where torch wants a tensor is accepted as a weak operand, as elsewhere in ember)
    common = dtypes.result_type(*(dtypes.python_scalar(v) for v in (input, tensor1, tensor2)))
    if common is dtypes.bool_:
        raise NotImplementedError(f'"{name}_cpu_out" not implemented for \'Bool\' (all three operands are bool); '
                                  f"convert them with .int() or .float()")
    kinds = [dtypes.result_type(dtypes.python_scalar(t)).category for t in (tensor1, tensor2)]
    if name == "addcdiv" and max(kinds) <= 1:
        raise RuntimeError("addcdiv: Integer division with addcdiv is no longer supported (tensor1 and tensor2 are "
                           "integers); use input + value * torch.trunc(tensor1 / tensor2) for the old behaviour or "
                           "convert them to floats for a true division")
    value = ew.scalar_factor(value, common, "value", name)
    a, b, c = (dispatch.cast(t, common) if isinstance(t, dispatch.Tensor) and t.dtype is not common else t
               for t in (input, tensor1, tensor2))
    return a, b, c, value


@named_backward("AddcmulBackward0", inputs=((0, "input"), (1, "tensor1"), (2, "tensor2")))
@float32_composite
def addcmul(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """input + value * tensor1 * tensor2, computed in the common dtype of the three tensors."""
    input, tensor1, tensor2, value = _pointwise3("addcmul", input, tensor1, tensor2, value)
    if _fma.fusable_floats(input, tensor1, tensor2) and isinstance(value, (int, float)):
        # PyTorch's CPU kernel: fma(value * tensor1, tensor2, input), one rounding for the add
        # (a float factor: an integer literal would widen a fused Numba loop's float32 math to float64)
        return _fma.fma(tensor1 if value == 1 else tensor1 * float(value), tensor2, input)
    product = tensor1 * tensor2
    return input + (product if value == 1 else product * value)


@named_backward("AddcdivBackward0", inputs=((0, "input"), (1, "tensor1"), (2, "tensor2")))
@float32_composite
def addcdiv(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Any:
    """input + value * tensor1 / tensor2, computed in the common dtype of the three tensors."""
    input, tensor1, tensor2, value = _pointwise3("addcdiv", input, tensor1, tensor2, value)
    if _fma.fusable_floats(input, tensor1, tensor2):  # PyTorch's order: input + (value * tensor1) / tensor2
        return input + (tensor1 if value == 1 else tensor1 * float(value)) / tensor2
    quotient = tensor1 / tensor2
    return input + (quotient if value == 1 else quotient * value)


def _scaled_sum(input: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """beta * input + alpha * product; with beta == 0 input is ignored (its NaNs too), as in PyTorch,
    whose gradient for input is still beta * grad = 0 * grad (NaN where grad is NaN or inf).

    Integer products keep their dtype, as torch's: a float beta/alpha is truncated to an integer first
    (``addmv(int8, .., beta=0.2, alpha=0.6)`` is 0, not a float32 result); bool products are logical
    (``(beta and input) or (alpha and product)``)."""
    if isinstance(product, dispatch.Tensor) and not (product.dtype.is_floating_point or product.dtype.is_complex):
        if product.dtype is dtypes.bool_:
            kept = input.to(dtypes.bool_) if bool(beta) else ew.logical_and(input, False)
            return ew.logical_or(kept, product) if bool(alpha) else kept.expand(tuple(product.shape)).clone()
        if isinstance(beta, float):
            beta = math.trunc(beta)
        if isinstance(alpha, float):
            alpha = math.trunc(alpha)
    out = product if alpha == 1 else product * alpha
    if beta == 0:
        if not (grad_mode.STATE.enabled and isinstance(input, dispatch.Tensor) and input.requires_grad):
            return out
        # input ** 0 is 1 for every input (NaN and inf too) and its gradient is 0 * grad; subtracting
        # 1 - 1 = +0.0 leaves every value of out as it is, -0.0 included (adding +0.0 would not), and
        # the two minus signs give input exactly 0 * grad, the sign of the zero included.
        return out - (1 - input ** 0)
    return out + (input if beta == 1 else input * beta)


def _check_ndim(op: str, **tensors: Any) -> None:
    for name, (t, ndim) in tensors.items():
        if t.ndim != ndim:
            raise RuntimeError(f"{op}: {name} must be a {ndim}-D tensor, got shape {tuple(t.shape)}")


@autocast_policy("lower")
@named_backward("AddmmBackward0", inputs=((0, "input"), (1, "mat1"), (2, "mat2")))
@float32_composite
def addmm(input: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * input + alpha * (mat1 @ mat2)."""
    _check_ndim("addmm", mat1=(mat1, 2), mat2=(mat2, 2))
    return _scaled_sum(input, linalg.mm(mat1, mat2), beta, alpha)


@autocast_policy("native")
@float32_composite
def addmv(input: Any, mat: Any, vec: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * input + alpha * (mat @ vec)."""
    _check_ndim("addmv", mat=(mat, 2), vec=(vec, 1))
    return _scaled_sum(input, linalg.matmul(mat, vec), beta, alpha)


@autocast_policy("native")
@float32_composite
def addr(input: Any, vec1: Any, vec2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@autocast_policy("lower")
@float32_composite
def baddbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * input + alpha * (batch1 @ batch2), batch by batch."""
    return _scaled_sum(input, linalg.bmm(batch1, batch2), beta, alpha)


@autocast_policy("lower")
@float32_composite
def addbmm(input: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    """beta * input + alpha * sum_b (batch1[b] @ batch2[b])."""
    product = linalg.bmm(batch1, batch2)
    # the sum over batches in the product's dtype (an int8 sum would widen to int64: torch's result is int8)
    return _scaled_sum(input, red.sum(product, 0, dtype=product.dtype), beta, alpha)


def outer(input: Any, vec2: Any) -> Any:
    """The outer product of two 1-D tensors: out[i, j] = input[i] * vec2[j]."""
    _check_ndim("outer", input=(input, 1), vec2=(vec2, 1))
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


ger = outer


def tensordot(a: Any, b: Any, dims: Any = 2) -> Any:
    """Contract ``dims`` (an int: last of a with first of b; or two lists of dims) and keep the rest.

    Example:
        >>> ember.tensordot(ember.ones(2, 3, 4), ember.ones(3, 4, 5), 2).shape
        ember.Size([2, 5])
    """
    if isinstance(dims, dispatch.Tensor):
        dims = dims.tolist()
    if isinstance(dims, (int, np.integer)):
        dims = int(dims)
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot: dims ({dims}) must be in [0, {min(a.ndim, b.ndim)}] for shapes "
                               f"{tuple(a.shape)} and {tuple(b.shape)}")
        dims_a, dims_b = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
    dims_a = [d % a.ndim for d in dims_a] if a.ndim else []
    dims_b = [d % b.ndim for d in dims_b] if b.ndim else []
    pairs = list(zip(dims_a, dims_b))
    if len(dims_a) == len(dims_b) and any(a.shape[i] != b.shape[j] for i, j in pairs):
        # torch broadcasts a size-1 dim against its partner (its sum then counts the one slice n times)
        a = a.expand(tuple(b.shape[dict(pairs)[d]] if d in dims_a and a.shape[d] == 1 else n
                           for d, n in enumerate(a.shape)))
        b = b.expand(tuple(a.shape[dict((j, i) for i, j in pairs)[d]] if d in dims_b and n == 1 else n
                           for d, n in enumerate(b.shape)))
    if len(dims_a) != len(dims_b) or any(a.shape[i] != b.shape[j] for i, j in pairs):
        raise RuntimeError(f"tensordot: contracted dims {dims_a} of {tuple(a.shape)} and {dims_b} of "
                           f"{tuple(b.shape)} must pair up with equal sizes")
    free_a = [d for d in range(a.ndim) if d not in dims_a]
    free_b = [d for d in range(b.ndim) if d not in dims_b]
    k = int(np.prod([a.shape[d] for d in dims_a], dtype=np.int64))
    out_shape = tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b)
    left = a.permute(free_a + dims_a).reshape(-1, k)
    right = b.permute(dims_b + free_b).reshape(k, -1)
    return linalg.matmul(left, right).reshape(out_shape)


def _diag_positions(rows: int, cols: int, offset: int, device: Any) -> tuple:
    from ember.creation import arange

    length = max(0, min(rows - max(-offset, 0), cols - max(offset, 0)))
    r = arange(length, device=device) + max(-offset, 0)
    c = arange(length, device=device) + max(offset, 0)
    return r, c


def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The diagonal over dims (dim1, dim2), appended as the last dim: a view (see ember.ops.views).

    Example:
        >>> ember.diagonal(ember.eye(3) * 2)
        tensor([2., 2., 2.])
    """
    return views.diagonal(input, offset, dim1, dim2)


_diagonal = diagonal  # diag's argument is named `diagonal`, as in PyTorch


def diag(input: Any, diagonal: int = 0) -> Any:
    """1-D input: a square matrix with ``input`` on the given diagonal; 2-D: that diagonal."""
    from ember.creation import zeros

    if input.ndim == 2:  # a copy, as torch's diag (torch.diagonal is the view): writes must not reach input
        return _diagonal(input, diagonal).clone()
    if input.ndim != 1:
        raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {tuple(input.shape)}")
    n = input.shape[0] + abs(diagonal)
    rows, cols = _diag_positions(n, n, diagonal, input.device)
    index, index_tensors = movement.split_index((rows, cols), input.device)
    return movement.index_put(zeros((n, n), dtype=input.dtype, device=input.device), index, index_tensors, input)


def diag_embed(input: Any, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Any:
    """Batched diag: the last dim of ``input`` becomes the diagonal of new trailing matrices."""
    from ember.creation import eye, zeros

    n = input.shape[-1] + abs(offset)
    if offset == 0 and input.dtype is not dtypes.bool_:
        # An identity pattern selects input[..., i] at (i, i): elementwise, so vmap batches it without a loop
        # (index_put with an Ellipsis runs once per sample; every linalg backward builds diagonals), and NaN or inf
        # stay on the diagonal (a product with the identity would spread inf * 0 = NaN).
        out = ew.where(eye(n, dtype=dtypes.bool_, device=input.device), input.unsqueeze(-1), 0)
    else:
        rows, cols = _diag_positions(n, n, offset, input.device)
        out = zeros(tuple(input.shape[:-1]) + (n, n), dtype=input.dtype, device=input.device)
        index, index_tensors = movement.split_index((Ellipsis, rows, cols), input.device)
        out = movement.index_put(out, index, index_tensors, input)
    if (dim1, dim2) != (-2, -1):
        out = views.movedim(out, (-2, -1), (dim1, dim2))
    return out


@autocast_policy("fp32")
def trace(input: Any) -> Any:
    """Sum of the main diagonal of a 2-D tensor."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a 2-D tensor, got shape {tuple(input.shape)}")
    return red.sum(diagonal(input))


def cumprod(input: Any, dim: int = _numpy_names.REQUIRED, *, dtype: Any = None, axis: Any = None) -> Any:
    """Cumulative product along ``dim`` (integers accumulate in int64)."""
    if axis is not None or dim is _numpy_names.REQUIRED:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("cumprod", dim, axis, _numpy_names.REQUIRED)
    if dtype is not None:
        input = red.to_reduction_dtype(input, dtype)
    (d,) = red.normalize_dims(dim, input.ndim, "cumprod")
    return red._in_dtype(dispatch.apply(CUMPROD, (input,), {"dim": d}), dtype)


def _cum_extreme(op: OpDef, input: Any, dim: int) -> Any:
    (d,) = red.normalize_dims(dim, input.ndim, op.name)
    values, indices = dispatch.apply(op, (input,), {"dim": d})
    return return_types.make(getattr(return_types, op.name), values, indices)


def cummax(input: Any, dim: int = _numpy_names.REQUIRED, *, axis: Any = None) -> Any:
    """Running maximum along ``dim`` and the index where it was reached (the latest on ties)."""
    if axis is not None or dim is _numpy_names.REQUIRED:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("cummax", dim, axis, _numpy_names.REQUIRED)
    return _cum_extreme(CUMMAX, input, dim)


def cummin(input: Any, dim: int = _numpy_names.REQUIRED, *, axis: Any = None) -> Any:
    """Running minimum along ``dim`` and the index where it was reached (the latest on ties)."""
    if axis is not None or dim is _numpy_names.REQUIRED:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("cummin", dim, axis, _numpy_names.REQUIRED)
    return _cum_extreme(CUMMIN, input, dim)


def isclose(input: Any, other: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    """|input - other| <= atol + rtol * |other| elementwise; equal infinities are close."""
    if not isinstance(other, dispatch.Tensor):
        from ember.creation import full

        other = full(tuple(input.shape), other, dtype=input.dtype, device=input.device)
    if input.dtype is not other.dtype:
        target = dtypes.promote_types(input.dtype, other.dtype)
        input, other = dispatch.cast(input, target), dispatch.cast(other, target)
    a, b = input.detach(), other.detach()
    close = a == b
    if a.dtype.is_floating_point or a.dtype.is_complex:  # complex: the distance is the modulus (both parts count)
        finite = ew.logical_and(ew.isfinite(a), ew.isfinite(b))
        within = ew.abs(a - b) <= atol + rtol * ew.abs(b)
        close = ew.logical_or(close, ew.logical_and(finite, within))
        if equal_nan:
            close = ew.logical_or(close, ew.logical_and(ew.isnan(a), ew.isnan(b)))
    elif a.dtype is not dtypes.bool_:
        diff = ew.abs(dispatch.cast(a, dtypes.float64) - dispatch.cast(b, dtypes.float64))
        close = ew.logical_or(close, diff <= atol + rtol * ew.abs(dispatch.cast(b, dtypes.float64)))
    return close


def count_nonzero(input: Any, dim: Any = None, *, axis: Any = None) -> Any:
    """Number of nonzero elements (over ``dim``), as int64."""
    if axis is not None:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("count_nonzero", dim, axis, None)
    return red.sum(input != 0, dim)


def masked_select(input: Any, mask: Any) -> Any:
    """The elements of ``input`` where the (broadcast) boolean ``mask`` holds, as a 1-D tensor."""
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_select: expected a bool mask, got {mask.dtype}")
    shape = ew._broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    if tuple(input.shape) != shape:
        input = input.expand(shape)
    if tuple(mask.shape) != shape:
        mask = mask.expand(shape)
    return input[mask]


def meshgrid(*tensors: Any, indexing: str = "ij") -> tuple:
    """Coordinate grids from 1-D tensors; ``indexing='xy'`` swaps the first two output dims.

    Example:
        >>> gx, gy = ember.meshgrid(ember.arange(2), ember.arange(3), indexing="ij")
        >>> tuple(gx.shape)
        (2, 3)
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    flat = [t.reshape(-1) for t in tensors]
    sizes = [t.shape[0] for t in flat]
    order = list(range(len(flat)))
    if indexing == "xy" and len(flat) >= 2:
        order[0], order[1] = 1, 0
    out_shape = tuple(sizes[i] for i in order)
    grids = []
    for i, t in enumerate(flat):
        shape = [1] * len(flat)
        shape[order.index(i)] = sizes[i]
        grids.append(t.reshape(shape).expand(out_shape))
    return tuple(grids)

