"""Elementwise primitives: unary math, binary arithmetic, comparisons, where, clamp, casts.

The fuser needs nothing beyond each record's ``impl``: it runs it on a symbolic namespace to get the
kernel's steps (``ember/graph/passes/symbolic_xp.py``).
"""
from __future__ import annotations

import cmath
import math
from typing import Any

import numpy as np

from ember import dtypes
from ember.backends import native_kernel, special_function
from ember.backends import cpu_hot_ufuncs, cpu_parallel_ufunc
from ember.backends.cpu_threads import parallel_for
from ember.ops import cnn_halves, dispatch, float8_ops, fp_quiet, layout, value_check
from ember.autograd import grad_mode
from ember.autograd.node import NotArrayable, torch_named
from ember.autograd.torch_edges import record_inputs
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.onnx import complex_emitters, emitters as to_onnx
from ember.ops.simplify import same_value


def _broadcast_shapes(*shapes: tuple) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for axis in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -axis:
                d = s[axis]
                if d != 1:
                    if size != 1 and size != d:
                        raise RuntimeError(f"shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be broadcast together")
                    size = d
        result.append(size)
    return tuple(result)


def elementwise_rule(out_dtype: str = "same"):
    """Shape rule for elementwise ops: broadcast the inputs; dtype 'same' or 'bool'."""

    def rule(*specs: Any, **attrs: Any) -> Spec:
        tensors = [s for s in specs if isinstance(s, Spec)]
        shape = _broadcast_shapes(*(s.shape for s in tensors))
        dtype = dtypes.bool_ if out_dtype == "bool" else tensors[0].dtype
        if out_dtype == "attr":
            dtype = attrs["dtype"]
        return Spec(shape, dtype, tensors[0].device)

    return rule


def sum_to(grad: Any, shape: tuple) -> Any:
    """Reduce a broadcast gradient back to ``shape`` (the adjoint of broadcasting)."""
    if grad is None or tuple(grad.shape) == tuple(shape):
        return grad
    return dispatch.apply(OPS["sum_to"], (grad,), {"shape": tuple(shape)})


def _unary(name: str, impl: Any, vjp: Any, save: str = "inputs", onnx: Any = None,
           float_only: bool = False, differentiable: bool = True) -> OpDef:
    return register(OpDef(
        name=name, category="unary", impl=impl, vjp=vjp if differentiable else None,
        shape_rule=elementwise_rule(), save=save, onnx=onnx,
        float_only=float_only,
    ))


def _binary(name: str, impl: Any, vjp: Any, save: str = "inputs", onnx: Any = None,
            out_dtype: str = "same", float_only: bool = False, ufunc: str | None = None) -> OpDef:
    # ``ufunc`` names the namespace function that can write into an out= buffer (in-place ops use it).
    return register(OpDef(
        name=name, category="binary", impl=impl, vjp=vjp, shape_rule=elementwise_rule(out_dtype),
        save=save, onnx=onnx, float_only=float_only, ufunc=ufunc,
    ))


# ---- complex conjugation (every gradient rule of a holomorphic op multiplies by conj(f'(z))) ------------
def _complex_result_rule(x: Spec, **attrs: Any) -> Spec:
    """abs/real/imag/angle of a complex tensor are real of the same precision (complex64 -> float32)."""
    return Spec(x.shape, x.dtype.to_real(), x.device)


CONJ = register(OpDef(
    name="conj", category="unary", impl=lambda xp, x: xp.conj(x), vjp=(lambda ctx, g: conj(g),), save="none",
    onnx=complex_emitters.conjugate,
    shape_rule=elementwise_rule(),
))


def conj(input: Any) -> Any:
    """The complex conjugate (``torch.conj``; a copy, not PyTorch's lazy conjugate bit). Real tensors are
    returned as they are, as PyTorch does."""
    return dispatch.unary(CONJ, input) if input.dtype.is_complex else input


def conj_if_complex(value: Any) -> Any:
    """``conj(value)`` for complex tensors and Python complex numbers, ``value`` itself otherwise.

    Gradient rules use it to follow PyTorch's convention (the conjugate Wirtinger derivative): the
    gradient of a holomorphic ``f`` is ``g * conj(f'(z))``; for real operands nothing is recorded.
    """
    if isinstance(value, complex):
        return value.conjugate()
    if getattr(value, "dtype", None) is not None and value.dtype.is_complex:
        return dispatch.unary(CONJ, value)
    return value


_cj = conj_if_complex


def _real_impl(xp: Any, x: Any) -> Any:
    return xp.real(x)


# real/imag of a complex tensor: copies (PyTorch's are views that write through; ember's are not, see
# docs/complex-fft.md). Their gradients give back a complex tensor of the input's precision.
REAL = register(OpDef(
    name="real", category="unary", impl=_real_impl, save="none", shape_rule=_complex_result_rule,
    onnx=complex_emitters.real,
    vjp=(lambda ctx, g: dispatch.cast(g, g.dtype.to_complex()),),
))
IMAG = register(OpDef(
    name="imag", category="unary", impl=lambda xp, x: xp.imag(x), save="none", shape_rule=_complex_result_rule,
    onnx=complex_emitters.imag,
    vjp=(lambda ctx, g: g * 1j,),
))


def real_part(input: Any) -> Any:
    """``torch.real``: the real part of a complex tensor; a real tensor is returned as it is."""
    return dispatch.unary(REAL, input) if input.dtype.is_complex else input


def imag_part(input: Any) -> Any:
    """``torch.imag``: the imaginary part; real tensors refuse, as in PyTorch."""
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return dispatch.unary(IMAG, input)


_TORCH_COMPLEX_NAMES = {"complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def real_only(op: str, *values: Any) -> None:
    """PyTorch's special functions refuse complex tensors (NumPy/SciPy would compute something else silently:
    SciPy's complex erf, or the real part only)."""
    for v in values:
        dtype = getattr(v, "dtype", None)  # an array's NumPy dtype, or a tensor's ember dtype
        if getattr(dtype, "kind", None) == "c" or getattr(dtype, "is_complex", False) or isinstance(v, complex):
            name = _TORCH_COMPLEX_NAMES.get(getattr(dtype, "name", ""), "ComplexDouble")
            raise NotImplementedError(f"{op}: not implemented for '{name}' ({getattr(dtype, 'name', 'complex')}) "
                                      "tensors, as in PyTorch: torch.special's functions take real inputs; apply it to "
                                      ".real or .abs() if that is what you mean")


def _no_complex(op: str, *values: Any) -> None:
    """PyTorch refuses ordering ops on complex numbers (NumPy would order them lexicographically)."""
    for v in values:
        if getattr(getattr(v, "dtype", None), "kind", None) == "c" or isinstance(v, complex):
            raise RuntimeError(f"{op}: not supported for complex tensors (got {getattr(v, 'dtype', 'complex')}); "
                               "complex numbers have no order. Compare .abs() or .real instead.")


# ---- unary -----------------------------------------------------------------------------------
NEG = _unary("neg", lambda xp, x: xp.negative(x), lambda ctx, g: (-g,), save="none", onnx="Neg")
EXP = _unary("exp", lambda xp, x: xp.exp(x), lambda ctx, g: (g * _cj(ctx.out),), save="output",
             onnx=complex_emitters.exp, float_only=True)
LOG = _unary("log", lambda xp, x: xp.log(x), lambda ctx, g: (g / _cj(ctx.inputs[0]),), onnx=complex_emitters.log,
             float_only=True)
LOG1P = _unary("log1p", lambda xp, x: xp.log1p(x), lambda ctx, g: (g / _cj(ctx.inputs[0] + 1),), float_only=True, onnx=to_onnx.log1p)
SQRT = _unary("sqrt", lambda xp, x: xp.sqrt(x), lambda ctx, g: (g / _cj(ctx.out * 2),), save="output", onnx=complex_emitters.sqrt, float_only=True)
# The gradient multiplies g by the output three times in turn: out ** 3 alone underflows (a variance of
# 1e30 gives rsqrt 1e-15, cubed 1e-45 in float32), which zeroed the variance path of every composite norm.
RSQRT = _unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x), lambda ctx, g: (g * _cj(ctx.out) * _cj(ctx.out) * _cj(ctx.out) * -0.5,),
               save="output", float_only=True, onnx=to_onnx.rsqrt)
