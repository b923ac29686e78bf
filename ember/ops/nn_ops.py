"""Neural-network ops: activations, softmax, normalization, dropout, embedding, one_hot, pad.

Primitives live here only where one record is clearly faster than its decomposition (gelu, silu,
softmax, log_softmax: one NumPy pass each way instead of five); their vjps are ember ops, so
higher-order gradients work. Everything else is a composite of existing primitives.

Example:
    >>> import ember
    >>> from ember.nn import functional as F
    >>> F.softmax(ember.tensor([0.0, 0.0]), dim=0)
    tensor([0.5000, 0.5000])
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ember import dtypes, random as ember_random
from ember.backends import native_kernel, special_function
from ember.backends import capture_state
from ember.backends import cpu_blas_gemm, cpu_gemm_plan, cpu_hot_worker, cpu_mkl
from ember.backends.cpu_threads import num_threads, parallel_for
from ember.backends.cpu_math_kernels import run_elementwise, run_rows
from ember.ops import (cost, dispatch, elementwise as ew, extra_math, grad_join, inplace as inplace_ops,
                       normalization, reductions as red)
from ember.ops.elementwise import elementwise_rule
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops.opmath_composite import float32_composite
from ember.ops import batching, gelu_blocks, layer_norm_split, softmax_blocks
from ember.onnx import emitters as to_onnx
from ember.amp.policy import autocast_policy
from ember.autograd import grad as autograd_grad, grad_mode
from ember.autograd.grad_mode import no_grad
from ember.autograd.node import NotArrayable, named_backward, torch_named
from ember.ops.movement import PAD, index_range, take_by_index
from ember.ops import views
from ember.ops import linalg as _linalg
from ember.ops.piecewise_linear import piecewise_linear
from ember.ops.linalg import _matmul_impl
from ember.ops.linalg import blas_context, gemm_2d, is_tiny, outer_rows

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _float_input(x: Any, op: str) -> Any:
    if not isinstance(x, dispatch.Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point tensor, got {x.dtype}; convert with .float() first")
    return x


# ---- gelu / silu primitives --------------------------------------------------------------------
def _native_float32(xp: Any, name: str, *arrays: Any) -> Any:
    """The backend's native kernel ``name`` when every array is float32 of one shape, else None."""
    kernel = native_kernel(xp, name)
    if kernel is None or any(a.dtype != xp.float32 or a.shape != arrays[0].shape for a in arrays):
        return None
    return kernel


def _gelu_impl(xp: Any, x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        if x.dtype.itemsize == 2:  # float16/bfloat16: float32 math, rounded once (PyTorch's; half math is 0.7% off)
            return _gelu_impl(xp, x.astype(xp.float32), approximate).astype(x.dtype)
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1.0 + xp.tanh(inner))
    kernel = _native_float32(xp, "gelu_f32", x)
    if kernel is not None:  # the formula below in one pass, bit for bit (cpu_math_kernels.py)
        return run_elementwise(kernel, xp.empty(x.shape, x.dtype), x)
    if xp is np and gelu_blocks.takes(x):  # the same formula in cache-sized blocks (no numba); cdf kept
        return gelu_blocks.gelu(x, _blocks_erf(xp), keep=grad_mode.STATE.enabled)  # for a backward
    return 0.5 * x * (1.0 + special_function(xp, "erf")(x * _INV_SQRT_2))


def _blocks_erf(xp: Any) -> Any:
    """The erf gelu's NumPy blocks call: None (the table erf, inlined) where float32 erf is the table's, i.e.
    no native erf kernel (``erf_float32_first``), else the backend's erf."""
    return None if native_kernel(xp, "erf_f32") is None else special_function(xp, "erf")


def _gelu_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    approximate = ctx.attrs.get("approximate", "none")
    if approximate == "tanh" and not grad_mode.STATE.enabled and g.shape == x.shape and g.dtype is x.dtype:
        return (dispatch.apply(GELU_BACKWARD, (g, x), {"approximate": "tanh"}),)  # plain backward: one op
    if approximate == "tanh":
        x2 = x * x
        t = ew.tanh((x + x2 * x * 0.044715) * _SQRT_2_OVER_PI)
        d_inner = (x2 * (3 * 0.044715) + 1.0) * _SQRT_2_OVER_PI
        return (g * ((t + 1.0) * 0.5 + x * 0.5 * (1.0 - t * t) * d_inner),)
    if not grad_mode.STATE.enabled and g.shape == x.shape and g.dtype is x.dtype:
        # Plain backward: one op (one pass with the native kernel) instead of ten elementwise ops.
        return (dispatch.apply(GELU_BACKWARD, (g, x)),)
    return (g * _gelu_derivative(x),)  # create_graph=True: differentiable ops


def _gelu_derivative(x: Any) -> Any:
    cdf = (ew.erf(x * _INV_SQRT_2) + 1.0) * 0.5
    pdf = ew.exp(x * x * -0.5) * _INV_SQRT_2PI
    return cdf + x * pdf


def _gelu_backward_impl(xp: Any, g: Any, x: Any, approximate: str = "none") -> Any:
    if approximate == "tanh":
        return _gelu_tanh_backward(xp, g, x)
    kernel = _native_float32(xp, "gelu_backward_f32", g, x)
    if kernel is not None:  # 16 float32 lanes, cdf from the scaled erfc for negative x (cpu_vector_rows)
        return run_elementwise(kernel, xp.empty(x.shape, x.dtype), g, x)
    if xp is np and gelu_blocks.takes(g, x):
        return gelu_blocks.gelu_backward(g, x, _blocks_erf(xp))
    cdf = (special_function(xp, "erf")(x * _INV_SQRT_2) + 1.0) * 0.5
    pdf = xp.exp(x * x * -0.5) * _INV_SQRT_2PI
    return g * (cdf + x * pdf)


_TANH_A = 0.044715


def _gelu_tanh_backward(xp: Any, g: Any, x: Any) -> Any:
    """``g * d/dx [0.5 x (1 + tanh(u))]``, ``u = sqrt(2/pi) (x + 0.044715 x^3)``: the native float32 kernel (in
    float64, rounded once), else NumPy in place: ``0.5 ((1 + t) + x (1 - t) (1 + t) u')``, ``t = tanh(u)``."""
    if x.dtype.itemsize == 2:  # float16/bfloat16: float32 math, rounded once
        return _gelu_tanh_backward(xp, g.astype(xp.float32), x.astype(xp.float32)).astype(x.dtype)
    kernel = _native_float32(xp, "gelu_tanh_backward_f32", g, x)
    if kernel is not None:
        return run_elementwise(kernel, xp.empty(x.shape, x.dtype), g, x)
    x2 = x * x  # (overflowing for |x| past 1.8e19 in float32: NaN there, as PyTorch's kernel)
    u = x2 * (_SQRT_2_OVER_PI * _TANH_A)
    u += _SQRT_2_OVER_PI
    u *= x
    t = xp.tanh(u, out=u)
    out = 1.0 - t
    t += 1.0
    out *= t  # (1 - t)(1 + t) first: zero at both ends (|x| past ~10) before a huge x multiplies it
    out *= x
    x2 *= 3.0 * _SQRT_2_OVER_PI * _TANH_A
    x2 += _SQRT_2_OVER_PI  # u'
    out *= x2
    out += t
    out *= g
    out *= 0.5
    return out


def _gelu_tanh_second(x: Any) -> tuple:
    """(f'(x), f''(x)) of the tanh gelu in ember ops: f' = 0.5 (1 + t) + 0.5 x (1 - t^2) u',
    f'' = (1 - t^2) (u' - x t u'^2 + 0.5 x u''), u' = k (1 + 3 a x^2), u'' = 6 k a x."""
    x2 = x * x
    t = ew.tanh((x + x2 * x * _TANH_A) * _SQRT_2_OVER_PI)
    du = (x2 * (3 * _TANH_A) + 1.0) * _SQRT_2_OVER_PI
    sech2 = 1.0 - t * t
    first = (t + 1.0) * 0.5 + x * 0.5 * sech2 * du
    second = sech2 * (du - x * t * du * du + x * x * (3.0 * _SQRT_2_OVER_PI * _TANH_A))
    return first, second


def _gelu_backward_grad_g(ctx: Any, gg: Any) -> Any:
    x = ctx.inputs[1]
    if ctx.attrs.get("approximate", "none") == "tanh":
        return gg * _gelu_tanh_second(x)[0]
    return gg * _gelu_derivative(x)


def _gelu_backward_grad_x(ctx: Any, gg: Any) -> Any:
    g, x = ctx.inputs
    if ctx.attrs.get("approximate", "none") == "tanh":
        return gg * g * _gelu_tanh_second(x)[1]
    # d/dx (cdf(x) + x pdf(x)) = pdf(x) (2 - x^2)
    return gg * g * ew.exp(x * x * -0.5) * _INV_SQRT_2PI * (2.0 - x * x)


# gelu's gradient g * gelu'(x) (either form): what gelu's plain backward runs.
GELU_BACKWARD = register(OpDef(
    name="gelu_backward", batch="elementwise", category="nn", impl=_gelu_backward_impl,
    shape_rule=lambda g, x, approximate="none": x, vjp=(_gelu_backward_grad_g, _gelu_backward_grad_x),
    float_only=True,
))


GELU = register(OpDef(
    name="gelu", category="unary", impl=_gelu_impl, vjp=_gelu_vjp, shape_rule=elementwise_rule(),
    onnx=to_onnx.gelu, float_only=True,
))