SIN = _unary("sin", lambda xp, x: xp.sin(x), lambda ctx, g: (g * _cj(cos(ctx.inputs[0])),), onnx=complex_emitters.sin,
             float_only=True)
COS = _unary("cos", lambda xp, x: xp.cos(x), lambda ctx, g: (-g * _cj(sin(ctx.inputs[0])),), onnx=complex_emitters.cos,
             float_only=True)
TANH = _unary("tanh", lambda xp, x: xp.tanh(x), lambda ctx, g: (g * _cj(1 - ctx.out * ctx.out),), save="output", onnx=complex_emitters.tanh, float_only=True)


def _sigmoid_impl(xp: Any, x: Any) -> Any:
    # PyTorch's formula: 1 / (1 + exp(-x)) keeps the tail (sigmoid(-20) = 2.06e-9 in float32) that
    # (tanh(x / 2) + 1) / 2 rounds to 0. Below -88 (float32) exp(-x) overflows to inf and the result is the
    # limit 0: not worth a warning. (A where() on the sign would be exact there too, but a where() over
    # random signs is ~10x slower than the whole formula in NumPy.)
    token = fp_quiet.enter(fp_quiet.OVER)  # np.errstate(over="ignore") at a third of its cost
    try:
        return 1 / (1 + xp.exp(-x))
    finally:
        fp_quiet.leave(token)


SIGMOID = _unary("sigmoid", _sigmoid_impl, lambda ctx, g: (g * _cj(ctx.out * (1 - ctx.out)),), save="output",
                 onnx=to_onnx.sigmoid, float_only=True)
def _relu_impl(xp: Any, x: Any) -> Any:
    """``max(x, 0)`` (NaN stays NaN, -0.0 stays -0.0: PyTorch's ``x < 0 ? 0 : x``; NumPy's ``maximum(0, x)``
    keeps its second operand on ties, ``maximum(x, 0)`` would turn -0.0 into 0.0); large contiguous CPU arrays
    are split over ember's threads (NumPy's ufunc runs one core; PyTorch's relu uses all)."""
    if getattr(getattr(x, "dtype", None), "kind", None) in ("b", "c"):  # (one test for both refusals)
        if x.dtype.kind == "b":
            raise RuntimeError("relu: Boolean inputs not supported for relu (as in PyTorch); convert with .float() "
                               "or .int() first")
        _no_complex("relu", x)
    if x.__class__ is np.ndarray and x.size < _NATIVE_ELEMENTS:  # small: the last line, without the look-ups
        return xp.maximum(0, x)
    if x.__class__ is np.ndarray and x.size >= cnn_halves.HOT_MIN_ELEMENTS:  # halves on the hot worker (mnist22)
        out = cnn_halves.relu(xp, x)
        if out is not None:
            return out
    kernel = native_kernel(xp, "relu")  # None for the fuser's symbolic namespace (which has no .size)
    if (kernel is not None and x.size >= _NATIVE_ELEMENTS and x.dtype.kind == "f" and x.dtype.itemsize >= 4
            and x.flags.c_contiguous):
        out = xp.empty_like(x)
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        parallel_for(lambda start, stop: kernel(flat_x[start:stop], flat_out[start:stop]), x.size, _SPLIT_ELEMENTS)
        return out
    if xp is np and x.flags.c_contiguous and x.size >= 2 * _SPLIT_ELEMENTS:
        out = xp.empty_like(x)
        flat_x, flat_out = x.reshape(-1), out.reshape(-1)
        parallel_for(lambda start, stop: xp.maximum(0, flat_x[start:stop], out=flat_out[start:stop]), x.size,
                     _SPLIT_ELEMENTS)
        return out
    return xp.maximum(0, x)


# Elements per thread below which a thread hand-off costs more than it saves: waking the pool's sleeping worker and
# being woken back cost ~50 us each way on a VM (W2's 131K-element relu: 78 us split, 12.6 on one thread; 512K
# 170 vs 145; 1M 295 vs 310, under SCHED_FIFO: docs/cpu-performance.md "w2jax20").
_SPLIT_ELEMENTS = 1 << 19
_NATIVE_ELEMENTS = 4096  # below this a numba call's dispatch (~1-2 us) costs what NumPy's maximum does
# The gradient is joined to the output with a zero derivative under create_graph (torch's threshold_backward takes
# ``result``: d/dresult is zeros, so a second derivative of relu alone is zeros, not "not used" / None).
RELU = _unary("relu", _relu_impl, lambda ctx, g: (kink_join(relu_grad(g, ctx.out), ctx.out),), save="output",
              onnx="Relu")
def _abs_vjp(ctx: Any, g: Any) -> tuple:
    """g * sign(x); for complex x, g * sgn(x) = g * x / |x| (0 at 0), PyTorch's abs backward."""
    x = ctx.inputs[0]
    if not x.dtype.is_complex:
        return (g * sign(x),)
    magnitude = abs(x)
    return (g * (x / where(magnitude == 0, 1.0, magnitude)),)


ABS = _unary("abs", lambda xp, x: xp.abs(x), _abs_vjp, onnx=complex_emitters.absolute)
ABS.shape_rule = _complex_result_rule
RECIPROCAL = _unary("reciprocal", lambda xp, x: 1 / x, lambda ctx, g: (-g * _cj(ctx.out * ctx.out),), save="output", onnx=to_onnx.reciprocal, float_only=True)
ERF = _unary("erf", lambda xp, x: real_only("erf", x) or special_function(xp, "erf")(x).astype(x.dtype, copy=False),
             lambda ctx, g: (g * exp(-ctx.inputs[0] * ctx.inputs[0]) * (2 / math.sqrt(math.pi)),),
             onnx="Erf", float_only=True)


def _zero_grad(ctx: Any, g: Any) -> tuple:
    """PyTorch's zeros_like(grad) for piecewise-constant ops: 0 also where the upstream is inf or NaN (g * 0 is
    NaN there, which reached lp_pool's input through sign(0) * relu(0) ** 0.5)."""
    zero = grad_mask(abs(g) * 0, isfinite(g))  # abs: +0 as torch's zeros, not -0 where g < 0
    return (zero.to(g.dtype) if g.dtype.is_complex else zero,)  # a complex input's gradient stays complex


def _zero_grads(ctx: Any, g: Any) -> tuple:
    """Zeros of each tensor input's shape (torch's gradient of ``div(rounding_mode='floor')``, ``x // y``)."""
    zero = _zero_grad(ctx, g)[0]
    return tuple(None if shape is None else sum_to(zero, tuple(shape)) for shape in ctx.input_meta)


def _join_value(xp: Any, value: Any, *rest: Any, **attrs: Any) -> Any:
    return value * 1  # new memory (the graph planner may reuse an output buffer); exact: keeps -0 and NaN, traces


def _join_onnx(b: Any, n: Any) -> str:
    return b.node("Identity", [n.inputs[0]])


def _join_x_grad(ctx: Any, g: Any) -> Any:
    if ctx.attrs.get("link"):  # curvature_link: no term in a plain backward; zeros joined to x under create_graph
        return edge_kink_join(g.new_zeros(tuple(ctx.input_meta[1])), ctx, 1) if grad_mode.is_grad_enabled() else None
    return sum_to(_zero_grad(ctx, g)[0], tuple(ctx.input_meta[1]))


# Values computed outside autograd, joined to the inputs torch differentiates (ember/ops/grad_join.py's helpers):
# ``g`` passes on to the value's own history, zeros (or ``g * scale``, ``g / scale``) to ``x``. With
# ``link=True`` (grad_join.curvature_link) x's term exists only under create_graph, joined to x itself.
ZERO_GRAD_JOIN = register(OpDef(
    name="zero_grad_join", category="binary", impl=_join_value, save="none", onnx=_join_onnx,
    vjp=(lambda ctx, g: g, _join_x_grad),
    shape_rule=lambda value, *rest, **attrs: Spec(value.shape, value.dtype, value.device),  # value as it is
    doc="value, with a zero gradient to x (ops whose derivative is 0 everywhere, as torch's).",
))


def kink_join(grad: Any, x: Any) -> Any:
    """``grad`` joined to ``x`` with a zero derivative when a backward runs with ``create_graph`` and ``x`` requires
    grad (PyTorch's backward nodes of piecewise-linear ops take ``self``/``result``: their gradient requires grad and
    differentiates to zeros); ``grad`` itself otherwise (a plain backward pays one test)."""
    if x._requires_grad and grad_mode.is_grad_enabled() and (grad.dtype.is_floating_point or grad.dtype.is_complex):
        return dispatch.apply(ZERO_GRAD_JOIN, (grad, x))
    return grad