def _silu_impl(xp: Any, x: Any) -> Any:
    return x * OPS["sigmoid"].impl(xp, x)  # the stable sigmoid: silu(-30) keeps its tail


def _silu_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    s = ew.sigmoid(x)
    return (g * s * (x * (1.0 - s) + 1.0),)


SILU = register(OpDef(
    name="silu", category="unary", impl=_silu_impl, vjp=_silu_vjp, shape_rule=elementwise_rule(),
    onnx=to_onnx.silu, float_only=True,
))


# mish = x tanh(softplus(x)), PyTorch's formula. A primitive: the composite's backward formed upstream * x
# before meeting tanh's zero slope, which overflowed to inf * 0 = NaN for |x| > 1e38 (torch gives 1 there).
def _mish_impl(xp: Any, x: Any) -> Any:
    return x * xp.tanh(xp.log1p(xp.exp(x)))


def _mish_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    t = ew.tanh(ew.log1p(ew.exp(x)))
    # x enters only where 1 - t^2 > 0, i.e. x below ~20: capping it keeps +inf * 0 out (the limit 1 at +inf,
    # where torch's kernel forms inf * 0 = NaN) and changes nothing elsewhere.
    capped = ew.clamp(x, max=1e4)
    return (g * (t + capped * ew.sigmoid(x) * (1.0 - t * t)),)


MISH = register(OpDef(
    name="mish", category="unary", impl=_mish_impl, vjp=_mish_vjp, shape_rule=elementwise_rule(),
    onnx=to_onnx.mish, float_only=True,
))


# exp(x) - 1 without cancellation near 0 (elu/celu match PyTorch to the last digit).
EXPM1 = extra_math.EXPM1


# ---- logsigmoid / hardtanh primitives ---------------------------------------------------------------
# Primitives (not composites) so that the gradient at the kinks is PyTorch's without a where() per
# element (a where over random signs costs ~10x the whole formula in NumPy): logsigmoid's gradient is
# sigmoid(-x) (0.5 at 0, no cancellation in the tails); hardtanh's is 1 strictly inside (min, max) and 0
# at the corners (clamp passes the gradient at the corners, PyTorch's hardtanh does not).
def _logsigmoid_impl(xp: Any, x: Any) -> Any:
    # exp of a non-positive number: no overflow. Row-major, as torch's log_sigmoid_forward (not a TensorIterator
    # result: a permuted input gives a row-major output there)
    out = xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))
    return np.ascontiguousarray(out) if xp is np and out.ndim > 1 else out


LOGSIGMOID = register(OpDef(
    name="logsigmoid", category="unary", impl=_logsigmoid_impl, vjp=lambda ctx, g: (g * ew.sigmoid(-ctx.inputs[0]),),
    shape_rule=elementwise_rule(), float_only=True, onnx=to_onnx.logsigmoid,
))


def _hardtanh_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    lo, hi = ctx.attrs["min_val"], ctx.attrs["max_val"]
    if ctx.attrs.get("nan_grad", True):
        # not (x <= min or x >= max): NaN passes its gradient through, as PyTorch's hardtanh_backward
        inside = ew.logical_not(ew.logical_or(x <= lo, x >= hi))
    else:  # hardsigmoid_backward: min < x < max, so a NaN input gets 0
        inside = ew.logical_and(x > lo, x < hi)
    # hardtanh_backward takes self: under create_graph the gradient requires grad, with zero curvature (torch's
    # hardsigmoid_backward has no derivative: a second derivative raises there, and here)
    grad = ew.grad_mask(g, inside)
    return (ew.kink_join(grad, x) if ctx.attrs.get("nan_grad", True) else grad,)


HARDTANH = register(OpDef(
    name="hardtanh", category="unary",
    impl=lambda xp, x, min_val=-1.0, max_val=1.0, nan_grad=True: (
        xp.clip(x, int(min_val), int(max_val)) if x.dtype.kind in "iu" else xp.clip(x, min_val, max_val)),
    vjp=_hardtanh_vjp, shape_rule=elementwise_rule(), onnx=to_onnx.hardtanh,
))


def _expm1(x: Any) -> Any:
    return dispatch.unary(EXPM1, x)


# ---- softmax / log_softmax primitives ----------------------------------------------------------
def _softmax_impl(xp: Any, x: Any, dim: int) -> Any:
    if x.size == 0:  # nothing to normalize (max() of an empty axis has no identity)
        return x.copy()
    if x.ndim == 0:  # a 0-d array's arithmetic gives NumPy scalars, which the in-place steps below cannot write
        return _softmax_impl(xp, x.reshape(1), 0).reshape(())
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":  # float16/bfloat16: float32 math, rounded once (PyTorch's)
        return _softmax_impl(xp, x.astype(xp.float32), dim).astype(x.dtype)
    native = _rows_native(xp, "softmax_rows", x, dim, x)
    if native is not None:  # numba: max, exp-and-sum, scale per row in cache, on both cores
        return native
    if softmax_blocks.takes(x, dim):  # without numba: the same steps by blocks of rows in cache
        return softmax_blocks.softmax(x)
    # row-major whatever x's layout, as torch's softmax (a seeded dropout after it draws in memory order)
    shifted = xp.subtract(x, _max_kept(x, dim), order="C") if xp is np else x - _max_kept(x, dim)
    e = xp.exp(shifted, out=shifted)
    e /= _sum_kept(e, dim)
    return e


def _rows_native(xp: Any, name: str, x: Any, dim: int, *arrays: Any) -> Any:
    """The CPU row kernel ``name`` (ember/backends/cpu_math_kernels.py) along the last dim, or None (another dim,
    another device or dtype, no numba: the NumPy code)."""
    if xp is not np or dim not in (-1, x.ndim - 1) or x.size == 0 or x.__class__ is not np.ndarray:
        return None
    return run_rows(name, np.empty(x.shape, x.dtype), *arrays)


def _max_kept(x: Any, dim: int) -> Any:
    """``x.max(axis=dim, keepdims=True)``: NumPy's own reduction called directly on a NumPy array (the method's
    Python wrapper costs ~1 us of a small softmax; same function, same bits)."""
    return _MAX_REDUCE(x, axis=dim, keepdims=True) if x.__class__ is np.ndarray else x.max(axis=dim, keepdims=True)


def _sum_kept(x: Any, dim: int) -> Any:
    """``x.sum(axis=dim, keepdims=True)``, as :func:`_max_kept`."""
    return _ADD_REDUCE(x, axis=dim, keepdims=True) if x.__class__ is np.ndarray else x.sum(axis=dim, keepdims=True)


_MAX_REDUCE, _ADD_REDUCE = np.maximum.reduce, np.add.reduce


def _log_softmax_impl(xp: Any, x: Any, dim: int) -> Any:
    if x.size == 0:
        return x.copy()
    if x.ndim == 0:  # as softmax: the in-place steps need an array
        return _log_softmax_impl(xp, x.reshape(1), 0).reshape(())
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":  # float32 math (the record is not opmath-wrapped: see below)
        low = x.dtype
        shifted = x.astype(xp.float32)
        shifted -= shifted.max(axis=dim, keepdims=True)
        total = xp.exp(shifted).sum(axis=dim, keepdims=True)
        if dim in (-1, x.ndim - 1):
            # PyTorch's last-dim kernel keeps the sum of exponentials and its log in the input's dtype
            # (bit for bit torch's on random rows of 3 to 1000 elements; float32 throughout was 1 ulp off in 15%)
            shifted -= xp.log(total.astype(low).astype(xp.float32)).astype(low).astype(xp.float32)
        else:
            shifted -= xp.log(total)
        return shifted.astype(low)
    native = _rows_native(xp, "log_softmax_rows", x, dim, x)
    if native is not None:
        return native
    if softmax_blocks.takes(x, dim):
        return softmax_blocks.log_softmax(x)
    shifted = xp.subtract(x, _max_kept(x, dim), order="C") if xp is np else x - _max_kept(x, dim)  # (softmax's)
    shifted -= xp.log(_sum_kept(xp.exp(shifted), dim))
    return shifted


def _softmax_vjp(ctx: Any, g: Any) -> tuple:
    y = ctx.out
    if not grad_mode.STATE.enabled and g.shape == y.shape and g.dtype is y.dtype:
        return (dispatch.apply(SOFTMAX_BACKWARD, (g, y), {"dim": ctx.attrs["dim"]}),)  # plain backward: one op
    gy = g * y
    return (gy - y * red.sum(gy, ctx.attrs["dim"], keepdim=True),)


def _log_softmax_vjp(ctx: Any, g: Any) -> tuple:
    y = ctx.out
    if not grad_mode.STATE.enabled and g.shape == y.shape and g.dtype is y.dtype:
        return (dispatch.apply(LOG_SOFTMAX_BACKWARD, (g, y), {"dim": ctx.attrs["dim"]}),)
    return (g - ew.exp(y) * red.sum(g, ctx.attrs["dim"], keepdim=True),)


def _softmax_backward_impl(xp: Any, g: Any, y: Any, dim: int) -> Any:
    """``y * (g - sum(g * y))`` along ``dim``: softmax's gradient from its output."""
    native = _rows_native(xp, "softmax_backward_rows", y, dim, g, y)
    if native is not None:
        return native
    if softmax_blocks.takes(y, dim, g):
        return softmax_blocks.softmax_backward(g, y)
    gy = g * y
    gy -= y * _sum_kept(gy, dim)
    return gy