def edge_kink_join(grad: Any, ctx: Any, i: int = 0) -> Any:
    """:func:`kink_join` for a record that keeps no input (pools, pads): ``grad`` joined, with a zero derivative, to
    the node's input ``i`` through the node's own edge to it (``ctx.next_edges[i]``), under ``create_graph`` only.

    PyTorch's ``max_pool2d_with_indices_backward``, ``avg_pool2d_backward``, ``reflection_pad2d_backward``... take
    ``self``: their result requires grad and differentiates to zeros in ``self``. Joining through the edge keeps
    the forward from saving ``x`` (a pooled network would hold every pool's input until backward).

    Example:
        >>> g = edge_kink_join(max_pool2d_backward(g, indices, shape, attrs), ctx)   # in a vjp
    """
    if grad is None or not grad_mode.is_grad_enabled() or not (grad.dtype.is_floating_point or grad.dtype.is_complex):
        return grad
    edges = getattr(ctx, "next_edges", None)  # (ember.graph's symbolic gradients pass another ctx: nothing to join)
    edge = edges[i] if edges is not None and i < len(edges) else None
    if edge is None or dispatch.is_symbolic(grad) or grad._device.type == "meta":
        return grad
    owner, output_nr = edge
    if isinstance(owner, dispatch.Tensor):  # a leaf: its edge is the leaf itself
        proxy = owner
    else:  # a stand-in carrying the input's place in the graph: x's shape, no memory (only its shape is read)
        xp = grad._device.xp
        proxy = dispatch.Tensor._make(xp.broadcast_to(xp.zeros((), dtype=grad._data.dtype), tuple(ctx.input_meta[i])),
                                      grad._device, True)
        proxy.grad_fn, proxy._output_nr = owner, output_nr
    return dispatch.apply(ZERO_GRAD_JOIN, (grad, proxy))


def _scaled_grad(ctx: Any, g: Any) -> Any:
    """``g * scale`` (``g / scale`` with ``divide``); with ``masked``, exactly 0 where ``scale`` is 0 (torch's
    masked_fill: an infinite or NaN upstream gives 0 there, not 0 * inf = NaN)."""
    scale = ctx.inputs[2]
    if ctx.attrs.get("divide"):
        return g / scale
    if ctx.attrs.get("masked"):
        return where(scale != 0, g * scale, 0.0)
    return g * scale


SCALED_GRAD_JOIN = register(OpDef(
    name="scaled_grad_join", category="ternary", impl=_join_value, save="inputs", nondiff_inputs=(2,), onnx=_join_onnx,
    vjp=(lambda ctx, g: g, lambda ctx, g: sum_to(_scaled_grad(ctx, g), tuple(ctx.input_meta[1])), lambda ctx, g: None),
    # The result is ``value`` as it is: its shape, not the broadcast of all three (x.max() joins a 0-d value to a
    # whole tensor; a broadcast rule made the traced graph expect a gradient of x's shape).
    shape_rule=lambda value, *rest, **attrs: Spec(value.shape, value.dtype, value.device),
    doc="value, with the gradient g * scale (or g / scale) to x.",
))


SIGN = _unary("sign", lambda xp, x: _no_complex("sign (use sgn for complex tensors)", x) or (
    x.copy() if x.dtype.kind == "b" else xp.sign(x)), _zero_grad, save="none", onnx="Sign")  # sign(bool) is itself
FLOOR = _unary("floor", lambda xp, x: _no_complex("floor", x) or xp.floor(x), _zero_grad, save="none", onnx="Floor")
CEIL = _unary("ceil", lambda xp, x: _no_complex("ceil", x) or xp.ceil(x), _zero_grad, save="none", onnx="Ceil")
ROUND = _unary("round", lambda xp, x, decimals=0: _no_complex("round", x) or xp.round(x, decimals), _zero_grad, save="none",
               onnx=to_onnx.round_decimals)
LOGICAL_NOT = _unary("logical_not", lambda xp, x: xp.logical_not(x), None, onnx=to_onnx.logical("Not"),
                     differentiable=False)
LOGICAL_NOT.shape_rule = elementwise_rule("bool")
ISNAN = _unary("isnan", lambda xp, x: xp.isnan(x), None, onnx="IsNaN", differentiable=False)
ISNAN.shape_rule = elementwise_rule("bool")
ISINF = _unary("isinf", lambda xp, x: xp.isinf(x), None, onnx="IsInf", differentiable=False)
ISINF.shape_rule = elementwise_rule("bool")
BITWISE_NOT = _unary("bitwise_not", lambda xp, x: _bitwise_check("bitwise_not", x) or xp.invert(x), None,
                     onnx=to_onnx.bitwise("Not", "BitwiseNot"),
                     differentiable=False)


# ---- binary ----------------------------------------------------------------------------------
# Rules say only the math: one rule per input, called only for inputs that need a gradient; the engine
# sums broadcast gradients back to each input's shape (OpDef.input_grads). ``ctx.needs`` stays only in
# the one-function rules whose inputs share work (maximum/minimum's comparisons).
_ADD_VJP = (lambda ctx, g: g, lambda ctx, g: g)
_SUB_VJP = (lambda ctx, g: g, lambda ctx, g: -g)
_MUL_VJP = (lambda ctx, g: g * _cj(ctx.inputs[1]), lambda ctx, g: g * _cj(ctx.inputs[0]))
# d/db (a / b) = -g * ((a / b) / b), not a / (b * b): b * b underflows (denormal b) or overflows (1e30
# in float32), as PyTorch.
_DIV_VJP = (lambda ctx, g: g / _cj(ctx.inputs[1]),
            lambda ctx, g: -g * _cj(ctx.inputs[0] / ctx.inputs[1] / ctx.inputs[1]))


def _pow_base_grad(ctx: Any, g: Any) -> Any:
    a, b = ctx.inputs
    if isinstance(b, (int, float, complex)):
        # x ** 0 is constant: its gradient is 0 everywhere, also at x = 0 (0 * 0 ** -1 would be NaN).
        return (g * 0 if b == 0 else g * _cj(b * a ** (b - 1))) if b != 2 else g * 2 * _cj(a)
    return where(b == 0, 0.0, g * _cj(b * a ** (b - 1)))


def _pow_exponent_grad(ctx: Any, g: Any) -> Any:
    """d(a^b)/db = a^b log a; 0 where a == 0 and b >= 0 (PyTorch's convention)."""
    a, b = ctx.inputs
    if isinstance(a, (int, float, complex)):  # a Python base (2.0 ** x): its log in double precision
        if isinstance(a, complex) or getattr(b, "dtype", None) is not None and b.dtype.is_complex:
            return g * 0 if a == 0 else g * _cj(a ** b * cmath.log(a))
        if a == 0:  # 0 ** b: slope 0 for b >= 0; for b < 0, inf * log 0 = -inf (PyTorch's)
            return where(b >= 0, 0.0, g * -math.inf)
        return g * a ** b * (math.log(a) if a > 0 else math.nan)
    # 0 ** negative is inf, with log 0 = -inf.
    masked = logical_and(a == 0, real_part(b) >= 0) if a.dtype.is_complex or b.dtype.is_complex \
        else logical_and(a == 0, b >= 0)
    # torch's grad * where(mask, 0, a^b log a): the mask is on the derivative, so a NaN upstream stays NaN there
    return g * where(masked, 0.0, _cj(a ** b * log(where(masked, 1.0, a))))


def _minmax_vjp(pick_first: Any) -> Any:
    def vjp(ctx: Any, g: Any) -> tuple:
        a, b = ctx.inputs
        # Ties split the gradient evenly, as PyTorch does; each side loses it only where the other wins, so at a
        # NaN (no order) both get all of it (torch's where(a == b, g / 2, g).masked_fill_(a < b, 0))
        tie = a == b
        share_a = where(tie, g * 0.5, where(pick_first(b, a), 0.0, g)) if ctx.needs[0] else None
        share_b = where(tie, g * 0.5, where(pick_first(a, b), 0.0, g)) if ctx.needs[1] else None
        return share_a, share_b

    return vjp


def _threaded(name: str) -> Any:
    """The impl ``xp.<name>(x, y)``, a large NumPy pass split over ember's threads (``cpu_parallel_ufunc``: the
    same bits; NumPy's ufunc runs one core, PyTorch's add uses all), a medium one (32K+ elements) in halves on the
    hot worker while it spins after a product (``cpu_hot_ufuncs``, w1hot21)."""
    ufunc = getattr(np, name)

    def impl(xp: Any, x: Any, y: Any) -> Any:
        if xp is np:
            size = max(getattr(x, "size", 0), getattr(y, "size", 0))
            if size >= cpu_hot_ufuncs.MIN_ELEMENTS:  # halves on the hot worker while it spins (w1hot21)
                out = cpu_hot_ufuncs.binary(ufunc, x, y)
                if out is not None:
                    return out
            if size >= 2 * cpu_parallel_ufunc.MIN_PER_THREAD:  # else large ones on the pool
                out = cpu_parallel_ufunc.binary(ufunc, x, y)
                if out is not None:
                    return out
        return getattr(xp, name)(x, y)

    return impl


ADD = _binary("add", _threaded("add"), _ADD_VJP, save="none", onnx="Add", ufunc="add")
SUB = _binary("sub", _threaded("subtract"), _SUB_VJP, save="none", onnx="Sub", ufunc="subtract")
MUL = _binary("mul", _threaded("multiply"), _MUL_VJP, save="cross", onnx=complex_emitters.multiply,
              ufunc="multiply")
DIV = _binary("div", lambda xp, x, y: xp.true_divide(x, y), _DIV_VJP, onnx=complex_emitters.divide, float_only=True,
             ufunc="true_divide")
def _pow_impl(xp: Any, x: Any, y: Any) -> Any:
    """xp.power, with PyTorch's integer tensor ** negative integer tensor: 1 for base 1, +-1 for base -1 (by the
    exponent's parity), else 0 (NumPy refuses the whole call). A negative *scalar* exponent stays an error."""
    y_dtype = getattr(y, "dtype", None)
    if y_dtype is None:  # a Python exponent (x ** 2: the hot path)
        if type(y) is bool and getattr(getattr(x, "dtype", None), "kind", "") == "b":
            return x.copy() if y else xp.ones_like(x)  # bool_tensor ** True / False stays bool, as PyTorch
        if type(y) is int and y < 0 and getattr(getattr(x, "dtype", None), "kind", "") in "iu" and x.size == 0:
            raise ValueError("Integers to negative integer powers are not allowed.")  # (NumPy checks no empty array)
        if type(y) in (int, float) and (y == 2 or y == 3 or y == -2) \
                and getattr(getattr(x, "dtype", None), "kind", "") == "f" and x.dtype.itemsize >= 4:
            # torch's pow kernel spells these as x * x * x and 1 / (x * x) (two roundings; powf rounds once and
            # differed in the last bit for 31% of float32 values). float16/bfloat16 arrive here widened to float32
            # (opmath): float16 then matches torch's; torch's bfloat16 rounds each product (left, docs trust21).
            # x ** 2 is one correctly rounded product either way; the multiply is 2-4x faster than powf's loop.
            square = x * x
            if y == 2:
                return square
            return square * x if y == 3 else xp.true_divide(1, square, dtype=x.dtype)
        if (y == 0.5 or y == -0.5) and getattr(getattr(x, "dtype", None), "kind", "") == "f" and x.dtype.itemsize >= 4:
            # torch's sqrt and rsqrt (1 / sqrt(x): two roundings, -0 -> -inf, -inf -> NaN) where NumPy's power
            # rounded once (1 ulp in 12-18% of float32/float64 values of x ** -0.5) and gave pow's +inf, 0
            with np.errstate(invalid="ignore", divide="ignore"):
                root = xp.sqrt(x)
                return root if y == 0.5 else xp.true_divide(1, root, dtype=x.dtype)
        return xp.power(x, y)
    y_kind = y_dtype.kind
    if y_kind == "b" and (type(x) is bool or getattr(getattr(x, "dtype", None), "kind", "") == "b"):
        raise RuntimeError("pow: not implemented for bool tensors (as in PyTorch); convert with .int() first")
    if y_kind in ("i", "u") and type(x) in (int, bool):  # 1 ** int_tensor: the base takes the tensor's dtype
        x = xp.asarray(x).astype(y.dtype)
    if (y_kind in ("i", "u") and getattr(x, "dtype", None) is not None
            and x.dtype.kind in "iu" and bool((y < 0).any())):
        negative = y < 0
        base = xp.broadcast_to(x, xp.broadcast_shapes(x.shape, y.shape))
        inverse = xp.where(base == 1, 1, xp.where(base == -1, 1 - 2 * (xp.abs(y) % 2), 0)).astype(base.dtype)
        return xp.where(negative, inverse, xp.power(base, xp.where(negative, 0, y)))
    return xp.power(x, y)


POW = _binary("pow", _pow_impl, (_pow_base_grad, _pow_exponent_grad), onnx=complex_emitters.power, ufunc="power")


def _pow_opmath(xp: Any, x: Any, y: Any, _wide_pow: Any = POW.impl_opmath) -> Any:
    """pow for half inputs: float32 math rounded once (the opmath wrapper), except torch's bfloat16 ``x ** 3`` and
    ``x ** -2`` with a Python exponent, which round ``x * x`` to bfloat16 before the second step (22-27% of values
    differed by a bfloat16 ulp when rounded once), and float16's ``x ** 0.5`` / ``x ** -0.5``, which torch computes
    with C's pow (``pow(-0, .5)`` is +0, ``pow(-inf, .5)`` inf) where the other float dtypes take sqrt / rsqrt."""
    name = getattr(getattr(x, "dtype", None), "name", "")
    if type(y) in (int, float) and name in ("bfloat16", "float16") and y in (3, -2, 0.5, -0.5):
        wide = x.astype(xp.float32)
        if name == "bfloat16" and (y == 3 or y == -2):
            square = (wide * wide).astype(x.dtype).astype(xp.float32)
            return (square * wide if y == 3 else xp.true_divide(1, square, dtype=xp.float32)).astype(x.dtype)
        if name == "float16" and y == 0.5:  # torch's float16 kernel calls pow: pow(-0, .5) = +0, pow(-inf, .5) = inf
            with np.errstate(invalid="ignore"):
                root = xp.sqrt(wide) + xp.float32(0)
            return xp.where(wide == -xp.inf, xp.float32(xp.inf), root).astype(x.dtype)
        if name == "float16" and y == -0.5:  # and pow for -0.5 too: pow(-0, -.5) = inf, pow(-inf, -.5) = 0
            with np.errstate(invalid="ignore", divide="ignore"):
                return xp.power(wide, xp.float32(-0.5)).astype(x.dtype)
    return _wide_pow(xp, x, y)


POW.impl = POW.impl_opmath = _pow_opmath
MAXIMUM = _binary("maximum", lambda xp, x, y: _no_complex("maximum", x, y) or xp.maximum(x, y), _minmax_vjp(lambda a, b: a > b),
                  onnx="Max")
MINIMUM = _binary("minimum", lambda xp, x, y: _no_complex("minimum", x, y) or xp.minimum(x, y), _minmax_vjp(lambda a, b: a < b),
                  onnx="Min")


def _integer_divisor_check(op: str, xp: Any, x: Any, y: Any) -> None:
    """Integer division by zero raises, as in PyTorch (NumPy would return 0 and warn). Checked in the impl,
    where the values are, so a compiled graph refuses it too; float division keeps its inf/NaN."""
    if getattr(x, "dtype", None) is None or getattr(y, "dtype", None) is None:
        kinds = {getattr(v, "dtype", None).kind if hasattr(v, "dtype") else
                 ("f" if isinstance(v, float) else "c" if isinstance(v, complex) else "i") for v in (x, y)}
    else:
        kinds = {x.dtype.kind, y.dtype.kind}
    if not kinds & {"f", "c", "V"} and bool(xp.any(y == 0)):  # "V": bfloat16 (ml_dtypes) is a float
        raise RuntimeError(f"{op}: ZeroDivisionError: integer division by zero (the divisor has a 0); divide "
                           "floats instead (x.float()) or replace the zeros first (torch.where(y == 0, 1, y))")