def _log_softmax_backward_impl(xp: Any, g: Any, y: Any, dim: int) -> Any:
    """``g - exp(y) * sum(g)`` along ``dim``: log_softmax's gradient from its output."""
    native = _rows_native(xp, "log_softmax_backward_rows", y, dim, g, y)
    if native is not None:
        return native
    if softmax_blocks.takes(y, dim, g):
        return softmax_blocks.log_softmax_backward(g, y)
    e = xp.exp(y)
    e *= _sum_kept(g, dim)
    return g - e


def _batch_rows_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """vmap of a (g, y, dim) backward record: both batched at the front, ``dim`` one further."""
    moved = tuple(batching.with_batch(a, d, size) for a, d in zip(args, bdims))
    dim = attrs["dim"] if attrs["dim"] < 0 else attrs["dim"] + 1
    return dispatch.apply(op, moved, {**attrs, "dim": dim}), 0


# The plain backward of softmax / log_softmax as one op each (one pass per row with numba; create_graph=True
# differentiates the composite rules above). Their own vjps: the composite rules' derivatives.
SOFTMAX_BACKWARD = register(OpDef(
    name="softmax_backward", batch=_batch_rows_backward, category="nn", impl=_softmax_backward_impl,
    shape_rule=lambda g, y, dim: y, float_only=True,
    vjp=(lambda ctx, gg: _softmax_backward_gg(ctx, gg)[0], lambda ctx, gg: _softmax_backward_gg(ctx, gg)[1]),
))
LOG_SOFTMAX_BACKWARD = register(OpDef(
    name="log_softmax_backward", batch=_batch_rows_backward, category="nn", impl=_log_softmax_backward_impl,
    shape_rule=lambda g, y, dim: y, float_only=True,
    vjp=(lambda ctx, gg: gg - red.sum(gg * ew.exp(ctx.inputs[1]), ctx.attrs["dim"], keepdim=True),
         lambda ctx, gg: -gg * ew.exp(ctx.inputs[1]) * red.sum(ctx.inputs[0], ctx.attrs["dim"], keepdim=True)),
))


def _softmax_backward_gg(ctx: Any, gg: Any) -> tuple:
    """Gradients of ``out = y * (g - s)``, ``s = sum(g * y)``: d/dg = gg * y - y * sum(gg * y);
    d/dy = gg * (g - s) - g * sum(gg * y)."""
    g, y = ctx.inputs
    dim = ctx.attrs["dim"]
    s = red.sum(g * y, dim, keepdim=True)
    t = red.sum(gg * y, dim, keepdim=True)
    return gg * y - y * t, gg * (g - s) - g * t


SOFTMAX = register(OpDef(
    name="softmax", batch="dim", category="nn", impl=_softmax_impl, vjp=_softmax_vjp, save="output",
    shape_rule=lambda x, dim: x, onnx=to_onnx.along_dim("Softmax"), flops=cost.softmax_flops,
))
LOG_SOFTMAX = register(OpDef(
    name="log_softmax", batch="dim", category="nn", impl=_log_softmax_impl, vjp=_log_softmax_vjp, save="output",
    shape_rule=lambda x, dim: x, onnx=to_onnx.along_dim("LogSoftmax"), flops=cost.softmax_flops,
))


def _softmax_dim(x: Any, dim: Any, op: str) -> int:
    if dim is None:  # PyTorch's legacy implicit choice, with its deprecation warning at the caller's line
        warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X as an "
                      "argument.", UserWarning, stacklevel=_outside_ember_level())
        dim = 0 if x.ndim in (0, 1, 3) else 1
    return red.normalize_dims(dim, x.ndim, op)[0]


def _outside_ember_level() -> int:
    """The ``stacklevel`` naming the first frame outside the ember package (the user's ``F.softmax(x)`` or
    ``nn.Softmax()(x)`` line, as torch's warning names it, whatever wrappers lie between)."""
    import os
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, level = sys._getframe(1), 1  # level 1: the function calling warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    return level