def _checked_int_division(op: str, fn: str) -> Any:
    def impl(xp: Any, x: Any, y: Any) -> Any:
        _no_complex(op, x, y)
        if all(type(v) is bool or getattr(getattr(v, "dtype", None), "kind", "") == "b" for v in (x, y)):
            raise RuntimeError(f"{op}: not implemented for bool tensors (as in PyTorch); convert with .int() first")
        _integer_divisor_check(op, xp, x, y)
        return getattr(xp, fn)(x, y)

    return impl


FLOOR_DIVIDE = _binary("floor_divide", _checked_int_division("floor_divide", "floor_divide"), _zero_grads,
                       save="none", onnx=to_onnx.floor_divide)
_remainder_core = _checked_int_division("remainder", "remainder")


def _remainder_impl(xp: Any, x: Any, y: Any) -> Any:
    """NumPy's remainder, with PyTorch's sign on zero results (the dividend's: -4 % 2 is -0, 4 % -2 is +0;
    NumPy gives the divisor's)."""
    r = _remainder_core(xp, x, y)
    if getattr(r, "dtype", None) is not None and r.dtype.kind in "fV":
        r = xp.where(r == 0, xp.copysign(r, x), r)
    return r


REMAINDER = _binary("remainder", _remainder_impl,
                    (lambda ctx, g: g,
                     # floor_divide, not floor(a / b): a / b rounds to -0 for a = 1e-40, b = -1e30,
                     # whose floor quotient is -1 (PyTorch's)
                     lambda ctx, g: -g * floor_divide(ctx.inputs[0].detach(), ctx.inputs[1].detach())),
                    onnx=to_onnx.remainder)


def _trunc(q: Any) -> Any:
    return where(q < 0, ceil(q), floor(q))


# C's fmod: the result takes the dividend's sign (remainder takes the divisor's).
_fmod_core = _checked_int_division("fmod", "fmod")


FMOD = _binary("fmod", _fmod_core,
               (lambda ctx, g: g, lambda ctx, g: -g * _trunc(ctx.inputs[0] / ctx.inputs[1])),
               onnx=to_onnx.fmod)

for _name, _fn, _sym, _onnx in [
    ("eq", "equal", "==", "Equal"), ("ne", "not_equal", "!=", to_onnx.not_equal), ("lt", "less", "<", "Less"),
    ("le", "less_equal", "<=", "LessOrEqual"), ("gt", "greater", ">", "Greater"),
    ("ge", "greater_equal", ">=", "GreaterOrEqual"),
]:
    # eq/ne compare complex numbers; the ordering comparisons refuse them, as PyTorch
    _impl = ((lambda f: lambda xp, x, y: getattr(xp, f)(x, y))(_fn) if _name in ("eq", "ne") else
             (lambda f, n: lambda xp, x, y: _no_complex(n, x, y) or getattr(xp, f)(x, y))(_fn, _name))
    _binary(_name, _impl, None, onnx=_onnx, out_dtype="bool")
for _name, _onnx in [("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor")]:
    _binary(_name, (lambda f: lambda xp, x, y: getattr(xp, f)(x, y))(_name), None, onnx=to_onnx.logical(_onnx),
            out_dtype="bool")


def _bitwise_check(op: str, *values: Any) -> None:
    for v in values:
        if getattr(getattr(v, "dtype", None), "kind", "i") in "fcV" or isinstance(v, (float, complex)):
            raise RuntimeError(f"{op}: not implemented for floating-point tensors (got {v.dtype if hasattr(v, 'dtype') else 'float'}); "
                               "bitwise ops take integer or bool tensors")


for _name, _bool_op, _int_op in [("bitwise_and", "And", "BitwiseAnd"), ("bitwise_or", "Or", "BitwiseOr"),
                                 ("bitwise_xor", "Xor", "BitwiseXor")]:
    _binary(_name, (lambda f: lambda xp, x, y: _bitwise_check(f, x, y) or getattr(xp, f)(x, y))(_name), None,
            onnx=to_onnx.bitwise(_bool_op, _int_op))


# ---- where, clamp, cast ----------------------------------------------------------------------
_WHERE_VJP = (None, lambda ctx, g: where(ctx.inputs[0], g, 0.0), lambda ctx, g: where(ctx.inputs[0], 0.0, g))


def _where_rule(cond: Spec, x: Any, y: Any) -> Spec:
    shapes = [s.shape for s in (cond, x, y) if isinstance(s, Spec)]
    dt = x.dtype if isinstance(x, Spec) else (y.dtype if isinstance(y, Spec) else dtypes.get_default_dtype())
    return Spec(_broadcast_shapes(*shapes), dt, cond.device)


WHERE = register(OpDef(
    name="where", category="ternary", impl=lambda xp, c, x, y: xp.where(c, x, y), vjp=_WHERE_VJP,
    shape_rule=_where_rule, onnx=complex_emitters.select, nondiff_inputs=(0,), save="first",
))


try:  # the ufunc np.clip calls for float arrays with both bounds (numpy/_core/_methods.py: _clip)
    from numpy._core.umath import clip as _CLIP_UFUNC
except ImportError:  # NumPy 1.x
    try:
        from numpy.core.umath import clip as _CLIP_UFUNC
    except ImportError:
        _CLIP_UFUNC = None


def _clamp_impl(xp: Any, x: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    _no_complex("clamp", x)
    if min is not None and max is not None:
        return xp.clip(x, min, max)
    if xp is np and x.dtype.kind == "f":
        # PyTorch keeps x where it equals the bound (clamp(-0.0, min=0) is -0.0); NumPy's two-sided clip does,
        # maximum/minimum return the bound's zero. (The Numba fuser still emits maximum/minimum.) The clip ufunc
        # itself where it can be reached: np.clip's two Python layers end in this very call (~1.5 us a call).
        clip = _CLIP_UFUNC if x.__class__ is np.ndarray and _CLIP_UFUNC is not None else np.clip
        return clip(x, min, np.inf) if min is not None else clip(x, -np.inf, max)
    if min is not None:
        return xp.maximum(x, min)
    return xp.minimum(x, max)


def _clamp_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    lo, hi = ctx.attrs.get("min"), ctx.attrs.get("max")
    keep = None
    if lo is not None:
        keep = x >= lo
    if hi is not None:
        keep = (x <= hi) if keep is None else logical_and(keep, x <= hi)
    return (grad_mask(g, keep),)


CLAMP = register(OpDef(
    name="clamp", category="unary", impl=_clamp_impl, vjp=_clamp_vjp, shape_rule=elementwise_rule(),
    onnx=to_onnx.clamp,
))


def _cast_impl(xp: Any, x: Any, dtype: Any) -> Any:
    """``x.astype(dtype)`` with PyTorch's rules: complex -> real keeps the real part, complex -> bool is nonzero
    (1j is True); float8 goes through ember/float8.py (torch's rounding and saturation, not ml_dtypes')."""
    if dtype in dtypes.FLOAT8_DTYPES:
        return float8_ops.to_float8(x, dtype)
    if x.dtype in dtypes.FLOAT8_NP:
        x = float8_ops.from_float8(x)
    if x.dtype.kind == "c" and dtype.category == 0:
        return x != 0
    out = (xp.real(x) if x.dtype.kind == "c" and dtype.category < 3 else x).astype(dtype.np)
    if xp is np and type(x) is np.ndarray and not layout.plainly_contiguous(x):  # torch's to(): dense input's strides
        out = layout.with_strides(np, out, layout.preserve_strides(x.shape, layout.element_strides(x)))
    return out


def _cast_vjp(ctx: Any, g: Any) -> tuple:
    source = ctx.attrs["source"] if "source" in ctx.attrs else None
    return (dispatch.cast(g, source) if source is not None else g,)


TO_DTYPE = register(OpDef(
    name="to_dtype", category="cast",
    # complex -> real keeps the real part (PyTorch's cast; also the gradient of a real -> complex cast)
    # complex -> bool is "nonzero" (1j is True), as PyTorch
    impl=lambda xp, x, dtype, source=None: _cast_impl(xp, x, dtype),
    vjp=lambda ctx, g: (dispatch.cast(g, ctx.attrs["source"]),) if ctx.attrs.get("source") is not None else (g,),
    shape_rule=elementwise_rule("attr"), save="none", onnx=to_onnx.to_dtype, simplify=same_value,
))


# The backward of clamp: keep the gradient where a mask holds, 0 elsewhere - also where the gradient is
# inf or NaN (a masked multiply would give NaN there; PyTorch gives 0). The mask carries no gradient,
# so the op is its own vjp in the first input.
GRAD_MASK = register(OpDef(
    name="grad_mask", category="binary", impl=lambda xp, g, mask: _masked_grad(xp, g, mask),
    vjp=lambda ctx, gg: (grad_mask(gg, ctx.inputs[1]), None), shape_rule=elementwise_rule(), nondiff_inputs=(1,),
    onnx=to_onnx.grad_mask,
))


def _relu_grad_impl(xp: Any, g: Any, out: Any) -> Any:
    if g.__class__ is np.ndarray and out.__class__ is np.ndarray and g.size <= _SMALL_MASK and g.shape == out.shape:
        return xp.where(out <= 0, 0, g)  # small: the kernel's values (+0 where out <= 0) without its call (~2 us)
    if g.__class__ is np.ndarray and out.__class__ is np.ndarray and g.size >= cnn_halves.HOT_MIN_ELEMENTS:
        result = cnn_halves.relu_grad(xp, g, out)  # halves on the hot worker (mnist22)
        if result is not None:
            return result
    kernel = native_kernel(xp, "relu_grad")
    if (kernel is not None and g.shape == out.shape and g.dtype == out.dtype and g.dtype.kind == "f"
            and g.dtype.itemsize >= 4  # numba has no float16
            and g.flags.c_contiguous and out.flags.c_contiguous):
        result = xp.empty_like(g)
        flat_g, flat_out, flat_result = g.reshape(-1), out.reshape(-1), result.reshape(-1)
        parallel_for(lambda start, stop: kernel(flat_g[start:stop], flat_out[start:stop], flat_result[start:stop]),
                     g.size, _SPLIT_ELEMENTS)  # on all cores: the kernel releases the GIL
        return result
    return _masked_grad(xp, g, ~(out <= 0))  # NaN outputs pass g through, as PyTorch's threshold_backward


_SMALL_MASK = 2048  # elements: below, where() is faster than the masked multiply (above, 5-20x slower)


def _masked_grad(xp: Any, g: Any, mask: Any) -> Any:
    """``g`` where ``mask``, else 0 (PyTorch's relu/clamp backward), in the fastest NumPy form.

    A masked multiply is ~15x faster than ``where`` over random masks (no per-element branch), but gives
    NaN where ``g`` is inf/NaN and the mask is off (torch gives 0) and -0 where ``g`` is negative. Large float
    arrays AND their bits with 0 or all ones instead (~3x faster than ``where``, torch's bits everywhere); other
    namespaces multiply, and one reduction of the product detects a non-finite value (then ``where``).

    Example:
        >>> import numpy as np
        >>> _masked_grad(np, np.array([np.inf, 2.0]), np.array([False, True]))
        array([0., 2.])
    """
    if g.__class__ is np.ndarray:
        if g.size <= _SMALL_MASK and mask.shape == g.shape:
            # small: one where() (2-5 us) beats errstate + multiply + the finiteness check (9-15 us), and gives
            # torch's bits everywhere (+0 where masked off, 0 for a masked-off inf/NaN)
            return np.where(mask, g, 0)
    elif getattr(xp, "records_steps", False):  # the fuser's symbolic namespace: the where form fuses
        return xp.where(mask, g, 0)  # (asked only off NumPy: a missing attribute of the numpy module costs ~4 us)
    ints = _SAME_SIZE_INT.get(g.dtype.itemsize) if g.dtype.kind in "fV" else None
    if ints is not None and xp is np and getattr(mask, "dtype", None) == np.bool_:
        # the bits of g ANDed with 0 or all ones: torch's where() bits (+0 where masked off, also for a negative,
        # infinite or NaN g; a masked multiply gave -0 for a negative g), in two passes without a branch
        keep = mask.astype(ints)
        np.negative(keep, out=keep)  # 0 or -1 (all ones): 0.93-0.98 ms per 1M float32, the multiply 1.15-1.19
        out = keep if keep.shape == g.shape else None  # (a broadcast mask: a new array of g's shape)
        return np.bitwise_and(g.view(ints), keep, out=out).view(g.dtype)
    if xp is not np:  # a device: one where() kernel, no host read of a finiteness test (a sync per call on a
        return xp.where(mask, g, 0).astype(g.dtype, copy=False)  # GPU, refused in CUDA-graph capture); torch's bits
    with np.errstate(invalid="ignore"):  # inf * 0: the NaN is detected and replaced just below
        product = g * mask
    if product.size and not bool(xp.isfinite(product.sum())):  # rare: inf/NaN (or overflow) present
        return xp.where(mask, g, 0).astype(g.dtype, copy=False)
    return product.astype(g.dtype, copy=False)


_SAME_SIZE_INT = {2: np.int16, 4: np.int32, 8: np.int64}  # float16/bfloat16, float32, float64 bits


# relu's backward: ``g`` where relu's output is positive. One op (and, with a native kernel, one
# pass) instead of a comparison plus a masked multiply; its vjp in ``g`` is itself.
RELU_GRAD = register(OpDef(
    name="relu_grad", category="binary", impl=_relu_grad_impl, shape_rule=elementwise_rule(),
    vjp=lambda ctx, gg: (relu_grad(gg, ctx.inputs[1]), None), nondiff_inputs=(1,), onnx=to_onnx.relu_grad,
))


def relu_grad(grad: Any, out: Any) -> Any:
    """The gradient through relu: 0 where ``out`` (relu's output) is <= 0, else ``grad`` (NaN passes it, as in PyTorch)."""
    return dispatch.apply(RELU_GRAD, (grad, out))


def grad_mask(grad: Any, mask: Any) -> Any:
    """``grad`` where ``mask`` is true, 0 elsewhere (``mask`` is a bool tensor broadcastable to grad)."""
    return dispatch.apply(GRAD_MASK, (grad, mask))



# ---- array gradient rules (OpDef.array_vjp) ------------------------------------------------------
# Plain backward passes on CPU float32/float64 run these on NumPy arrays instead of the ember-op rules
# above (no dispatch, no Tensor per step). Each makes the NumPy calls its ember-op rule makes, in the
# same order, so both give the same bits (tests/autograd/test_array_vjp_matches_vjp.py); a rule that
# meets a case it does not cover raises NotArrayable and the node runs its ember-op rule.
def _not_arrayable(ctx: Any, g: Any) -> Any:
    raise NotArrayable


def _pow_base_array_grad(ctx: Any, g: Any) -> Any:
    a, b = ctx.inputs
    if b.__class__ not in (int, float):  # a tensor exponent takes where(): the ember-op rule
        raise NotArrayable
    # (the impl, not a ** (b - 1): x ** 0.5's slope takes x ** -0.5 as 1 / sqrt(x), the ember rule's and torch's)
    return (g * 0 if b == 0 else g * (b * _pow_impl(np, a, b - 1))) if b != 2 else g * 2 * a


def _clamp_array_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    lo, hi = ctx.attrs.get("min"), ctx.attrs.get("max")
    if lo.__class__ not in (int, float, type(None)) or hi.__class__ not in (int, float, type(None)):
        raise NotArrayable  # tensor bounds
    keep = None
    if lo is not None:
        keep = x >= lo
    if hi is not None:
        keep = (x <= hi) if keep is None else np.logical_and(keep, x <= hi)
    return (_masked_grad(np, g, keep),)


NEG.array_vjp = (lambda ctx, g: -g,)
EXP.array_vjp = (lambda ctx, g: g * ctx.out,)
LOG.array_vjp = (lambda ctx, g: g / ctx.inputs[0],)
SQRT.array_vjp = (lambda ctx, g: g / (ctx.out * 2),)
TANH.array_vjp = (lambda ctx, g: g * (1 - ctx.out * ctx.out),)
SIGMOID.array_vjp = (lambda ctx, g: g * (ctx.out * (1 - ctx.out)),)
RELU.array_vjp = (lambda ctx, g: _relu_grad_impl(np, g, ctx.out),)
RECIPROCAL.array_vjp = (lambda ctx, g: -g * (ctx.out * ctx.out),)
ADD.array_vjp = (lambda ctx, g: g, lambda ctx, g: g)
SUB.array_vjp = (lambda ctx, g: g, lambda ctx, g: -g)
MUL.array_vjp = (lambda ctx, g: g * ctx.inputs[1], lambda ctx, g: g * ctx.inputs[0])
DIV.array_vjp = (lambda ctx, g: g / ctx.inputs[1], lambda ctx, g: -g * (ctx.inputs[0] / ctx.inputs[1] / ctx.inputs[1]))
POW.array_vjp = (_pow_base_array_grad, _not_arrayable)
CLAMP.array_vjp = _clamp_array_vjp

# ---- public functions (PyTorch names) ---------------------------------------------------------
def _t(x: Any) -> Any:
    return x if isinstance(x, dispatch.Tensor) else _as_tensor(x)


def _as_tensor(x: Any) -> Any:
    from ember.creation import tensor

    return tensor(x)


def neg(input: Any) -> Any:
    return dispatch.unary(NEG, input)


def exp(input: Any) -> Any:
    return dispatch.unary(EXP, input)


def log(input: Any) -> Any:
    return dispatch.unary(LOG, input)


def log1p(input: Any) -> Any:
    return dispatch.unary(LOG1P, input)


def sqrt(input: Any) -> Any:
    return dispatch.unary(SQRT, input)


def rsqrt(input: Any) -> Any:
    return dispatch.unary(RSQRT, input)


def sin(input: Any) -> Any:
    return dispatch.unary(SIN, input)


def cos(input: Any) -> Any:
    return dispatch.unary(COS, input)


def tanh(input: Any) -> Any:
    return dispatch.unary(TANH, input)


def sigmoid(input: Any) -> Any:
    return dispatch.unary(SIGMOID, input)


def relu(input: Any) -> Any:
    return dispatch.unary(RELU, input)


def abs(input: Any) -> Any:  # noqa: A001
    return dispatch.unary(ABS, input)


def sign(input: Any) -> Any:
    return dispatch.unary(SIGN, input)


def floor(input: Any) -> Any:
    return dispatch.unary(FLOOR, input)


def ceil(input: Any) -> Any:
    return dispatch.unary(CEIL, input)


def round(input: Any, *, decimals: int = 0) -> Any:  # noqa: A001
    if input.dtype is dtypes.bool_:  # NumPy rounds bools to float16 (a graph's shape rule said bool); torch refuses
        raise RuntimeError('round: "round" is not implemented for Bool tensors (as in PyTorch); convert first: '
                           'x.float().round()')
    return dispatch.unary(ROUND, input, {"decimals": decimals} if decimals else None)


def reciprocal(input: Any) -> Any:
    return dispatch.unary(RECIPROCAL, input)


def erf(input: Any) -> Any:
    return dispatch.unary(ERF, input)


def logical_not(input: Any) -> Any:
    return dispatch.unary(LOGICAL_NOT, input)


def isnan(input: Any) -> Any:
    return dispatch.unary(ISNAN, input)


def isinf(input: Any) -> Any:
    return dispatch.unary(ISINF, input)


def isfinite(input: Any) -> Any:
    return logical_not(logical_or(isnan(input), isinf(input)))


def scaled(input: Any, other: Any, alpha: Any) -> Any:
    """``alpha * other`` for add/sub: PyTorch casts alpha to the common dtype of input and other, so a bool
    alpha scaling stays bool and a NumPy scalar is read as PyTorch reads it (np.uint8(200) * -1 is -200)."""
    if alpha == 1 and type(alpha) is not bool:  # alpha=True is checked (a bool alpha needs a bool result)
        return other
    other = dtypes.python_scalar(other)
    common = dtypes.result_type(input if isinstance(input, dispatch.Tensor) else dtypes.python_scalar(input), other)
    alpha = scalar_factor(alpha, common, "alpha", "add")
    if common is dtypes.bool_:
        return other * bool(alpha)
    if isinstance(other, dispatch.Tensor) and other.dtype is not common:
        other = dispatch.cast(other, common)  # int32 * -1 would overflow where int64/float64 does not
    return other * alpha


def scalar_factor(value: Any, common: Any, name: str, op: str) -> Any:
    """A scalar factor (add/sub's ``alpha``, addcmul/addcdiv's ``value``) checked and converted as PyTorch does
    for a result of dtype ``common``: a bool only for bool results, a float alpha not for integer results (a
    float ``value`` is truncated), a complex one only for complex results, and no overflow (alpha=300 for int8).

    Example:
        >>> scalar_factor(2.5, ember.int64, "value", "addcmul")
        2
    """
    value = dtypes.python_scalar(value)
    if isinstance(value, dispatch.Tensor):
        value = value.item()
    if type(value) is bool and common is not dtypes.bool_ and name == "alpha":
        raise RuntimeError(f"{op}: Boolean alpha only supported for Boolean results (the result is {common}); "
                           f"pass alpha={int(value)}")
    if isinstance(value, float) and common.category <= 1:
        if name == "alpha":
            raise RuntimeError(f"{op}: For integral input tensors, argument alpha must not be a floating point "
                               f"number (alpha={value!r}, result {common}); pass an int or use float tensors")
        if value != value or value in (float("inf"), float("-inf")):
            raise RuntimeError(f"{op}: value {value!r} cannot be converted to type {common} without overflow")
        value = int(value)
    if isinstance(value, complex) and common.category < 3:
        if name == "alpha":
            raise RuntimeError(f"{op}: For non-complex input tensors, argument alpha must not be a complex number "
                               f"(alpha={value!r}, result {common})")
        raise RuntimeError(f"{op}: value {value!r} cannot be converted to type {common} without overflow")
    return dtypes.checked_scalar(value, common, op) if common is not dtypes.bool_ else value


def add(input: Any, other: Any, *, alpha: Any = 1) -> Any:
    if alpha != 1 and type(alpha) in (int, float):
        fused = _fused_alpha(input, other, alpha, "add")
        if fused is not None:
            return fused
    return dispatch.binary(ADD, input, other if alpha == 1 and type(alpha) is not bool else scaled(input, other, alpha))


def _fused_alpha(input: Any, other: Any, alpha: Any, op: str) -> Any:
    """``input + alpha * other`` of two floating tensors of one dtype, rounded once as PyTorch's CPU kernel
    (a fused multiply-add: ember/ops/fma.py); None where that kernel does not apply."""
    if not (isinstance(input, dispatch.Tensor) and isinstance(other, dispatch.Tensor)
            and fma.fusable_floats(input, other)):
        return None
    alpha = scalar_factor(alpha, input.dtype, "alpha", op)  # the same checks (a float alpha overflowing float16)
    out = fma.fma(float(alpha if op == "add" else -alpha), other, input)
    if out.grad_fn is not None:  # torch's one node: AddBackward0 / SubBackward0 of (input, other)
        record_inputs(torch_named(out, "AddBackward0" if op == "add" else "SubBackward0"), (input, other))
    return out


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Any:
    if alpha != 1 and any(type(v) is bool or (isinstance(v, dispatch.Tensor) and v._data.dtype.kind == "b")
                          for v in (input, other)):
        raise dispatch._bool_sub_error()  # before scaling: True * -1 is no longer a bool
    if alpha != 1 and type(alpha) in (int, float):
        fused = _fused_alpha(input, other, alpha, "sub")
        if fused is not None:
            return fused
    return dispatch.binary(SUB, input, other if alpha == 1 and type(alpha) is not bool else scaled(input, other, alpha))


def mul(input: Any, other: Any) -> Any:
    return dispatch.binary(MUL, input, other)


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return dispatch.binary(DIV, input, other)
    if rounding_mode == "floor":
        return dispatch.binary(FLOOR_DIVIDE, input, other)
    if rounding_mode == "trunc":
        common = dtypes.result_type(*(v if isinstance(v, dispatch.Tensor) else dtypes.python_scalar(v)
                                      for v in (input, other)))
        if common.category < 2:  # integers: exact, in the promoted integer dtype (floor, then toward zero)
            q = dispatch.binary(FLOOR_DIVIDE, input, other)  # raises on a zero divisor, as PyTorch
            r = dispatch.binary(REMAINDER, input, other)
            inexact = logical_and(r != 0, q < 0)  # a negative quotient with a fraction: trunc = floor + 1
            return q + inexact.to(q.dtype)
        with grad_mode.no_grad():
            q = dispatch.binary(DIV, input, other)
            q = where(q < 0, ceil(q), floor(q))
        for v in (input, other):  # torch's zero gradient (+0: not g * 0 through div)
            if isinstance(v, dispatch.Tensor) and v.requires_grad and grad_mode.is_grad_enabled():
                # joined through a cast to q's dtype: a join with a half operand rounds its value to half (a 0-d
                # float16 divisor made a float64 quotient float16), and the cast brings the gradient to v's dtype
                q = dispatch.apply(ZERO_GRAD_JOIN, (q, v if v.dtype is q.dtype else dispatch.cast(v, q.dtype)))
        return q
    raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


true_divide = divide = div
multiply = mul
subtract = sub


def pow(input: Any, exponent: Any) -> Any:  # noqa: A001
    return dispatch.binary(POW, input, exponent)


def maximum(input: Any, other: Any) -> Any:
    return dispatch.binary(MAXIMUM, input, other)


def minimum(input: Any, other: Any) -> Any:
    return dispatch.binary(MINIMUM, input, other)


def floor_divide(input: Any, other: Any) -> Any:
    return dispatch.binary(FLOOR_DIVIDE, input, other)


def remainder(input: Any, other: Any) -> Any:
    return dispatch.binary(REMAINDER, input, other)


def fmod(input: Any, other: Any) -> Any:
    return dispatch.binary(FMOD, input, other)


def eq(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["eq"], input, other)


def ne(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["ne"], input, other)


def lt(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["lt"], input, other)


def le(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["le"], input, other)


def gt(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["gt"], input, other)


def ge(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["ge"], input, other)


greater, greater_equal, less, less_equal, not_equal, equal_elementwise = gt, ge, lt, le, ne, eq


def logical_and(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["logical_and"], input, other)


def logical_or(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["logical_or"], input, other)


def logical_xor(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["logical_xor"], input, other)


def bitwise_and(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["bitwise_and"], input, other)


def bitwise_or(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["bitwise_or"], input, other)


def bitwise_xor(input: Any, other: Any) -> Any:
    return dispatch.binary(OPS["bitwise_xor"], input, other)


def bitwise_not(input: Any) -> Any:
    return dispatch.unary(BITWISE_NOT, input)


def where(condition: Any, input: Any = None, other: Any = None) -> Any:
    """``where(cond, x, y)``: x where cond holds, else y. Scalars take the tensor's dtype."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    value_check.require_number(input, "where", "input")
    value_check.require_number(other, "where", "other")
    cond = _t(condition)
    if cond.dtype is not dtypes.bool_:
        if cond.dtype is not dtypes.uint8:
            raise RuntimeError(f"where: expected condition to be a boolean tensor, but got a tensor with dtype "
                               f"{cond.dtype}; pass a comparison (x > 0) or condition.bool()")
        import warnings

        warnings.warn("where received a uint8 condition tensor; this is deprecated (as in PyTorch): use a boolean "
                      "condition instead", UserWarning, stacklevel=2)
        cond = dispatch.cast(cond, dtypes.bool_)
    x_is_t = isinstance(input, dispatch.Tensor)
    y_is_t = isinstance(other, dispatch.Tensor)
    if x_is_t and y_is_t and input.dtype is not other.dtype:
        target = dtypes.result_type(input, other)
        input, other = dispatch.cast(input, target), dispatch.cast(other, target)
    elif x_is_t != y_is_t:
        tensor, scalar = (input, other) if x_is_t else (other, input)
        scalar = dtypes.python_scalar(scalar)
        target = dtypes.result_type(tensor, scalar)
        if target.category == 1 and type(scalar) is int:  # PyTorch's checked conversion (-3 into uint8 is 253)
            scalar = dtypes.checked_scalar(scalar, target, "where")
        if target is not tensor.dtype:
            tensor = dispatch.cast(tensor, target)
        input, other = (tensor, scalar) if x_is_t else (scalar, tensor)
    elif not x_is_t and not y_is_t:  # two numbers: their dtype by PyTorch's defaults (2 and 2.5 give float32)
        a, b = dtypes.python_scalar(input), dtypes.python_scalar(other)
        target = dtypes.result_type(a, b)
        input = _as_tensor(a).to(device=cond.device, dtype=target)
        other = _as_tensor(b).to(device=cond.device, dtype=target)
    out = dispatch.apply(WHERE, (cond, input, other))
    if type(cond._data) is np.ndarray and not cond._data.flags.c_contiguous:  # torch's layout (ember/ops/layout.py)
        operands = [v._data if isinstance(v, dispatch.Tensor) else v for v in (cond, input, other)]
        out._data = layout.elementwise_result(cond._device.xp, out._data, operands)
    return out


def clamp(input: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    lo, hi = min.__class__, max.__class__
    if input._data.dtype.kind == "c":  # (NumPy orders complex numbers lexicographically: a silent value)
        raise NotImplementedError("clamp is not supported for complex types (clamp the real and imaginary parts "
                                  "separately)")
    if (lo is float or lo is int or min is None) and (hi is float or hi is int or max is None) and \
            (min is not None or max is not None) and input._data.dtype.kind == "f":
        # a float tensor with Python number bounds (x.clamp(min=0)): the result keeps the tensor's dtype, nothing
        # to promote or range-check (float16 included; bfloat16's kind is "V" and takes the path below)
        return dispatch.unary(CLAMP, input, {"min": min} if max is None else (
            {"max": max} if min is None else {"min": min, "max": max}))
    if min is None and max is None:
        raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
    if isinstance(min, dispatch.Tensor) or isinstance(max, dispatch.Tensor):
        # where(), not maximum/minimum: at x == bound the whole gradient goes to x (PyTorch's clamp), where
        # maximum would split it; a NaN bound makes the result NaN, as in PyTorch. The operands promote first (a uint8
        # x with a float tensor bound clamps in float32, so an int bound of -1 is -1, not 255).
        target = dtypes.result_type(input, *(b for b in (min, max) if b is not None))
        out = input if target is input.dtype else dispatch.cast(input, target)
        # NaN on either side: the value is NaN and neither gets a gradient (torch's clamp_backward masks x by
        # x >= min & x <= max and min by x < min; both are false at a NaN), hence the detached NaN branch, taken
        # only when a gradient is recorded (the values are the same either way)
        graded = grad_mode.is_grad_enabled() and any(
            isinstance(t, dispatch.Tensor) and t.requires_grad for t in (input, min, max))
        if min is not None:
            if not isinstance(min, dispatch.Tensor):
                out = clamp(out, min, None)
            elif graded:
                out = where(out < min, min, where(out >= min, out, (out + min).detach()))
            else:
                out = where(isnan(min), min, where(out < min, min, out))
        if max is not None:
            if not isinstance(max, dispatch.Tensor):
                out = clamp(out, None, max)
            elif graded:
                out = where(out > max, max, where(out <= max, out, (out + max).detach()))
            else:
                out = where(isnan(max), max, where(out > max, max, out))
        return out
    min, max = dtypes.python_scalar(min), dtypes.python_scalar(max)  # noqa: A001
    if isinstance(min, complex) or isinstance(max, complex):
        raise RuntimeError("clamp: not implemented for complex bounds (as in PyTorch); complex numbers have no order")
    target = dtypes.result_type(input, *(b for b in (min, max) if b is not None))
    if target is dtypes.bool_:
        raise RuntimeError("clamp: not implemented for bool tensors with bool bounds (as in PyTorch); clamp x.int()")
    if target is not input.dtype:  # PyTorch's promotion: an int bound lifts bool to int64, a float one ints to float
        input = dispatch.cast(input, target)
    if target.category == 1:  # an int bound is converted with PyTorch's overflow check (-2 into uint8 is 254)
        min = dtypes.checked_scalar(min, target, "clamp") if type(min) is int else min  # noqa: A001
        max = dtypes.checked_scalar(max, target, "clamp") if type(max) is int else max  # noqa: A001
    attrs = {}
    if min is not None:
        attrs["min"] = min
    if max is not None:
        attrs["max"] = max
    return dispatch.unary(CLAMP, input, attrs)


clip = clamp


def to_dtype(input: Any, dtype: Any) -> Any:
    target = dtypes.to_dtype(dtype)
    if input.dtype is target:
        return input
    return dispatch.cast(input, target)


# Last: ember/ops/fma.py builds on this module's shape rule and sum_to (add/sub with alpha call it at run time).
from ember.ops import fma  # noqa: E402