def softmax(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """exp(x) / sum(exp(x)) along ``dim``, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    _float_input(input, "softmax")
    return dispatch.apply(SOFTMAX, (input,), {"dim": _softmax_dim(input, dim, "softmax")})


def log_softmax(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    """x - logsumexp(x) along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    _float_input(input, "log_softmax")
    return dispatch.apply(LOG_SOFTMAX, (input,), {"dim": _softmax_dim(input, dim, "log_softmax")})


def softmin(input: Any, dim: Any = None, _stacklevel: int = 3, dtype: Any = None) -> Any:
    return softmax(-input, _softmax_dim(input, dim, "softmin"), dtype=dtype)


# ---- activations ---------------------------------------------------------------------------------
def _maybe_inplace(input: Any, result_fn: Any, inplace: bool, name: str) -> Any:
    if input.dtype.itemsize == 2 and input.dtype.is_floating_point:  # half: one rounding, as PyTorch's one kernel
        result_fn = float32_composite(result_fn)
    if inplace:
        return inplace_ops.inplace_call(input, name, result_fn)
    return result_fn(input)


def relu(input: Any, inplace: bool = False) -> Any:
    if getattr(input, "is_quantized", False):  # a quantized tensor (ember.ao) runs its own exact relu
        return input.relu_() if inplace else input.relu()
    return _maybe_inplace(input, ew.relu, inplace, "relu_")


def relu6(input: Any, inplace: bool = False) -> Any:
    return hardtanh(input, 0.0, 6.0, inplace)


def gelu(input: Any, approximate: str = "none") -> Any:
    """Gaussian error linear unit: x * Phi(x) (``approximate='tanh'`` uses the tanh formula)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    _float_input(input, "gelu")
    return dispatch.unary(GELU, input, {"approximate": approximate} if approximate != "none" else None)


def silu(input: Any, inplace: bool = False) -> Any:
    """x * sigmoid(x) (a.k.a. swish)."""
    _float_input(input, "silu")
    return _maybe_inplace(input, lambda t: dispatch.unary(SILU, t), inplace, "silu_")


def sigmoid(input: Any) -> Any:
    return ew.sigmoid(input)


def tanh(input: Any) -> Any:
    return ew.tanh(input)


@named_backward("LeakyReluBackward0", inputs=((0, "input"),))
def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    if input.dtype.is_floating_point:  # one record: its gradient requires grad under create_graph, as torch's
        return _maybe_inplace(input, lambda t: piecewise_linear(t, "leaky_relu", negative_slope), inplace,
                              "leaky_relu_")
    return _maybe_inplace(input, lambda t: ew.where(t > 0, t, t * negative_slope), inplace, "leaky_relu_")


@named_backward("EluBackward0", inputs=((0, "input"),))
def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    def compute(t: Any) -> Any:
        # clamp (not minimum) keeps exp from overflowing on the unused side and passes the whole gradient
        # at 0, where PyTorch's slope is alpha (minimum would split it between its two equal arguments).
        negative = _expm1(ew.clamp(t, max=0.0))
        # t <= 0 picks the exponential side: NaN takes the linear one, whose gradient passes (PyTorch's elu_backward).
        # At t == 0 the slope is alpha (elu_backward's x <= 0) but the curvature is 0 (elu_double_backward masks
        # x < 0): the value there is t * alpha, so second derivatives at 0 are torch's.
        return ew.where(t < 0, negative * alpha, ew.where(t == 0, t * alpha, t))

    return _maybe_inplace(input, compute, inplace, "elu_")


def selu(input: Any, inplace: bool = False) -> Any:
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    # in place means the whole selu written into input (it once wrote elu there and returned a new tensor)
    return _maybe_inplace(input, lambda t: elu(t, alpha) * scale, inplace, "selu_")


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    def compute(t: Any) -> Any:
        # NaN: linear side, as elu; at 0 slope 1 and curvature 0, as torch's celu (elu's double backward)
        return ew.where(t < 0, _expm1(ew.clamp(t, max=0.0) / alpha) * alpha, t)

    return _maybe_inplace(input, compute, inplace, "celu_")


@named_backward("SoftplusBackward0", inputs=((0, "input"),))
@float32_composite
def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    """log(1 + exp(beta*x)) / beta; linear where beta*x > threshold, as PyTorch."""
    scaled = input * beta if beta != 1 else input
    # PyTorch's formula: log1p(exp(z)) up to the threshold, x above it. The clamp keeps exp finite on the
    # unused side; the gradient is sigmoid(z) (0.5 at 0; a composite of abs and relu would give 0 there).
    soft = ew.log1p(ew.exp(ew.clamp(scaled, max=float(threshold))))
    if beta != 1:
        soft = soft / beta
    return ew.where(scaled > threshold, input, soft)


def logsigmoid(input: Any) -> Any:
    """log(sigmoid(x)) = -softplus(-x), computed stably; gradient sigmoid(-x) (0.5 at 0, as PyTorch)."""
    _float_input(input, "logsigmoid")
    return dispatch.apply(LOGSIGMOID, (input,))  # (not unary's memory-order run: torch's result is row-major)


# hardtanh, relu6, hardsigmoid and hardswish share the hardtanh record: slope 0 at each corner (PyTorch's;
# hardswish: 0 at -3, 1 at 3).
def _hardtanh(t: Any, min_val: float, max_val: float, nan_grad: bool = True) -> Any:
    attrs = {"min_val": float(min_val), "max_val": float(max_val)}
    if not nan_grad:
        attrs["nan_grad"] = False
    return dispatch.unary(HARDTANH, t, attrs)


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    # Integer inputs keep their dtype with the limits truncated, as torch (NumPy's clip with float limits
    # made a float64 result eagerly while a graph's shape rule kept the integer dtype).
    if input.dtype.np.kind == "b":
        raise RuntimeError("hardtanh: Bool inputs not supported for hardtanh")
    if input.dtype.is_complex:  # (NumPy's clip orders complex numbers lexicographically: a silent value)
        raise NotImplementedError("hardtanh: clamp is not supported for complex types")
    if input.dtype.np.kind == "u" and min_val < 0:
        raise RuntimeError(f"hardtanh: cannot do hardtanh on an unsigned type ({input.dtype}) with negative limits "
                           f"(min_val={min_val})")
    return _maybe_inplace(input, lambda t: _hardtanh(t, min_val, max_val), inplace, "hardtanh_")


def hardsigmoid(input: Any, inplace: bool = False) -> Any:
    if input.dtype.is_complex:
        raise NotImplementedError(f'"hardsigmoid_cpu" not implemented for {input.dtype} (a real activation)')
    return _maybe_inplace(input, lambda t: _hardtanh(t / 6.0 + 0.5, 0.0, 1.0, nan_grad=False), inplace,
                          "hardsigmoid_")


def hardswish(input: Any, inplace: bool = False) -> Any:
    if input.dtype.is_complex:
        raise NotImplementedError(f'"hardswish_cpu" not implemented for {input.dtype} (a real activation)')
    return _maybe_inplace(input, lambda t: t * _hardtanh(t / 6.0 + 0.5, 0.0, 1.0), inplace, "hardswish_")


def mish(input: Any, inplace: bool = False) -> Any:
    """x * tanh(softplus(x)) (a primitive: finite gradients at every finite x, as PyTorch)."""
    _float_input(input, "mish")
    return _maybe_inplace(input, lambda t: dispatch.unary(MISH, t), inplace, "mish_")


@float32_composite
def softsign(input: Any) -> Any:
    if not (input.dtype.is_floating_point or input.dtype.is_complex):  # abs(int8 -128) wraps to -128: float first
        input = dispatch.cast(input, dtypes.get_default_dtype())
    return input / (ew.abs(input) + 1.0)


def tanhshrink(input: Any) -> Any:
    return input - ew.tanh(input)


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    # x <= threshold -> value, else x: NaN is not <= anything, so it passes through (as PyTorch).
    if input.dtype.is_floating_point:  # one record: its gradient requires grad under create_graph, as torch's
        return _maybe_inplace(input, lambda t: piecewise_linear(t, "threshold", threshold, value), inplace,
                              "threshold_")
    return _maybe_inplace(input, lambda t: ew.where(t <= threshold, value, t), inplace, "threshold_")


@autocast_policy("lower")
def prelu(input: Any, weight: Any) -> Any:
    if weight.numel() == 1:  # one slope for every element: the result has input's shape (0-d stays 0-d)
        w = weight.reshape(())
    else:
        w = weight.reshape((1, -1) + (1,) * (input.ndim - 2)) if input.ndim >= 2 else weight
    # torch's prelu backward takes self: the input's gradient requires grad under create_graph (zero curvature)
    return grad_join.curvature_link(ew.where(input > 0, input, input * w), input, "PreluKernelBackward0",
                                    (input, weight))


@float32_composite
def glu(input: Any, dim: int = -1) -> Any:
    """First half times sigmoid of the second half along ``dim``."""
    size = input.shape[input._dim(dim, "glu")]
    if size % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {dim} of shape {tuple(input.shape)} "
                           f"is size {size}")
    a, b = input.chunk(2, dim)
    return a * ew.sigmoid(b)


# ---- linear and layer_norm primitives -------------------------------------------------------------
def _linear_impl(xp: Any, x: Any, w: Any, *bias: Any) -> Any:
    lead = x.shape[:-1]
    # (NumPy cannot infer -1 beside a 0: in_features 0, AdaptiveLogSoftmaxWithLoss's 8 // 4**2 tail projection)
    rows = x.reshape(-1, x.shape[-1]) if x.shape[-1] else x.reshape(math.prod(lead), 0)
    if is_tiny(rows.shape[0], rows.shape[1], w.shape[0]):  # nothing to choose (linalg.TINY_MACS)
        out = xp.matmul(rows, w.T)
        if bias:
            out += bias[0]
    else:
        out = _linear_gemm(xp, rows, w, bias)
    if out.dtype != x.dtype and x.dtype == w.dtype:  # bfloat16 (ml_dtypes) GEMMs give float32: round once
        out = out.astype(x.dtype)
    return out.reshape(lead + (w.shape[0],))


def _linear_gemm(xp: Any, rows: Any, w: Any, bias: tuple) -> Any:
    """``rows @ w.T (+ bias)`` by ember's GEMM or BLAS (``linalg.gemm_2d``'s choice)."""
    if xp is np and rows.shape[0] * rows.shape[1] * w.shape[0] >= cpu_hot_worker.MIN_MACS:
        # the hot worker's split, its questions answered once per signature (cpu_gemm_plan, w1eager22)
        out = cpu_gemm_plan.matmul_2d(rows, w.T, _linalg.native_kernel, bias[0] if bias else None)
        if out is not None:
            return out
    out = gemm_2d(xp, rows, w.T, bias[0] if bias else None)  # ember's AVX-512 GEMM (bias added inside)
    if out is None:
        out = cpu_blas_gemm.split_gemm(rows, w.T, bias[0] if bias else None)  # large: a BLAS call per ember thread
        if out is not None:
            return out
        with blas_context(xp, rows, w.T):  # small GEMMs on one BLAS thread (cpu_blas.small_gemm)
            if bias and rows.shape[0] * w.shape[0] >= _BIAS_IN_GEMM:  # BLAS adds into the bias rows (beta = 1)
                out = cpu_blas_gemm.addmm(rows, w.T, bias[0])
                if out is not None:
                    return out
            out = cpu_mkl.matmul(rows, w.T) if xp is np else None  # Intel MKL where it is ember's BLAS (mkl20)
            if out is None:
                out = xp.matmul(rows, w.T)  # leading dims flattened: one GEMM, not one per row block
        if bias:
            out += bias[0]
    return out


# Outputs of this many elements or more get the bias from BLAS's beta = 1 (cpu_blas_gemm.addmm): the pass it saves
# costs more than the ctypes call (~3 us) from here on.
_BIAS_IN_GEMM = 1 << 16


def _rows(t: Any) -> Any:
    """``t`` as a matrix of rows (all leading dimensions flattened); a matrix as it is (no op: every op a
    backward rule saves is one dispatch less, twice under vmap)."""
    return t if t.ndim == 2 else t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def _linear_input_grad(ctx: Any, g: Any) -> Any:
    """``g @ W``, all leading dims flattened into rows: one GEMM (NumPy's stacked matmul would loop)."""
    return g.matmul(ctx.inputs[1]) if g.ndim == 2 else _rows(g).matmul(ctx.inputs[1]).reshape(ctx.input_meta[0])


def _linear_weight_grad(ctx: Any, g: Any) -> Any:
    """``g^T @ x`` over all rows as one ``matmul_t`` (transpose folded in): under vmap its batching rule writes
    the per-sample outer products with one einsum."""
    return dispatch.apply(OPS["matmul_t"], (_rows(g), _rows(ctx.inputs[0])), {"transpose_a": True})


def _linear_bias_grad(ctx: Any, g: Any) -> Any:
    return red.sum(g, tuple(range(g.ndim - 1))) if g.ndim > 1 else g


# One rule per input (x, weight, optional bias), each called only when that input needs a gradient.
_LINEAR_VJP = (_linear_input_grad, _linear_weight_grad, _linear_bias_grad)


LINEAR = register(OpDef(
    name="linear", batch=batching.linear, category="nn", impl=_linear_impl, vjp=_LINEAR_VJP, onnx=to_onnx.linear, autocast="lower",
    shape_rule=lambda x, w, *b: Spec(tuple(x.shape[:-1]) + (w.shape[0],), x.dtype, x.device),
    flops=cost.linear_flops,
))


def _rows_array(a: Any) -> Any:
    return a if a.ndim == 2 else a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


# The array gradient rules (OpDef.array_vjp): the NumPy calls of the three rules above.
LINEAR.array_vjp = (
    lambda ctx, g: _matmul_impl(np, g, ctx.inputs[1]) if g.ndim == 2 else
    _matmul_impl(np, _rows_array(g), ctx.inputs[1]).reshape(ctx.input_meta[0]),
    lambda ctx, g: OPS["matmul_t"].impl(np, _rows_array(g), _rows_array(ctx.inputs[0]), transpose_a=True),
    lambda ctx, g: _bias_grad_array(g) if g.ndim > 1 else g,
)


def _bias_grad_array(g: Any) -> Any:
    """The bias gradient ``g`` summed over all leading dims (the ``sum`` op's impl); a large contiguous ``g`` as
    column blocks on ember's threads: NumPy adds rows in order for each column either way, so the bits are
    the same (tested), and the pass no longer runs on one core while the GEMMs around it use two."""
    if g.size >= _SPLIT_BIAS_GRAD and g.flags.c_contiguous and g.dtype.kind == "f" and g.dtype.itemsize >= 4 \
            and num_threads() > 1:
        rows = g.reshape(-1, g.shape[-1])
        out = np.empty(g.shape[-1], g.dtype)
        parallel_for(lambda start, stop: np.add.reduce(rows[:, start:stop], axis=0, out=out[start:stop]),
                     g.shape[-1], 64)
        return out
    return OPS["sum"].impl(np, g, dims=tuple(range(g.ndim - 1)), keepdim=False)


_SPLIT_BIAS_GRAD = 1 << 20  # elements: below it a thread hand-off (~20-30 us) costs what the split saves


def _linear_batch_array_vjp(ctx: Any, g: Any, gdim: int | None) -> list:
    """linear's batched array rule (OpDef.batch_array_vjp, ember/func/batched_backward.py): with vmap's batch
    first, a shared weight's per-sample gradients are the stacked ``g^T x`` products (one einsum for one row
    per sample), the input's gradient one GEMM over all rows, the bias's a sum over each sample's rows."""
    if gdim is None:
        raise NotArrayable
    x, w = ctx.inputs[0], ctx.inputs[1]
    dx, dw = ctx.bdims[0], ctx.bdims[1]
    size, needs = ctx.size, ctx.needs
    g3 = g.reshape(size, -1, g.shape[-1])  # (B, rows, out)
    out: list = [None] * len(needs)
    if needs[0]:
        gx = _matmul_impl(np, g3.reshape(-1, g3.shape[-1]), w) if dw is None else np.matmul(g3, w)
        out[0] = (gx.reshape((size,) + tuple(ctx.input_meta[0])), 0)
    if needs[1]:
        if dx is None:  # a shared input, batched weights or bias (an ensemble): (B, out, rows) @ (rows, in)
            gw = _matmul_impl(np, np.swapaxes(g3, -1, -2), _rows_array(x))
        elif g3.shape[1] == 1 and x.size == size * x.shape[-1]:  # one row per sample: the outer products
            gw = outer_rows(np, g3.reshape(size, -1), x.reshape(size, -1))
        else:
            gw = OPS["matmul_t"].impl(np, g3, x.reshape(size, -1, x.shape[-1]), transpose_a=True)
        out[1] = (gw, 0)
    if len(needs) > 2 and needs[2]:  # one row per sample (per-sample gradients): the row itself, no sum
        out[2] = (g3.reshape(size, -1) if g3.shape[1] == 1 else np.add.reduce(g3, axis=1), 0)
    return out


LINEAR.batch_array_vjp = _linear_batch_array_vjp


def _ln_axes(ndim: int, count: int) -> tuple:
    return tuple(range(ndim - count, ndim))


def _cudnn_norm(xp: Any, name: str, *args: Any) -> Any:
    """A GPU's cuDNN layer norm kernel's result (ember/backends/cuda_cudnn_train.py), or None (NumPy, no kernel,
    or a signature cuDNN refuses: the code below runs)."""
    if xp is np:
        return None
    kernel = native_kernel(xp, name)
    return None if kernel is None else kernel(*args)


def _layer_norm_impl(xp: Any, x: Any, *affine: Any, count: int, eps: float, has_weight: bool) -> tuple:
    if xp is not np:  # a GPU: cuDNN unless it refuses this signature (gpu22's hook)
        out = _cudnn_norm(xp, "cudnn_layer_norm_train", x, affine, count, eps, has_weight)
        if out is not None:
            return out
    native = layer_norm_split.layer_norm_native(xp, x, affine, count=count, eps=eps, has_weight=has_weight)
    if native is not None:  # numba: two passes per row, both cores (None: no kernel, or inf/NaN rows)
        return native
    if layer_norm_split.worth_splitting(xp, x, count) and all(a.dtype == x.dtype for a in affine):
        split = layer_norm_split.layer_norm_rows(xp, x, affine, count=count, eps=eps, has_weight=has_weight)
        if split is not None:  # (None: a block met a rare correction, applied below to the whole input)
            return split
    axes = _ln_axes(x.ndim, count)
    low = x.dtype if x.dtype.itemsize == 2 else None  # float16/bfloat16: compute in float32, as PyTorch
    if low is not None:
        x = x.astype(xp.float32)
    mean = x.mean(axis=axes, keepdims=True)
    y = x - mean
    var = (y * y).mean(axis=axes, keepdims=True)
    if capture_state.ACTIVE:  # a CUDA graph capture: no host reads; the same values by where() (_ln_captured)
        return _ln_captured(xp, x, y, mean, var, axes, eps, has_weight, affine, low)
    if bool((mean * mean > 4096.0 * var).any()):
        # A mean far above the spread (|mean| > 64 std, e.g. 1e7 + [0, 1, 2, 3] in float32) was rounded by more
        # than the spread's digits: one correction pass (the mean of the centered values) restores them.
        shift = y.mean(axis=axes, keepdims=True)
        y -= shift
        mean = mean + shift
        var = (y * y).mean(axis=axes, keepdims=True)
    rstd = 1.0 / xp.sqrt(var + eps)
    y *= rstd
    overflow = ~xp.isfinite(var)
    if bool(overflow.any()):  # rare: squares that overflow (|x| > 1.8e19 in float32), or inf/NaN inputs
        scaled = _scaled_normalize(xp, x, axes, eps)
        mean, y, rstd = (xp.where(overflow, new, old) for new, old in zip(scaled, (mean, y, rstd)))
    return _ln_affine_tail(y, mean, rstd, has_weight, affine, low)


def _ln_captured(xp: Any, x: Any, y: Any, mean: Any, var: Any, axes: tuple, eps: float, has_weight: bool,
                 affine: tuple, low: Any) -> tuple:
    """The rest of ``_layer_norm_impl`` while a CUDA graph is captured: its two rare-case tests (a mean far above
    the spread, squares that overflow) read the device on the host; here each is a device boolean and where()
    picks the corrected values exactly where eager code would apply them (the first for every row when any row
    needs it, as eager does), so the values are eager's."""
    needed = (mean * mean > 4096.0 * var).any()  # a 0-d device boolean
    shift = xp.where(needed, y.mean(axis=axes, keepdims=True), 0).astype(y.dtype, copy=False)
    y = y - shift
    mean = xp.where(needed, mean + shift, mean)
    var = xp.where(needed, (y * y).mean(axis=axes, keepdims=True), var)
    rstd = 1.0 / xp.sqrt(var + eps)
    y *= rstd
    overflow = ~xp.isfinite(var)
    scaled = _scaled_normalize(xp, x, axes, eps)
    mean, y, rstd = (xp.where(overflow, new, old) for new, old in zip(scaled, (mean, y, rstd)))
    return _ln_affine_tail(y, mean, rstd, has_weight, affine, low)


def _ln_affine_tail(y: Any, mean: Any, rstd: Any, has_weight: bool, affine: tuple, low: Any) -> tuple:
    """Apply layer_norm's weight/bias in place and cast back to a half dtype (``low``) when the input was one."""
    if has_weight:
        y *= affine[0]
        affine = affine[1:]
    if affine:
        y += affine[0]
    if low is not None:
        return y.astype(low), mean.astype(low), rstd.astype(low)
    return y, mean, rstd


def _scaled_normalize(xp: Any, x: Any, axes: tuple, eps: float) -> tuple:
    """(mean, normalized x, 1 / std) computed on ``x / s``, s = each slice's largest magnitude, for slices
    whose sum or squares overflow (|x| > 1.8e19 in float32): no intermediate exceeds ``max |x|``.
    PyTorch gives NaN there in layer_norm (and 0 or the right value in batch_norm, by memory layout)."""
    scale = xp.max(xp.abs(x), axis=axes, keepdims=True)
    scale = xp.where(xp.isfinite(scale) & (scale > 0), scale, 1).astype(x.dtype)
    xs = x / scale
    mean_s = xs.mean(axis=axes, keepdims=True)
    ys = xs - mean_s
    # In float64: for a constant slice of 3e38, eps / s^2 is 1e-82 and its root a float32 denormal.
    wide = scale.astype(xp.float64)
    root = xp.sqrt((ys * ys).mean(axis=axes, keepdims=True, dtype=xp.float64) + (eps / wide) / wide)
    return mean_s * scale, (ys / root).astype(x.dtype), (1 / (wide * root)).astype(x.dtype)


def _layer_norm_composite(x: Any, count: int, eps: float) -> Any:
    """The normalization in ember ops (used when a differentiable backward graph is requested)."""
    axes = _ln_axes(x.ndim, count)
    centered = x - red.mean(x, axes, keepdim=True)
    return centered * ew.rsqrt(red.mean(centered * centered, axes, keepdim=True) + eps)


def _layer_norm_vjp(ctx: Any, grads: Any) -> tuple:
    g = grads[0]
    inputs = ctx.inputs
    x = inputs[0]
    count, eps, has_weight = ctx.attrs["count"], ctx.attrs["eps"], ctx.attrs["has_weight"]
    w = inputs[1] if has_weight else None

    if not grad_mode.STATE.enabled:
        # Plain backward: one fused NumPy pass, reusing the saved mean and 1/std.
        _, mean, rstd = ctx.out
        args = (g, x, mean, rstd) + ((w,) if has_weight else ())
        gx, gw, gb = dispatch.apply(LAYER_NORM_BACKWARD, args, {"count": count})
    else:
        # create_graph=True: differentiate the composite, so second derivatives see mean and std move.

        wanted = [t for t, need in zip([x] + ([w] if has_weight else []), ctx.needs) if need]
        xhat = _layer_norm_composite(x, count, eps)
        out = xhat * w if has_weight else xhat
        found = iter(autograd_grad([out], wanted, [g], create_graph=True, allow_unused=True) if wanted else ())
        gx = next(found) if ctx.needs[0] else None
        gw = next(found) if has_weight and ctx.needs[1] else None
        lead = tuple(range(x.ndim - count))
        gb = red.sum(g, lead) if lead else g
    result = [gx if ctx.needs[0] else None]
    if has_weight:
        result.append(gw if ctx.needs[1] else None)
    if len(inputs) > 1 + int(has_weight):
        result.append(gb if ctx.needs[-1] else None)
    # Mixed dtypes (a bfloat16 input under autocast, float32 weight): each gradient in its input's dtype.
    return tuple(r if r is None or r.dtype is t.dtype else r.to(t.dtype) for r, t in zip(result, inputs))


def _layer_norm_rule(x: Spec, *affine: Spec, count: int, eps: float, has_weight: bool) -> tuple:
    stat = Spec(tuple(x.shape[:len(x.shape) - count]) + (1,) * count, x.dtype, x.device)
    return Spec(x.shape, x.dtype, x.device), stat, stat


LAYER_NORM = register(OpDef(
    name="layer_norm", batch=batching.layer_norm, category="nn", impl=_layer_norm_impl, vjp=_layer_norm_vjp, save="both", saved_outputs=(1, 2), num_outputs=3,
    nondiff_outputs=(1, 2), shape_rule=_layer_norm_rule, onnx=to_onnx.layer_norm, flops=cost.layer_norm_flops,
))


def _layer_norm_backward_impl(xp: Any, g: Any, x: Any, mean: Any, rstd: Any, *weight: Any, count: int) -> tuple:
    if xp is not np:  # a GPU: cuDNN unless it refuses this signature (gpu22's hook)
        out = _cudnn_norm(xp, "cudnn_layer_norm_backward", g, x, mean, rstd, weight, count)
        if out is not None:
            return out
    axes = _ln_axes(x.ndim, count)
    lead = tuple(range(x.ndim - count))
    out_dtype, param_dtype = x.dtype, (weight[0].dtype if weight else x.dtype)
    native = layer_norm_split.layer_norm_backward_native(xp, g, x, mean, rstd, weight, count=count)
    if native is not None:  # numba: two passes per row, both cores
        return native
    if layer_norm_split.worth_splitting(xp, x, count) and all(a.dtype == x.dtype for a in (g, mean, rstd) + weight):
        split = layer_norm_split.layer_norm_backward_rows(xp, g, x, mean, rstd, weight, count=count)
        if split is not None:  # (None: a block met the mean correction, applied below to the whole input)
            return split
    if min(a.dtype.itemsize for a in (g, x, mean, rstd) + weight) == 2:  # float16/bfloat16: float32 math
        g, x, mean, rstd = (a.astype(xp.float32) for a in (g, x, mean, rstd))
        weight = tuple(w.astype(xp.float32) for w in weight)
    xhat = (x - mean) * rstd
    if capture_state.ACTIVE:  # a CUDA graph capture: the same test as a device boolean, no host read
        needed = (mean * mean * rstd * rstd > 4096.0).any()
        xhat -= xp.where(needed, xhat.mean(axis=axes, keepdims=True), 0).astype(xhat.dtype, copy=False)
    elif bool((mean * mean * rstd * rstd > 4096.0).any()):  # |mean| > 64 std: the forward's correction pass
        xhat -= xhat.mean(axis=axes, keepdims=True)
    gw = (g * xhat).sum(axis=lead) if lead else g * xhat
    gb = g.sum(axis=lead) if lead else g.copy()
    gxhat = g * weight[0] if weight else g
    gx = gxhat - gxhat.mean(axis=axes, keepdims=True)
    gx -= xhat * (gxhat * xhat).mean(axis=axes, keepdims=True)
    gx *= rstd
    return gx.astype(out_dtype, copy=False), gw.astype(param_dtype, copy=False), gb.astype(param_dtype, copy=False)


LAYER_NORM_BACKWARD = register(OpDef(
    name="layer_norm_backward", batch=batching.layer_norm_backward, category="nn", impl=_layer_norm_backward_impl, num_outputs=3,
    flops=cost.layer_norm_backward_flops,
    shape_rule=lambda g, x, mean, rstd, *w, count: (
        Spec(x.shape, x.dtype, x.device), Spec(tuple(x.shape[len(x.shape) - count:]), (w or (x,))[0].dtype, x.device),
        Spec(tuple(x.shape[len(x.shape) - count:]), (w or (x,))[0].dtype, x.device)),
))


# ---- normalization -------------------------------------------------------------------------------
@named_backward("NativeLayerNormBackward0", inputs=((0, "input"), (2, "weight"), (3, "bias")))
def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    """Normalize over the trailing ``normalized_shape`` dims, then scale and shift."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(shape) > input.ndim or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise RuntimeError(
            f"layer_norm: given normalized_shape={list(shape)}, expected input with shape [*, "
            f"{', '.join(map(str, shape))}], but got input of size {list(input.shape)}")
    _float_input(input, "layer_norm")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"layer_norm: {name} of shape {tuple(t.shape)} must match normalized_shape {shape}")
        # PyTorch mixes dtypes only for a 16-bit input with float32 parameters (autocast's case)
        if t is not None and t.dtype is not input.dtype and not (input.dtype.itemsize == 2 and
                                                                t.dtype is dtypes.float32):
            raise RuntimeError(f"layer_norm: mixed dtype: expected {name} to have dtype {input.dtype} (the input's), "
                               f"got {t.dtype}; convert it with .to({input.dtype})")
    args = (input,) + tuple(t for t in (weight, bias) if t is not None)
    out, _, _ = dispatch.apply(LAYER_NORM, args, {"count": len(shape), "eps": float(eps),
                                                  "has_weight": weight is not None})
    return out


def rms_norm(input: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Any:
    """``input * rsqrt(mean(input**2) + eps) * weight`` over the last dims, as PyTorch's fused kernel: float16/
    bfloat16 computed in float32 and rounded once (weight included), the default eps that of the compute dtype
    (float32's for half inputs), the result in ``input``'s dtype."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    low = input.dtype if input.dtype.itemsize == 2 and input.dtype.is_floating_point else None
    x = dispatch.cast(input, dtypes.float32) if low is not None else input
    if eps is None:
        eps = float(dtypes.finfo_np(x.dtype.np).eps)  # PyTorch's default: the compute dtype's machine epsilon
    out = x * ew.rsqrt(red.mean(x * x, dims, keepdim=True) + eps)
    if weight is not None:
        out = out * (dispatch.cast(weight, x.dtype) if low is not None and weight.dtype is low else weight)
    return dispatch.cast(out, input.dtype) if out.dtype is not input.dtype else out


_VMAP_RUNNING_STATS = (  # PyTorch's words: per-sample statistics cannot update shared running statistics
    "Batch norm got a batched tensor as input while the running_mean or running_var, which will be updated in place, "
    "were not batched.\nIf you are using a module and do not need eval mode, please set `track_running_stats` to be "
    "False.If you are using a prebuilt module and do not need eval mode, please see the functorch website for "
    "resources on how to patch your module to work with vmap")


@named_backward("NativeBatchNormBackward0", inputs=((0, "input"), (3, "weight"), (4, "bias")))
def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Batch normalization over every dim but the channel dim (1).

    In training, normalizes with the batch statistics and (when given) updates ``running_mean``
    and ``running_var`` in place: ``r = (1 - momentum) * r + momentum * batch_stat``, using the
    unbiased batch variance for ``running_var`` as PyTorch does.
    """
    _float_input(input, "batch_norm")
    if input.ndim < 2:
        if input.ndim == 1 and input.numel() == 0:  # torch returns an empty 1-d input as it is (a fresh tensor)
            return input.clone()
        raise ValueError(f"batch_norm: expected at least 2-D input (N, C, ...), got shape {tuple(input.shape)}")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"batch_norm: {name} should contain {channels} elements (the channel dim of input "
                               f"{tuple(input.shape)}), not {t.numel()}")
    dims = (0,) + tuple(range(2, input.ndim))
    view = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        count = input.numel() // channels if channels else 0
        if count == 0:  # torch: an empty batch gives an empty result and leaves the running statistics alone
            out = input if weight is None else input * weight.reshape(view)  # (weight/bias get zero gradients)
            return out if bias is None else out + bias.reshape(view)
        if count == 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
        stats = [t for t in (running_mean, running_var) if t is not None]
        if stats and batching.is_batched(input) and not all(batching.is_batched(t) for t in stats):
            raise RuntimeError(_VMAP_RUNNING_STATS)
        # One fused op forward and backward (ember/ops/normalization.py): a quarter of a ResNet step
        # was the ~30 passes of the composed version.
        out, mean, var = normalization.batch_norm_train(
            input, None if weight is None else weight.reshape(-1), None if bias is None else bias.reshape(-1), eps)
        if running_mean is not None or running_var is not None:
            m = 0.0 if momentum is None else momentum
            with no_grad():
                if running_mean is not None:
                    running_mean.mul_(1 - m).add_(mean.detach().reshape(running_mean.shape).to(running_mean.dtype) * m)
                if running_var is not None:
                    unbiased = var.detach().reshape(running_var.shape) * (count / (count - 1))
                    running_var.mul_(1 - m).add_(unbiased.to(running_var.dtype) * m)
        return out
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be given when training=False")
        return _batch_norm_eval(input, running_mean.reshape(view), running_var.reshape(view),
                                None if weight is None else weight.reshape(view),
                                None if bias is None else bias.reshape(view), eps)


def _batch_norm_eval(x: Any, mean: Any, var: Any, weight: Any, bias: Any, eps: float) -> Any:
    """PyTorch's CPU eval-mode batch norm: ``x * alpha + beta`` with ``alpha = weight / sqrt(var + eps)`` and
    ``beta = bias - mean * alpha``, float16/bfloat16 computed in float32 and rounded once (each op rounding to
    half precision was a half-ulp off in a third of the elements)."""
    low = x.dtype if x.dtype.itemsize == 2 and x.dtype.is_floating_point else None
    if low is not None:
        x, mean, var, weight, bias = (None if t is None else dispatch.cast(t, dtypes.float32) if t.dtype is low else t
                                      for t in (x, mean, var, weight, bias))
    alpha = ew.reciprocal(ew.sqrt(var + eps))
    if weight is not None:
        alpha = alpha * weight
    beta = -(mean * alpha) if bias is None else bias - mean * alpha
    if low is None:
        return x * alpha + beta
    # torch's vectorized loop fuses x * alpha + beta (one rounding): exact in float64, then float32, then half
    wide = dispatch.cast(x, dtypes.float64) * dispatch.cast(alpha, dtypes.float64) + dispatch.cast(beta, dtypes.float64)
    return dispatch.cast(dispatch.cast(wide, dtypes.float32), low)


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None, weight: Any = None,
                  bias: Any = None, use_input_stats: bool = True, momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Normalizes each (sample, channel) slice; with ``use_input_stats=False`` uses the running statistics
    (as batch_norm in eval), else updates them in place with the batch average of the slices' statistics."""
    if input.ndim < 2:
        raise ValueError(f"instance_norm: expected at least 2-D input (N, C, ...), got shape {tuple(input.shape)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: Expected running_mean and running_var to be defined when "
                               "use_input_stats is false")
        return batch_norm(input, running_mean, running_var, weight, bias, training=False, eps=eps)
    spatial = math.prod(input.shape[2:])
    if spatial == 1:  # PyTorch's check: one value per slice has no variance
        raise ValueError(f"instance_norm: Expected more than 1 spatial element when training, got input size "
                         f"{list(input.shape)}")
    # The layer_norm primitive over each (sample, channel) slice: its backward is one pass, and its
    # statistics survive values whose squares overflow (the composite gave 0 there).
    flat = input.reshape(input.shape[0], input.shape[1], -1)
    half = input.dtype.is_floating_point and input.dtype.itemsize == 2
    if half:
        # PyTorch runs a half input through its batch norm kernel on (1, N * C, L) with the affine parameters
        # repeated per sample; the statistics are rounded to the input's dtype and the output rounded once: the
        # same here, bit for bit (layer_norm's float32 statistics, then an affine in half, were an ulp off)
        n = input.shape[0]
        out = normalization.batch_norm_train(flat.reshape(1, -1, flat.shape[-1]),
                                             None if weight is None else weight.reshape(-1).repeat(n),
                                             None if bias is None else bias.reshape(-1).repeat(n), eps)[0]
        out = out.reshape(tuple(input.shape))
        weight = bias = None  # applied inside
    else:
        out = layer_norm(flat, (flat.shape[-1],), eps=eps).reshape(tuple(input.shape))
    if running_mean is not None or running_var is not None:
        with no_grad():  # PyTorch's: the batch mean of each slice's mean and unbiased variance
            stats = flat.detach()
            for r, value in ((running_mean, stats.mean(-1)), (running_var, stats.var(-1, correction=1))):
                if r is not None:
                    r.mul_(1 - momentum).add_(value.mean(0).to(r.dtype) * momentum)
    view = (1, input.shape[1]) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(view)
    if bias is not None:
        out = out + bias.reshape(view)
    return out


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    n, c = input.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"group_norm: expected number of channels in input ({c}) to be divisible by num_groups "
                           f"({num_groups})")
    if n * c // num_groups * math.prod(input.shape[2:]) == 1:  # PyTorch's _verify_batch_size on (N*C/G, G, ...)
        raise ValueError(f"group_norm: Expected more than 1 value per channel when training, got input size "
                         f"{[n * c // num_groups, num_groups] + list(input.shape[2:])}")
    grouped = input.reshape(n, num_groups, c // num_groups * math.prod(input.shape[2:]))  # (no -1: n may be 0)
    out = layer_norm(grouped, (grouped.shape[-1],), eps=eps).reshape(tuple(input.shape))
    view = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(view)
    if bias is not None:
        out = out + bias.reshape(view)
    return out


def normalize(input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Any:
    """input / max(||input||_p, eps) along ``dim``."""
    norm = red.norm(input, p, dim, keepdim=True)
    return input / ew.clamp(norm, min=eps)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    """sum(x1*x2) / (max(||x1||, eps) * max(||x2||, eps)) along ``dim`` (broadcasting)."""
    shape = ew._broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    # broadcast first, as torch: a size-1 ``dim`` that broadcasts must count once per element in the norms
    # (x1 of shape (1, 2, 3) against (2, 1, 3) along dim -2 gave cosines above 1)
    x1, x2 = x1.expand(shape), x2.expand(shape)
    n1 = ew.clamp(red.norm(x1, 2, dim, keepdim=True), min=eps)
    n2 = ew.clamp(red.norm(x2, 2, dim, keepdim=True), min=eps)
    return red.sum((x1 / n1) * (x2 / n2), dim)


def pairwise_distance(x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Any:
    return red.norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


# ---- dropout -------------------------------------------------------------------------------------
def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero each element with probability ``p`` and scale the rest by 1/(1-p) (training only).

    The mask comes from ember's default generator, so ``ember.manual_seed`` makes it repeatable.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    from ember.creation import _wrap_array

    if dispatch.is_symbolic(input):  # building a graph: the mask is a random node, drawn anew at each run
        mask = ember_random.graph_sample("bernoulli", tuple(input.shape), input.dtype, input.device, like=input,
                                         p=1.0 - p, scale=1.0 / (1.0 - p) if p < 1.0 else 0.0)
        if mask is not None:
            return _maybe_inplace(input, lambda t: t * mask, inplace, "dropout_")
    if p == 1.0:
        mask_array = input._device.xp.zeros(tuple(input.shape), dtype=input.dtype.np)
    else:
        # torch draws `empty_like(input).bernoulli_(1 - p)`: a dense permuted input (the batch_first output of an
        # LSTM) keeps its layout, and the draws fill memory in order; draw the permuted shape and permute back.
        perm = _dense_memory_order(input)
        shape = tuple(input.shape) if perm is None else tuple(input.shape[d] for d in perm)
        mask_array = ember_random.sample_bernoulli(shape, input.dtype, input.device, None, 1.0 - p)
        if perm is not None:
            mask_array = mask_array.transpose(tuple(int(i) for i in np.argsort(perm)))
        mask_array /= mask_array.dtype.type(1.0 - p)  # torch: noise.div_(1 - p), the scalar in the noise's dtype
    mask = _wrap_array(mask_array, input._device)
    return _maybe_inplace(input, lambda t: t * mask, inplace, "dropout_")


def _dense_memory_order(t: Any) -> tuple | None:
    """The dims of a dense, non-overlapping permuted tensor from outermost to innermost in memory (what torch's
    ``empty_like`` keeps), or None for row-major tensors and layouts torch's ``empty_like`` makes row-major."""
    try:
        strides, shape = t.stride(), tuple(t.shape)
    except Exception:  # noqa: BLE001 (symbolic values and device arrays without strides: row-major draws)
        return None
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    order = sorted(dims, key=lambda d: -strides[d])
    if order == dims:
        return None
    expected = 1
    for d in reversed(order):  # dense: each stride is the product of the sizes inside it
        if strides[d] != expected:
            return None
        expected *= shape[d]
    ones = [d for d in range(len(shape)) if shape[d] == 1]
    return tuple(ones + order)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False, inplace: bool = False) -> Any:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation and the result is rescaled
    to keep zero mean and unit variance (PyTorch's formula)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _maybe_inplace(input, lambda t: t * 0.0, inplace, "alpha_dropout_")
    from ember.creation import _wrap_array  # creation imports ember.ops (the cycle dropout's import breaks too)

    alpha = -1.7580993408473766  # -scale * alpha of SELU
    a = ((1 - p) * (1 + p * alpha ** 2)) ** -0.5
    keep = _wrap_array(ember_random.sample_bernoulli(tuple(input.shape), input.dtype, input.device, None, 1.0 - p),
                       input._device)
    return _maybe_inplace(input, lambda t: (t * keep + (1 - keep) * alpha) * a + (-a * alpha * p), inplace,
                          "alpha_dropout_")


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero whole channels of (N, C, L) or (C, L) with probability ``p``; other ranks are refused (as torch)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, "dropout1d", batched=input.ndim == 3)


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero whole channels of (N, C, H, W). As torch, a 3-D input is read as (N, C, L) (with its warning)."""
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead.", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d instead.",
                      stacklevel=2)
    return _channel_dropout(input, p, training, inplace, "dropout2d", batched=True)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W); other ranks warn as in torch."""
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead.", stacklevel=2)
    return _channel_dropout(input, p, training, inplace, "dropout3d", batched=input.ndim == 5)


def _channel_dropout(input: Any, p: float, training: bool, inplace: bool, op: str, batched: bool) -> Any:
    """Drop whole channels: one Bernoulli draw per (sample, channel). Without a batch dim the first dim is the
    channel (torch unsqueezes a batch of one, as here)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    lead = tuple(input.shape) if batched else (1,) + tuple(input.shape)
    if len(lead) < 2:
        raise RuntimeError(f"{op}: Feature dropout requires at least 2 dimensions in the input, got shape "
                           f"{tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    from ember.creation import _wrap_array

    shape = lead[:2] + (1,) * (len(lead) - 2)
    shape = shape if batched else shape[1:]
    if dispatch.is_symbolic(input):  # building a graph: the mask is a random node, drawn anew at each run
        mask = ember_random.graph_sample("bernoulli", shape, input.dtype, input.device, like=input, p=1.0 - p,
                                         scale=1.0 / (1.0 - p) if p < 1.0 else 0.0)
        if mask is not None:
            return _maybe_inplace(input, lambda t: t * mask, inplace, op + "_")
    keep = ember_random.sample_bernoulli(shape, input.dtype, input.device, None, 1.0 - p)
    if p < 1.0:
        keep /= keep.dtype.type(1.0 - p)
    mask = _wrap_array(keep, input._device)
    return _maybe_inplace(input, lambda t: t * mask, inplace, op + "_")


# ---- embedding, one_hot --------------------------------------------------------------------------
@named_backward("EmbeddingBackward0")
def embedding(input: Any, weight: Any, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Any:
    """Rows of ``weight`` picked by the integer ``input``; rows at ``padding_idx`` get no gradient;
    ``scale_grad_by_freq`` divides each row's gradient by how often the row occurs in ``input``."""
    if input.dtype.category != 1:
        raise RuntimeError(f"embedding: expected an integer index tensor (Long or Int), got {input.dtype}")
    if weight.ndim != 2:
        raise RuntimeError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), got {tuple(weight.shape)}")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise ValueError(f"embedding: padding_idx {padding_idx} must be within num_embeddings ({num})")
        padding_idx %= num
    bounds = index_range(input)  # (None for traced indices: no values to check)
    if bounds is not None:
        lo, hi = bounds
        if lo < 0 or hi >= num:
            raise IndexError(f"embedding: index {hi if hi >= num else lo} is out of range for a weight with "
                             f"{num} rows (valid: 0..{num - 1})")
    if max_norm is not None:
        _embedding_renorm(weight, input, max_norm, norm_type)
    if scale_grad_by_freq and weight.requires_grad and grad_mode.STATE.enabled:
        weight = _scale_rows_grad(weight, input)
    out = take_by_index(weight, 0, input)  # weight[input]
    if padding_idx is not None and weight.requires_grad:
        keep = (input != padding_idx).unsqueeze(-1).to(weight.dtype)
        # Same values, but the padding rows' contribution reaches weight only through a detached copy.
        out = out * keep + out.detach() * (1.0 - keep)
    return out


def _scale_rows_grad(weight: Any, input: Any) -> Any:
    """``weight`` unchanged in value, its row r's gradient divided by the count of r in ``input``."""
    flat = input.reshape(-1)
    counts = ew.clamp(weight.new_zeros(weight.shape[0]).index_add(0, flat, weight.new_ones(flat.shape[0])), min=1.0)
    inverse = (1.0 / counts).unsqueeze(-1)
    frozen = weight.detach()
    # frozen - (frozen - weight) * inverse: exactly weight (x - x is +0, w - +0 is w, -0 included), slope 1/count
    return frozen - (frozen - weight) * inverse


def _embedding_renorm(weight: Any, input: Any, max_norm: float, norm_type: float) -> None:
    """Rescale (in place, without autograd) the referenced rows whose norm exceeds ``max_norm``."""
    xp = weight._device.xp
    rows = xp.unique(input._data.reshape(-1))
    data = weight._data
    norms = (xp.abs(data[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(data.dtype)
    data[rows] *= scale[:, None]
    weight._bump()


def one_hot(input: Any, num_classes: int = -1) -> Any:
    """(…,) int64 class indices -> (…, num_classes) int64 one-hot."""
    if input.dtype.category != 1:
        raise RuntimeError(f"one_hot: expected an integer (Long) tensor of class indices, got {input.dtype}")
    from ember.creation import arange

    if num_classes == -1:
        num_classes = int(input.max()) + 1 if input.numel() else 0
    if input.numel() and (int(input.min()) < 0 or int(input.max()) >= num_classes):
        raise RuntimeError(f"one_hot: class values must be in [0, {num_classes}), got values in "
                           f"[{int(input.min())}, {int(input.max())}]")
    classes = arange(num_classes, device=input.device)
    return (input.unsqueeze(-1) == classes).to(dtypes.int64)


# ---- pad -------------------------------------------------------------------------------------------
def _check_edge_pad(input: Any, pad: tuple, mode: str) -> None:
    """PyTorch's input checks of reflect/replicate padding: every dim but the batch dim is non-empty, and at
    least one padded dim keeps an element (``pad(x, (-2, -1), mode='replicate')`` of width 3 is refused)."""
    k, shape = len(pad) // 2, tuple(input.shape)
    batch = 1 if input.ndim == k + 2 else 0
    if any(s == 0 for s in shape[batch:]):
        raise RuntimeError(f"pad(mode={mode!r}): Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 "
                           f"batch size and other non-zero dimensions for input, but got: {list(shape)}")
    sizes = [shape[input.ndim - 1 - i] for i in range(k)]
    outs = [sizes[i] + pad[2 * i] + pad[2 * i + 1] for i in range(k)]
    if all(o < 1 for o in outs):
        names = "WHD"[:k]
        raise RuntimeError(f"pad(mode={mode!r}): input ({', '.join(f'{n}: {s}' for n, s in zip(names, sizes))}) is "
                           f"too small. Calculated output {' '.join(f'{n}: {o}' for n, o in zip(names, outs))}; "
                           f"crop less (negative pads) so that one padded dim keeps an element")


def pad(input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Any:
    """Pad the last ``len(pad)//2`` dims: ``pad=(left, right, top, bottom, ...)`` from the last dim back.

    Modes: ``constant`` (negative widths crop), ``reflect``, ``replicate``, ``circular``.
    """
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise RuntimeError(f"pad: padding length must be even and at most 2*ndim ({2 * input.ndim}), got {len(pad)} "
                           f"for input of shape {tuple(input.shape)}")
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        new_size = input.shape[dim] + pad[2 * i] + pad[2 * i + 1]
        if new_size < 0:  # PyTorch refuses negative widths that crop more than the dim has
            raise RuntimeError(f"pad: padding ({pad[2 * i]}, {pad[2 * i + 1]}) of dim {dim} of input "
                               f"{tuple(input.shape)} gives a negative size {new_size}; crop less")
    if mode == "constant":
        out = dispatch.apply(PAD, (input,), {"pad": pad, "value": 0.0 if value is None else float(value)})
        return out if out.grad_fn is None else torch_named(out, "ConstantPadNdBackward0")
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: mode {mode!r} is not supported; use constant, reflect, replicate or circular")
    if len(pad) // 2 > 3 or input.ndim not in (len(pad) // 2 + 1, len(pad) // 2 + 2):
        raise NotImplementedError(f"pad(mode={mode!r}): {len(pad) // 2}-d padding takes a {len(pad) // 2 + 1}-d or "
                                  f"{len(pad) // 2 + 2}-d (batched) input, got shape {tuple(input.shape)} (as PyTorch: "
                                  f"this mode pads 1 to 3 trailing dims; only mode='constant' pads any number)")
    if mode != "circular":
        _check_edge_pad(input, pad, mode)
    from ember.creation import tensor as make_tensor
    import numpy as np

    out = input
    for i in range(len(pad) // 2):
        dim = input.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        size = input.shape[dim]
        positions = np.arange(-lo, size + hi)
        if mode == "reflect":
            if lo >= size or hi >= size:
                raise RuntimeError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the size {size} of dim "
                                   f"{dim} of input {tuple(input.shape)}")
            period = 2 * (size - 1) if size > 1 else 1
            positions = np.abs(positions) % period
            positions = np.where(positions >= size, period - positions, positions)
        elif mode == "replicate":
            positions = np.clip(positions, 0, size - 1)
        else:
            if lo > size or hi > size:
                raise RuntimeError(f"pad: circular padding ({lo}, {hi}) may not exceed the size {size} of dim {dim}")
            positions = positions % size
        out = out.index_select(dim, make_tensor(positions, dtype=dtypes.int64, device=input.device))
    # torch's reflection/replication kernels write a row-major result (channels-last for an input c10's strides
    # rule calls so); the gathers above leave index_select's layout (a row-major NCHW map came back NHWC-strided,
    # and a seeded dropout draws in memory order)
    layout = views.suggest_memory_format(input) if input.ndim == 4 else None
    out = views.contiguous(out, layout) if layout else out.contiguous()
    # torch's reflection/replication backward takes self (zero curvature under create_graph); circular's is a copy
    kind = "Reflection" if mode == "reflect" else "Replication"
    return out if mode == "circular" else grad_join.curvature_link(out, input, f"{kind}Pad{len(pad) // 2}DBackward0")
