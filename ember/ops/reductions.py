"""Reductions: sum, mean, prod, amax/amin, max/min with indices, argmax/argmin, cumsum, all/any,
plus ``sum_to`` (the adjoint of broadcasting). std/norm are composites over these; var and logsumexp are
records of their own.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np  # np.errstate (the float32 pass may overflow before its float64 redo); the CPU fast path; np.integer

from ember import _numpy_names, dtypes, return_types
from ember.ops import dispatch, elementwise, grad_join
from ember.autograd.node import NotArrayable, named_backward, torch_named
from ember.autograd.torch_edges import record_inputs
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops.array_views import broadcast_view
from ember.ops import batching, cnn_halves, layout
from ember.onnx import emitters as to_onnx
from ember.ops.simplify import same_value


def normalize_dims(dim: Any, ndim: int, op: str) -> tuple | None:
    """``None`` -> all dims; an int or a sequence -> a sorted tuple of non-negative dims."""
    if dim is None:
        return None
    if dim.__class__ is int:  # the common call, one plain int in range: no tuple/set/sort
        size = ndim if ndim > 1 else 1
        if -size <= dim < size:
            return (dim % size if ndim else 0,)
    # NumPy integers count as ints (PyTorch takes anything with __index__): x.sum(np.int64(0))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    if len(dims) == 0:
        return None
    result = []
    for d in dims:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
            raise TypeError(f"{op}: dim must be an int or a tuple of ints, got {d!r}")
        d = int(d)
        size = ndim if ndim > 1 else 1
        if d < -size or d >= size:
            raise IndexError(
                f"{op}: Dimension out of range (expected to be in range of [{-size}, {size - 1}], but got {d})"
            )
        result.append(d % size if ndim else 0)
    return tuple(sorted(set(result)))


def _axis(dims: tuple | None) -> Any:
    return dims if dims is None else (dims if len(dims) != 1 else dims[0])


def reduce_rule(out_dtype: str = "same"):
    def rule(x: Spec, dims: tuple | None = None, keepdim: bool = False, **attrs: Any) -> Spec:
        shape = _reduced_shape(x.shape, dims, keepdim)
        dt = x.dtype
        if out_dtype == "sum" and x.dtype.category < 2:
            dt = dtypes.int64
        elif out_dtype == "bool":
            dt = dtypes.bool_
        elif out_dtype == "int64":
            dt = dtypes.int64
        return Spec(shape, dt, x.device)

    return rule


def _reduced_shape(shape: tuple, dims: tuple | None, keepdim: bool) -> tuple:
    if dims is None:
        return tuple(1 for _ in shape) if keepdim else ()
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def expand_reduced(g: Any, in_shape: tuple, dims: tuple | None, keepdim: bool) -> Any:
    """Broadcast a reduced gradient back over the reduced dims (the adjoint of a sum)."""
    if not keepdim:
        g = g.reshape(_reduced_shape(in_shape, dims, True))
    return g.expand(in_shape)


# ---- sum / mean / prod -------------------------------------------------------------------------
def _sum_impl(xp: Any, x: Any, dims: tuple | None = None, keepdim: bool = False) -> Any:
    if x.dtype.kind in "biu":
        return xp.sum(x, axis=_axis(dims), keepdims=keepdim, dtype=xp.int64)
    if x.dtype.itemsize == 2:  # float16/bfloat16: accumulate in float32 and round once, as PyTorch does
        return xp.asarray(xp.sum(x, axis=_axis(dims), keepdims=keepdim, dtype=xp.float32)).astype(x.dtype)
    if xp is np and x.__class__ is np.ndarray:  # np.sum's own call: without its Python wrapper (~1 us a call)
        return _ADD_REDUCE(x, axis=_axis(dims), keepdims=keepdim)
    return xp.sum(x, axis=_axis(dims), keepdims=keepdim)


_ADD_REDUCE = np.add.reduce


SUM = register(OpDef(
    name="sum", batch="dims", category="reduction", impl=_sum_impl, save="none", shape_rule=reduce_rule("sum"),
    vjp=lambda ctx, g: (expand_reduced(g, ctx.input_meta[0], ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)),),
    onnx=to_onnx.reduction("ReduceSum"),
))


def _mean_vjp(ctx: Any, g: Any) -> tuple:
    shape = ctx.input_meta[0]
    dims = ctx.attrs.get("dims")
    count = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            count *= s
    return (expand_reduced(g / (count if count > 1 else 1), shape, dims, ctx.attrs.get("keepdim", False)),)


MEAN = register(OpDef(
    name="mean", batch="dims", category="reduction", save="none", shape_rule=reduce_rule(), vjp=_mean_vjp,
    impl=lambda xp, x, dims=None, keepdim=False: xp.mean(x, axis=_axis(dims), keepdims=keepdim) if x.dtype.itemsize != 2 or x.dtype.kind == "i"
    else xp.asarray(xp.mean(x, axis=_axis(dims), keepdims=keepdim, dtype=xp.float32)).astype(x.dtype),  # as sum
    onnx=to_onnx.reduction("ReduceMean"),
))



def _expand_reduced_array(g: Any, in_shape: tuple, dims: tuple | None, keepdim: bool) -> Any:
    """``expand_reduced`` on a NumPy array (the array gradient rules of sum and mean)."""
    if not keepdim and g.ndim:  # (a 0-d gradient, of a full reduction, broadcasts as it is: the same view)
        shape = _reduced_shape(in_shape, dims, True)
        if g.shape != shape:
            g = g.reshape(shape)
    in_shape = tuple(in_shape)
    return g if g.shape == in_shape else broadcast_view(g, in_shape)


def _mean_array_vjp(ctx: Any, g: Any) -> Any:
    shape = ctx.input_meta[0]
    dims = ctx.attrs.get("dims")
    count = 1
    for i, s in enumerate(shape):
        if dims is None or i in dims:
            count *= s
    return _expand_reduced_array(g / (count if count > 1 else 1), shape, dims, ctx.attrs.get("keepdim", False))


SUM.array_vjp = (lambda ctx, g: _expand_reduced_array(g, ctx.input_meta[0], ctx.attrs.get("dims"),
                                                      ctx.attrs.get("keepdim", False)),)
MEAN.array_vjp = (_mean_array_vjp,)


def _batch_reduction_vjp(mean: bool) -> Any:
    """sum's/mean's batched array rule (OpDef.batch_array_vjp): the reduced dims shifted past vmap's batch."""
    def rule(ctx: Any, g: Any, gdim: int | None) -> list:
        shape = tuple(ctx.input_meta[0])
        dims = ctx.attrs.get("dims")
        if gdim is None or (not shape and dims):  # an unbatched cotangent, a dim of a 0-d sample: the op rules
            raise NotArrayable
        dims = tuple(range(len(shape))) if dims is None else tuple(d % len(shape) for d in (
            (dims,) if isinstance(dims, int) else dims))
        if mean:
            count = math.prod(shape[d] for d in dims)
            g = g / (count if count > 1 else 1)
        return [(_expand_reduced_array(g, (ctx.size,) + shape, tuple(d + 1 for d in dims),
                                       ctx.attrs.get("keepdim", False)), 0)]
    return rule


SUM.batch_array_vjp = _batch_reduction_vjp(mean=False)
MEAN.batch_array_vjp = _batch_reduction_vjp(mean=True)

def _prod_vjp(ctx: Any, g: Any) -> tuple:
    """d prod / d x_i = the product of the other elements, computed without dividing by 0 or inf.

    The ordinary elements (neither 0 nor +-inf) give ``P / x_i`` with P their product; the special ones
    among the *others* multiply in afterwards: no zero -> 1, one zero -> that zero's value (0, but it
    carries the second derivative), more -> 0; no infinity -> 1, else +-inf with the sign of their
    product. So ``[inf, 1, 2, 3]`` gets ``[6, inf, inf, inf]`` and ``[0, 0, 2]`` gets zeros, the product
    of the others as PyTorch computes it whenever the tensor holds a zero (without one, torch divides
    ``result / x`` and gives inf / inf = NaN at an infinite element: docs/special-points.md).
    """
    (x,) = ctx.inputs
    dims, keepdim = ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)
    shape = ctx.input_meta[0]

    def over_slice(op: OpDef, t: Any) -> Any:  # reduce over the slice, broadcast back to the input's shape
        return expand_reduced(_reduce(op, t, dims, True), shape, dims, True)

    zero, inf = x == 0, isinf(x)
    safe = where(zero | inf, 1.0, x)
    others = over_slice(PROD, safe) / safe
    zeros_here = where(zero, x, 0.0)
    zeros_elsewhere = over_slice(SUM, zero) - zero.to(dtypes.int64)
    zero_factor = where(zeros_elsewhere == 0, 1.0,
                        where(zeros_elsewhere == 1, over_slice(SUM, zeros_here) - zeros_here, 0.0))
    inf_sign = where(inf, sign(x) if not x.dtype.is_complex else x / absolute(x), 1.0)
    infs_elsewhere = over_slice(SUM, inf) - inf.to(dtypes.int64)
    inf_factor = where(infs_elsewhere == 0, 1.0, over_slice(PROD, inf_sign) * inf_sign * float("inf"))
    return (expand_reduced(g, shape, dims, keepdim) * elementwise.conj_if_complex(others * zero_factor * inf_factor),)


_HALF_PROD_LANES = 16  # PyTorch's CPU reduce loop for float16/bfloat16: 4 accumulators of 16 lanes


def _half_prod(xp: Any, x: Any, dims: tuple | None, keepdim: bool) -> Any:
    """float16/bfloat16 ``prod`` as PyTorch's CPU kernel computes it: in the half dtype itself, every product
    rounded (so ``prod([300, 300, 0.001])`` is inf in float16, as in torch, not 90). Along a contiguous last
    dim (and over everything) torch's vectorized loop keeps 4 x 16 partial products for each block of 64,
    combines them ``(a0 a1)(a2 a3)``, folds the 16 lanes in order, then multiplies in the tail one by one;
    along another dim each output multiplies sequentially. Bit for bit torch's on rows of 16 to 16,000."""
    low = x.dtype
    nd = x.ndim
    axes = tuple(range(nd)) if dims is None else tuple(d % nd for d in dims)
    contiguous = dims is None or axes == tuple(range(nd - len(axes), nd))
    kept = [d for d in range(nd) if d not in axes]
    moved = xp.transpose(x, kept + list(axes)).astype(xp.float32)
    rows_shape = tuple(x.shape[d] for d in kept)
    n = 1
    for d in axes:
        n *= x.shape[d]
    flat = moved.reshape((-1, n))

    def rnd(a: Any) -> Any:
        return a.astype(low).astype(xp.float32)

    out = xp.ones(flat.shape[0], dtype=xp.float32)
    start = 0
    lanes = _HALF_PROD_LANES
    count = n // (4 * lanes) if contiguous else 0
    if count:
        acc = [flat[:, j * lanes:(j + 1) * lanes] for j in range(4)]
        for i in range(1, count):
            base = i * 4 * lanes
            acc = [rnd(acc[j] * flat[:, base + j * lanes: base + (j + 1) * lanes]) for j in range(4)]
        folded = rnd(rnd(acc[0] * acc[1]) * rnd(acc[2] * acc[3]))
        total = folded[:, 0]
        for j in range(1, lanes):
            total = rnd(total * folded[:, j])
        out = rnd(out * total)
        start = count * 4 * lanes
    for j in range(start, n):
        out = rnd(out * flat[:, j])
    out = out.reshape(rows_shape).astype(low)
    if keepdim:
        out = out.reshape(tuple(1 if d in axes else x.shape[d] for d in range(nd)))
    return out


def _prod_impl(xp: Any, x: Any, dims: tuple | None = None, keepdim: bool = False) -> Any:
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV" and x.size:  # not opmath-wrapped (OPMATH_SKIP): see above
        with np.errstate(over="ignore"):  # a product beyond the half range is inf, silently (as torch)
            return _half_prod(xp, x, dims, keepdim)
    return xp.prod(x, axis=_axis(dims), keepdims=keepdim, dtype=xp.int64 if x.dtype.kind in "biu" else None)


PROD = register(OpDef(
    name="prod", batch="dims", category="reduction", save="inputs", autocast="fp32", shape_rule=reduce_rule("sum"), vjp=_prod_vjp,
    impl=_prod_impl,
    onnx=to_onnx.reduction("ReduceProd"),
))


_EINSUM_RUN = 4096  # longest contiguous run einsum sums per output (its accumulation is not pairwise)


def _outer_inner_sum(xp: Any, x: Any, axes: tuple) -> Any:
    """``x.sum(axes)`` as one ``einsum`` when ``axes`` are the leading and the trailing axes around one
    kept block (a conv bias's gradient: (N, C, H, W) -> C), else None.

    NumPy sums over several non-contiguous axes at ~7 G elements/s; ``einsum('nck->c')`` adds each
    contiguous run with vector accumulators, 3x faster (MNIST conv1's bias: 0.22 -> 0.07 ms). Its runs
    are not summed pairwise, so only runs of up to ``_EINSUM_RUN`` elements take it: there the error
    matches NumPy's sum and torch's (measured: <= 5e-7 relative to the sum of magnitudes in float32);
    a 1M-element run would lose ~3e-6.
    """
    if xp is not np or x.dtype.kind != "f" or x.dtype.itemsize < 4 or not x.flags.c_contiguous:
        return None
    kept = [i for i in range(x.ndim) if i not in axes]
    if not kept or kept != list(range(kept[0], kept[-1] + 1)) or kept[-1] == x.ndim - 1:
        return None
    outer = math.prod(x.shape[:kept[0]])
    middle = math.prod(x.shape[kept[0]:kept[-1] + 1])
    inner = math.prod(x.shape[kept[-1] + 1:])
    if inner > _EINSUM_RUN or inner < 2:
        return None
    if x.size >= cnn_halves.HOT_MIN_ELEMENTS:  # channels in halves on the hot worker, run sums added in float64
        fast = cnn_halves.channel_sums(xp, x.reshape(outer, middle, inner))  # (mnist22: MNIST conv1 0.26 -> 0.1 ms)
        if fast is not None:
            return fast
    return xp.einsum("nck->c", x.reshape(outer, middle, inner))


def _sum_to_impl(xp: Any, x: Any, shape: tuple) -> Any:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    if axes and x.dtype.itemsize == 2 and x.dtype.kind != "i":  # float16/bfloat16: float32 accumulation, as sum
        return x.sum(axis=axes, keepdims=True, dtype=xp.float32).astype(x.dtype).reshape(shape)
    fast = _outer_inner_sum(xp, x, axes) if axes else None
    if fast is not None:
        return fast.reshape(shape)
    out = x.sum(axis=axes, keepdims=True) if axes else x
    return out.reshape(shape)


SUM_TO = register(OpDef(
    name="sum_to", batch=batching.sum_to, category="reduction", impl=_sum_to_impl, save="none",
    shape_rule=lambda x, shape: Spec(tuple(shape), x.dtype, x.device),
    vjp=lambda ctx, g: (g.expand(ctx.input_meta[0]),), onnx=to_onnx.sum_to, simplify=same_value,
))


# ---- max / min -------------------------------------------------------------------------------
def _amax_vjp(ctx: Any, g: Any) -> tuple:
    (x,) = ctx.inputs
    dims, keepdim = ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)
    shape = ctx.input_meta[0]
    hit = (x == expand_reduced(ctx.out, shape, dims, keepdim)).to(x.dtype)
    count = hit.sum(dim=dims, keepdim=True) if dims is not None else hit.sum().reshape((1,) * len(shape))
    return (hit * expand_reduced(g, shape, dims, keepdim) / count,)


def _check_nonempty(xp: Any, x: Any, dims: Any, op: str, error: type = RuntimeError) -> None:
    if x.size == 0 and (dims is None or 0 in [x.shape[d] for d in dims]):
        raise error(f"{op}: cannot reduce over an empty dimension of a tensor of shape {tuple(x.shape)}; "
                           "the result has no identity. Give a dim with nonzero size.")


def _amax_impl(xp: Any, x: Any, dims: tuple | None = None, keepdim: bool = False) -> Any:
    elementwise._no_complex("amax", x)
    _check_nonempty(xp, x, dims, "amax")
    return xp.amax(x, axis=_axis(dims), keepdims=keepdim)


def _amin_impl(xp: Any, x: Any, dims: tuple | None = None, keepdim: bool = False) -> Any:
    elementwise._no_complex("amin", x)
    _check_nonempty(xp, x, dims, "amin")
    return xp.amin(x, axis=_axis(dims), keepdims=keepdim)


AMAX = register(OpDef(name="amax", batch="dims", category="reduction", impl=_amax_impl, save="both",
                      shape_rule=reduce_rule(), vjp=_amax_vjp, onnx=to_onnx.reduction("ReduceMax")))
AMIN = register(OpDef(name="amin", batch="dims", category="reduction", impl=_amin_impl, save="both",
                      shape_rule=reduce_rule(), vjp=_amax_vjp, onnx=to_onnx.reduction("ReduceMin")))


def _arg_impl(fn: str):
    def impl(xp: Any, x: Any, dim: int | None = None, keepdim: bool = False) -> Any:
        elementwise._no_complex(fn, x)
        _check_nonempty(xp, x, None if dim is None else (dim,), fn, IndexError)  # PyTorch's class here
        if dim is None:
            out = getattr(xp, fn)(x.reshape(-1))
            return out.reshape((1,) * x.ndim) if keepdim else out
        return getattr(xp, fn)(x, axis=dim, keepdims=True) if keepdim else getattr(xp, fn)(x, axis=dim)

    return impl


def _arg_rule(x: Spec, dim: int | None = None, keepdim: bool = False) -> Spec:
    return Spec(_reduced_shape(x.shape, None if dim is None else (dim,), keepdim), dtypes.int64, x.device)


ARGMAX = register(OpDef(name="argmax", batch="dim", category="reduction", impl=_arg_impl("argmax"), shape_rule=_arg_rule,
                        onnx=to_onnx.arg_reduce("ArgMax")))
ARGMIN = register(OpDef(name="argmin", batch="dim", category="reduction", impl=_arg_impl("argmin"), shape_rule=_arg_rule,
                        onnx=to_onnx.arg_reduce("ArgMin")))


def take_along(xp: Any, x: Any, idx: Any, dim: int) -> Any:
    """``xp.take_along_axis(x, idx, axis=dim)`` as one fancy index (``idx`` has ``x``'s rank; other dims broadcast):
    the same grid NumPy's wrapper builds, without its Python checks (~10 us of a 5x5 ``max(dim)``)."""
    nd = x.ndim
    index = []
    for d in range(nd):
        if d == dim:
            index.append(idx)
        else:
            index.append(xp.arange(x.shape[d]).reshape((1,) * d + (-1,) + (1,) * (nd - d - 1)))
    return x[tuple(index)]


def _max_dim_impl(fn: str):
    arg = _arg_impl("argmax" if fn == "max" else "argmin")

    def impl(xp: Any, x: Any, dim: int, keepdim: bool = False) -> tuple:
        idx = arg(xp, x, dim, True)
        values = take_along(xp, x, idx, dim)
        if not keepdim:
            values, idx = xp.squeeze(values, dim), xp.squeeze(idx, dim)
        return values, idx

    return impl


def _max_dim_vjp(ctx: Any, g: Any) -> tuple:
    g_values = g[0]
    _, idx = ctx.out
    dim, keepdim = ctx.attrs["dim"], ctx.attrs.get("keepdim", False)
    if not keepdim:
        g_values, idx = g_values.unsqueeze(dim), idx.unsqueeze(dim)
    from ember.creation import zeros

    base = zeros(ctx.input_meta[0], dtype=g_values.dtype, device=g_values.device)
    return (base.scatter_add(dim, idx, g_values),)


def _max_dim_rule(x: Spec, dim: int, keepdim: bool = False) -> tuple:
    shape = _reduced_shape(x.shape, (dim,), keepdim)
    return Spec(shape, x.dtype, x.device), Spec(shape, dtypes.int64, x.device)


MAX_DIM = register(OpDef(name="max_dim", batch="dim", category="reduction", impl=_max_dim_impl("max"), vjp=_max_dim_vjp,
                         save="output", saved_outputs=(1,), num_outputs=2, nondiff_outputs=(1,), shape_rule=_max_dim_rule, onnx=to_onnx.values_and_indices("ArgMax")))
MIN_DIM = register(OpDef(name="min_dim", batch="dim", category="reduction", impl=_max_dim_impl("min"), vjp=_max_dim_vjp,
                         save="output", saved_outputs=(1,), num_outputs=2, nondiff_outputs=(1,), shape_rule=_max_dim_rule, onnx=to_onnx.values_and_indices("ArgMin")))

def _bool_reduction_impl(name: str) -> Any:
    """``all``/``any``: bool results, except uint8 in, uint8 out (PyTorch keeps uint8 for these two)."""

    def impl(xp: Any, x: Any, dims: Any = None, keepdim: bool = False) -> Any:
        out = getattr(xp, name)(x, axis=_axis(dims), keepdims=keepdim)
        return out.astype(x.dtype) if x.dtype == xp.uint8 else out

    return impl


def _bool_reduction_rule(x: Spec, dims: tuple | None = None, keepdim: bool = False) -> Spec:
    spec = reduce_rule("bool")(x, dims, keepdim)
    return Spec(spec.shape, x.dtype, x.device) if x.dtype is dtypes.uint8 else spec


ALL = register(OpDef(name="all", batch="dims", category="reduction", shape_rule=_bool_reduction_rule,
                     impl=_bool_reduction_impl("all"), onnx=to_onnx.bool_reduction("ReduceMin")))
ANY = register(OpDef(name="any", batch="dims", category="reduction", shape_rule=_bool_reduction_rule,
                     impl=_bool_reduction_impl("any"), onnx=to_onnx.bool_reduction("ReduceMax")))


def _cumsum_impl(xp: Any, x: Any, dim: int) -> Any:
    if x.dtype.kind == "f" and x.dtype.itemsize < 4 or x.dtype.name == "bfloat16":
        # 16-bit floats accumulate in float32 and round each output, as PyTorch: a float16 running sum
        # stops growing once the step is below half an ulp (20,000 x 0.1 would end at 256, not 2000).
        out = (xp.cumsum(x.astype(xp.float32), axis=dim) + (0.0 if x.ndim else -0.0)).astype(x.dtype)
    elif x.dtype.kind in "fc" and x.dtype.itemsize == 4 * (1 + (x.dtype.kind == "c")):
        # float32 / complex64 accumulate in double and round each output, as PyTorch's CPU kernel (its acc_type):
        # cumsum([2**24, 1, 1]) is [2**24, 2**24, 2**24 + 2], and a 100,000-term running sum keeps its digits
        out = xp.cumsum(x.astype(_WIDER[x.dtype.kind]), axis=dim).astype(x.dtype)
        if x.ndim:
            out += 0.0  # (see below)
    else:
        out = xp.cumsum(x, axis=dim, dtype=xp.int64 if x.dtype.kind in "biu" else None)
        if out.dtype.kind in "fc" and x.ndim:
            out += 0.0  # PyTorch's running sum starts at +0: a leading -0 comes out +0 (-0 + 0 is +0)
    # NumPy makes a 0-d input 1-d; torch's scans write row-major results (NumPy keeps a permuted input's order)
    return out.reshape(x.shape) if x.ndim == 0 else xp.ascontiguousarray(out)


_WIDER = {"f": np.float64, "c": np.complex128}


CUMSUM = register(OpDef(
    name="cumsum", batch="dim", category="reduction", impl=_cumsum_impl, save="none",
    shape_rule=lambda x, dim: Spec(x.shape, dtypes.int64 if x.dtype.category < 2 else x.dtype, x.device),
    vjp=lambda ctx, g: (g if g.ndim == 0 else g.flip((ctx.attrs["dim"],)).cumsum(ctx.attrs["dim"]).flip((ctx.attrs["dim"],)),),
    onnx=to_onnx.cumsum,
))


# ---- public functions --------------------------------------------------------------------------
def _reduce(op: OpDef, input: Any, dim: Any, keepdim: bool) -> Any:
    dims = normalize_dims(dim, input.ndim, op.name)
    if input.ndim == 0:  # dim 0 / -1 of a 0-d tensor: its one element (PyTorch's reading)
        dims, keepdim = None, False
    attrs = {"dims": dims, "keepdim": keepdim} if (dims is not None or keepdim) else {}
    out = dispatch.apply(op, (input,), attrs)
    if not input._data.flags.c_contiguous and isinstance(out, dispatch.Tensor):
        layout.row_major_result(out)  # torch's reductions write row-major results (NumPy keeps the input's order)
    return out


_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def to_reduction_dtype(input: Any, dtype: Any) -> Any:
    """``input`` cast to a reduction's ``dtype=``; an integer or bool dtype for an input that requires grad is
    refused as PyTorch refuses it (its result could not carry a gradient: ``Autograd not support dtype: Long``)."""
    if dtype is None:
        return input
    target = dtypes.to_dtype(dtype)
    if target.category <= 1 and input.requires_grad and dispatch.grad_mode.STATE.enabled:
        raise RuntimeError(f"Autograd not support dtype: {_TORCH_TYPE_NAMES.get(target.name, target.name)} (a "
                           f"reduction with dtype={target} of a tensor that requires grad); reduce in a floating "
                           f"dtype, or detach() the input")
    return input.to(target)


def _in_dtype(result: Any, dtype: Any) -> Any:
    """An integer sum/prod accumulates in int64; an explicit integer or bool ``dtype=`` is the result's dtype in
    PyTorch (``x.sum(dtype=torch.int8)`` wraps), so the int64 result is cast back (the same residue mod 2**bits)."""
    if dtype is None:
        return result
    target = dtypes.to_dtype(dtype)
    return result if result.dtype is target else result.to(target)


def sum(input: Any, dim: Any = None, keepdim: bool = False,
        *, dtype: Any = None, axis: Any = None, keepdims: Any = None) -> Any:  # noqa: A001
    if dim is None and keepdim is False and dtype is None and axis is None and keepdims is None:
        return dispatch.apply(SUM, (input,), {})  # x.sum() (every loss): what _reduce makes of it, directly
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("sum", dim, keepdim, axis, keepdims, None)
    if dtype is not None:
        input = to_reduction_dtype(input, dtype)
    return _in_dtype(_reduce(SUM, input, dim, keepdim), dtype)


def mean(input: Any, dim: Any = None, keepdim: bool = False,
         *, dtype: Any = None, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("mean", dim, keepdim, axis, keepdims, None)
    if dtype is not None:
        input = input.to(dtype)
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise RuntimeError(
            f"mean(): could not infer output dtype. Input dtype must be floating point, got {input.dtype}. "
            "Convert first, e.g. x.float().mean()."
        )
    return _reduce(MEAN, input, dim, keepdim)


def prod(input: Any, dim: Any = None, keepdim: bool = False,
         *, dtype: Any = None, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("prod", dim, keepdim, axis, keepdims, None)
    if dtype is not None:
        input = to_reduction_dtype(input, dtype)
    return _in_dtype(_reduce(PROD, input, dim, keepdim), dtype)


def amax(input: Any, dim: Any = (), keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("amax", dim, keepdim, axis, keepdims, ())
    return _reduce(AMAX, input, dim, keepdim)


def amin(input: Any, dim: Any = (), keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("amin", dim, keepdim, axis, keepdims, ())
    return _reduce(AMIN, input, dim, keepdim)


def _max_min(full: OpDef, with_dim: OpDef, input: Any, dim: Any, keepdim: bool, other: Any) -> Any:
    if other is not None or isinstance(dim, dispatch.Tensor):
        other = dim if other is None else other
        return (elementwise.maximum if full is AMAX else elementwise.minimum)(input, other)
    if dim is None:
        if input.requires_grad and dispatch.grad_mode.STATE.enabled and input.dtype.is_floating_point:
            out = _evenly_distributed(full, input)
        else:
            out = _reduce(full, input, None, False)  # torch's max()/min() overloads: MaxBackward1 / MinBackward1
        return out if out.grad_fn is None else torch_named(out, "MaxBackward1" if full is AMAX else "MinBackward1")
    (d,) = normalize_dims(dim, input.ndim, with_dim.name)
    kind = return_types.max if full is AMAX else return_types.min
    if input.ndim == 0:  # a 0-d tensor is its own max, at index 0
        from_zero = dispatch.apply(ARGMAX, (input,), {"dim": None, "keepdim": False})
        return return_types.make(kind, input.clone(), from_zero)
    values, indices = dispatch.apply(with_dim, (input,), {"dim": d, "keepdim": keepdim})
    return return_types.make(kind, values, indices)


def _evenly_distributed(full: OpDef, input: Any) -> Any:
    """``input.max()`` / ``min()`` whose gradient is torch's ``evenly_distribute_backward``: ``g`` shared by the
    elements equal to the result, NaN elements matching a NaN result (``amax``'s rule gives NaN everywhere)."""
    value = _reduce(full, input.detach(), None, False)
    mask = (input.detach() == value) | (elementwise.isnan(input.detach()) & elementwise.isnan(value))
    scale = mask.to(input.dtype) / _reduce(SUM, mask.to(input.dtype), None, False)
    # masked: elements not equal to the result get exactly 0, also for a NaN or infinite upstream (torch's
    # zeros_like(input).masked_fill_(mask, g / count))
    return record_inputs(grad_join.scaled_grad_join(value, input, scale, masked=True), (input,))


def max(input: Any, dim: Any = None, keepdim: bool = False,
        *, other: Any = None, axis: Any = None, keepdims: Any = None) -> Any:  # noqa: A001
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("max", dim, keepdim, axis, keepdims, None)
    return _max_min(AMAX, MAX_DIM, input, dim, keepdim, other)


def min(input: Any, dim: Any = None, keepdim: bool = False,
        *, other: Any = None, axis: Any = None, keepdims: Any = None) -> Any:  # noqa: A001
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("min", dim, keepdim, axis, keepdims, None)
    return _max_min(AMIN, MIN_DIM, input, dim, keepdim, other)


def argmax(input: Any, dim: int | None = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("argmax", dim, keepdim, axis, keepdims, None)
    d = None if dim is None else normalize_dims(dim, input.ndim, "argmax")[0]
    if input.ndim == 0:  # keepdim of a 0-d tensor stays 0-d
        d, keepdim = None, False
    return dispatch.apply(ARGMAX, (input,), {"dim": d, "keepdim": keepdim})


def argmin(input: Any, dim: int | None = None, keepdim: bool = False, *, axis: Any = None, keepdims: Any = None) -> Any:
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("argmin", dim, keepdim, axis, keepdims, None)
    d = None if dim is None else normalize_dims(dim, input.ndim, "argmin")[0]
    if input.ndim == 0:
        d, keepdim = None, False
    return dispatch.apply(ARGMIN, (input,), {"dim": d, "keepdim": keepdim})


def all(input: Any, dim: Any = None, keepdim: bool = False,
        *, axis: Any = None, keepdims: Any = None) -> Any:  # noqa: A001
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("all", dim, keepdim, axis, keepdims, None)
    if isinstance(dim, (tuple, list)) and len(dim) == 0:  # PyTorch: all over no dims is each element's truth
        return _reduce(ALL, input.unsqueeze(-1), -1, False)
    return _reduce(ALL, input, dim, keepdim)


def any(input: Any, dim: Any = None, keepdim: bool = False,
        *, axis: Any = None, keepdims: Any = None) -> Any:  # noqa: A001
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("any", dim, keepdim, axis, keepdims, None)
    if isinstance(dim, (tuple, list)) and len(dim) == 0:  # (sum, amax, mean over () reduce every dim instead)
        return _reduce(ANY, input.unsqueeze(-1), -1, False)
    return _reduce(ANY, input, dim, keepdim)


def cumsum(input: Any, dim: int = _numpy_names.REQUIRED, *, dtype: Any = None, axis: Any = None) -> Any:
    if axis is not None or dim is _numpy_names.REQUIRED:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("cumsum", dim, axis, _numpy_names.REQUIRED)
    if dtype is not None:
        if dtypes.to_dtype(dtype) is dtypes.bool_:
            raise RuntimeError("cumsum: dtype=bool is not supported (as in PyTorch); use cumsum(dtype=torch.int64) "
                               "and compare with 0")
        input = to_reduction_dtype(input, dtype)
    (d,) = normalize_dims(dim, input.ndim, "cumsum")
    return _in_dtype(dispatch.apply(CUMSUM, (input,), {"dim": d}), dtype)


# ---- var / std: one primitive, PyTorch's accumulation ---------------------------------------------
def _var_impl(xp: Any, x: Any, dims: tuple | None = None, correction: float = 1.0, keepdim: bool = False,
              root: bool = False) -> Any:
    """Variance (``root``: its square root) with Bessel's ``correction``, as precise as PyTorch's CPU kernel,
    which accumulates float32 in float64: a float32 two-pass runs first and is redone in float64 only where it
    cannot be trusted (squares that overflow above 1.8e19, or a mean more than 64 spreads away from the data,
    where the float32 mean eats the spread: var([1e7, 1e7 + 1, 1e7 + 2, 1e7 + 3]) is 1.667, not 2.0)."""
    axis = _axis(dims)
    count = x.size if dims is None else math.prod(x.shape[d] for d in dims)
    divisor = builtin_max(count - correction, 0)
    low = x.dtype.itemsize < 8
    work = x.astype(xp.float32) if x.dtype.itemsize == 2 else x  # float16/bfloat16: float32 math, as sum
    with np.errstate(all="ignore"):
        mean = work.mean(axis=axis, keepdims=True)
        centered = work - mean
        total = (centered * centered).sum(axis=axis, keepdims=True)
        if low and bool((~xp.isfinite(total) | (mean * mean * divisor > 4096.0 * total)).any()):
            wide = x.astype(xp.float64)
            centered = wide - wide.mean(axis=axis, keepdims=True)
            total = (centered * centered).sum(axis=axis, keepdims=True)
        out = total / divisor  # divisor 0 (correction >= n): inf, or NaN for 0 / 0, as PyTorch
        if root:
            out = xp.sqrt(out)
    if not keepdim:
        out = out.reshape(_reduced_shape(x.shape, dims, False))
    return xp.asarray(out).astype(x.dtype, copy=False)


def _var_vjp(ctx: Any, g: Any) -> tuple:
    """PyTorch's closed form 2 (x - mean) / (n - correction) (std: divided by 2 std, 0 where std is 0), written
    in ember ops so that second derivatives see the mean move."""
    (x,) = ctx.inputs
    dims, keepdim = ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)
    correction, root = ctx.attrs.get("correction", 1.0), ctx.attrs.get("root", False)
    shape = ctx.input_meta[0]
    count = 1
    for i, size in enumerate(shape):
        if dims is None or i in dims:
            count *= size
    divisor = count - correction  # not clamped at 0, as torch's var_backward/std_backward (correction > n: -0, -2x)
    centered = x - _reduce(MEAN, x, dims, True)
    upstream = expand_reduced(g, shape, dims, keepdim)
    if root:
        std = expand_reduced(ctx.out, shape, dims, keepdim)
        zero = std == 0
        # scale the upstream first: centered * upstream alone can overflow next to values of 3e38
        # (no correction left, divisor 0: NaN in the upstream's dtype; a where of two numbers was float32)
        scaled = upstream / where(zero, 1.0, std) / divisor if divisor else upstream * float("nan")
        upstream = where(zero, 0.0, scaled)
        return (upstream * centered,)
    return (upstream * (2.0 / divisor if divisor else math.inf) * centered,)  # (torch: 2 / 0.0 is inf)


VAR = register(OpDef(
    name="var", batch="dims", category="nn", impl=_var_impl, vjp=_var_vjp, save="both", shape_rule=reduce_rule(),
    onnx=to_onnx.variance,
))


def _bessel(dim: Any, unbiased: Any, correction: Any, op: str) -> tuple:
    """PyTorch's three overloads of var/std(_mean) as ``(dim, correction)``: ``(dim, unbiased, keepdim)``
    positionally, ``(dim, *, correction, keepdim)``, and ``(unbiased)`` -- a bool where ``dim`` stands."""
    if isinstance(dim, (bool, np.bool_)):
        if unbiased is not None:
            raise TypeError(f"{op}() received an invalid combination of arguments: unbiased given twice "
                            f"({dim} in dim's place and unbiased={unbiased})")
        dim, unbiased = None, bool(dim)
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}() received an invalid combination of arguments: give unbiased= or correction=, "
                        "not both")
    if unbiased is not None:
        return dim, (1 if unbiased else 0)
    return dim, (1 if correction is None else correction)


def _variance(input: Any, dim: Any, correction: Any, keepdim: bool, unbiased: Any, op: str, root: bool) -> Any:
    dim, correction = _bessel(dim, unbiased, correction, op)
    if input.dtype.is_complex:  # mean |x - mean|^2 = var(real) + var(imag): real, as PyTorch's
        parts = [_variance(part, dim, correction, keepdim, None, op, False)
                 for part in (elementwise.real_part(input), elementwise.imag_part(input))]
        total = parts[0] + parts[1]
        return _sqrt_zero_grad(total) if root else total
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"std and var only support floating point dtypes, got {input.dtype}; convert first, "
                           "e.g. x.float().std()")
    dims = normalize_dims(dim, input.ndim, op)
    if input.ndim == 0:  # dim 0 / -1 of a 0-d tensor: its one element
        dims, keepdim = None, False
    out = dispatch.apply(VAR, (input,), {"dims": dims, "correction": float(correction), "keepdim": keepdim,
                                         "root": root})
    return out if input._data.flags.c_contiguous else layout.row_major_result(out)  # torch's: row-major


def var(input: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False,
        *, correction: Any = None, axis: Any = None, keepdims: Any = None) -> Any:
    """Variance with Bessel's ``correction`` (1 by default, as in PyTorch), accumulated as PyTorch's.

    Example: ``ember.tensor([1.0, 2.0, 3.0]).var()`` is ``tensor(1.)``."""
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("var", dim, keepdim, axis, keepdims, None)
    return _variance(input, dim, correction, keepdim, unbiased, "var", False)


def _sqrt_zero_grad(s: Any) -> Any:
    """sqrt(s) whose gradient is 0 where s == 0 (PyTorch's mask in the backward of norm and std), instead
    of 2x / (2 sqrt(0)) = 0 / 0 = NaN: the gradient of a norm at the zero vector is 0."""
    zero = s == 0
    return where(zero, 0.0, sqrt(where(zero, 1.0, s)))


@named_backward("StdBackward0", inputs=((0, "input"),))
def std(input: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False,
        *, correction: Any = None, axis: Any = None, keepdims: Any = None) -> Any:
    """Standard deviation: the square root of the variance, taken before rounding to the input's dtype (the
    std of 1e20-scale float32 values is finite though their variance is not); gradient 0 where it is 0."""
    if axis is not None or keepdims is not None:  # NumPy's names, as torch's argument parser
        dim, keepdim = _numpy_names.dim_keepdim("std", dim, keepdim, axis, keepdims, None)
    return _variance(input, dim, correction, keepdim, unbiased, "std", True)


def var_mean(input: Any, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
             correction: Any = None) -> tuple:
    """``(var, mean)`` over ``dim``, with PyTorch's overloads (see :func:`_bessel`)."""
    dim, correction = _bessel(dim, unbiased, correction, "var_mean")
    return var(input, dim, correction=correction, keepdim=keepdim), mean(input, dim, keepdim=keepdim)


def _logsumexp_impl(xp: Any, x: Any, dims: tuple | None = None, keepdim: bool = False) -> Any:
    """log(sum(exp(x))) over ``dims``, shifted by the maximum (0 where the maximum is infinite), the composite's
    NumPy calls in its order; float16/bfloat16 in float32, rounded once (PyTorch's)."""
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        return _logsumexp_impl(xp, x.astype(xp.float32), dims, keepdim).astype(x.dtype)
    axis = None if x.ndim == 0 else _axis(dims)
    shift = xp.amax(x, axis=axis, keepdims=True)
    shift = xp.where(xp.isinf(shift), xp.zeros((), shift.dtype), shift)
    with np.errstate(divide="ignore", invalid="ignore"):  # log(0) of a row of -inf: -inf; inf - inf: NaN (PyTorch's)
        out = xp.log(_sum_impl(xp, xp.exp(x - shift), None if axis is None else dims, True))
    out += shift
    if keepdim or x.ndim == 0:
        return out
    return out.reshape(_reduced_shape(x.shape, dims, False))


def _logsumexp_vjp(ctx: Any, g: Any) -> tuple:
    """``g`` times the softmax of x over dims: the exact derivative, which the composite this op replaced gave too.
    PyTorch's ``exp(x - out)`` is the same wherever ``out`` does not absorb ``log(n)`` (a row of two 1e30: torch
    1 and 1, ember 0.5 and 0.5; docs/special-points.md)."""
    x = ctx.inputs[0]
    shape, dims, keepdim = ctx.input_meta[0], ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)
    shift = amax(x, dims, keepdim=True).detach()
    e = exp(x - where(isinf(shift), 0.0, shift))
    return (expand_reduced(g, shape, dims, keepdim) * (e / sum(e, dims, keepdim=True)),)


def _logsumexp_array_vjp(ctx: Any, g: Any) -> Any:
    """The rule above on NumPy arrays (the same operations, so the same bits), for float32/float64."""
    x = ctx.inputs[0]
    if x.dtype.itemsize < 4 or x.dtype.kind != "f":  # half dtypes: ember's ops compute in float32 (opmath)
        raise NotArrayable
    shape, dims, keepdim = ctx.input_meta[0], ctx.attrs.get("dims"), ctx.attrs.get("keepdim", False)
    axis = None if x.ndim == 0 else _axis(dims)
    shift = np.amax(x, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):  # inf - inf, 0 / 0: NaN, as PyTorch
        e = np.exp(x - np.where(np.isinf(shift), np.zeros((), shift.dtype), shift))
        return _expand_reduced_array(g, shape, dims, keepdim) * (e / _sum_impl(np, e, None if axis is None else dims,
                                                                                True))


LOGSUMEXP = register(OpDef(
    name="logsumexp", batch="dims", category="reduction", impl=_logsumexp_impl, vjp=_logsumexp_vjp, save="both",
    shape_rule=reduce_rule(), onnx=to_onnx.reduction("ReduceLogSumExp"),
))
LOGSUMEXP.array_vjp = (_logsumexp_array_vjp,)


def logsumexp(input: Any, dim: Any = _numpy_names.REQUIRED, keepdim: bool = False,
              *, axis: Any = None, keepdims: Any = None) -> Any:
    """log(sum(exp(x))) computed stably by shifting by the maximum: one op whose backward is ``g`` times the
    softmax of x (the composite of ~10 ops it replaces cost 44 us a call on a 5x5 tensor, torch 9).

    Example: ``ember.logsumexp(ember.zeros(2, 4), 1)`` is ``tensor([1.3863, 1.3863])`` (log 4)."""
    if axis is not None or keepdims is not None or dim is _numpy_names.REQUIRED:  # NumPy's names, as torch's
        dim, keepdim = _numpy_names.dim_keepdim("logsumexp", dim, keepdim, axis, keepdims, _numpy_names.REQUIRED)
    dims = normalize_dims(dim, input.ndim, "logsumexp")
    if input.dtype.category < 2:  # integers and bools: in the default float dtype, as PyTorch
        input = dispatch.cast(input, dtypes.get_default_dtype())
    if input.numel() == 0:  # log of an empty sum: -inf (amax has no identity to shift by)
        out = sum(input, dims, keepdim=True) - float("inf")  # 0 - inf; no log(0) warning
        return out if keepdim else out.squeeze(dims if dims is not None else tuple(range(input.ndim)))
    if input.dtype.is_complex:
        raise RuntimeError(f"logsumexp: not supported for complex tensors (got {input.dtype}); take it of .real or "
                           ".abs() instead")
    out = dispatch.apply(LOGSUMEXP, (input,), {"dims": dims, "keepdim": keepdim})
    return out if input._data.flags.c_contiguous else layout.row_major_result(out)  # torch's: row-major


# torch.norm(A, 'nuc', dim): the nuclear norm of matrices, bound by ember/surface/linalg_composites.py at import
# (the singular values live above this module)
NUCLEAR_NORM: Any = None


@named_backward("LinalgVectorNormBackward0", inputs=((0, "input"),))
def norm(input: Any, p: Any = "fro", dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    """Vector p-norm over ``dim`` (all elements by default); 'fro' is the 2-norm, 'nuc' the nuclear norm of the
    matrices over ``dim`` (two dims; a 2-D input by default), as torch.norm."""
    if dtype is not None:
        input = input.to(dtype)
    if isinstance(p, str) and p == "nuc":
        dims = (0, 1) if dim is None and input.ndim == 2 else tuple(dim) if dim is not None else None
        if dims is None or len(dims) != 2:
            raise RuntimeError(f"norm: p='nuc' takes a 2-D input or a dim of two dims, got shape {tuple(input.shape)} "
                               f"and dim={dim}")
        return NUCLEAR_NORM(input, dims, keepdim)
    if input.dtype.is_complex:  # the norm of the magnitudes (PyTorch's), real of the same precision
        input = absolute(input)
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"linalg.vector_norm (norm): Expected a floating point tensor as input. Got {input.dtype}; "
                           "convert with .float()")
    if input.dtype.itemsize == 2:  # PyTorch's norm kernel: float32 math for half inputs, rounded once
        return norm(input.to(dtypes.float32), p, dim, keepdim).to(input.dtype)
    dims = normalize_dims(dim, input.ndim, "norm")
    if p == "fro" and dims is not None and len(dims) > 2:
        raise RuntimeError(f"norm: the Frobenius norm (p='fro') takes a dim of 1 or 2 dims, got {dim}; use p=2 "
                           "for the 2-norm over more dims")
    reduced = math.prod(input.shape[d] for d in (dims if dims is not None else range(input.ndim))) if input.ndim \
        else 1
    if reduced == 1 and p not in (0, "nuc") and input.ndim:  # one element per norm: |x| (PyTorch's; x * x could overflow)
        out = absolute(input)
        if not keepdim:
            out = out.reshape(tuple(n for k, n in enumerate(input.shape) if dims is not None and k not in dims))
        return out
    if p in ("fro", 2, 2.0):
        return _sqrt_zero_grad(sum(input * input, dims, keepdim=keepdim))
    if p in (float("inf"), "inf"):
        return amax(absolute(input), dims if dims is not None else (), keepdim=keepdim)
    if p in (float("-inf"),):
        return amin(absolute(input), dims if dims is not None else (), keepdim=keepdim)
    if p == 1:
        return sum(absolute(input), dims, keepdim=keepdim)
    if p == 0:  # a zero gradient, as torch's (its result requires grad)
        return sum(grad_join.zero_grad_join((input != 0).to(input.dtype), input), dims, keepdim=keepdim)

    if p < 0 and input.numel() == 0:
        raise RuntimeError(f"linalg.vector_norm (norm): cannot compute the {p} norm on an empty tensor because the "
                           "operation does not have an identity")
    magnitude = absolute(input)
    if p < 0:  # a zero element makes the sum inf and the norm 0 with gradient 0, as PyTorch
        zero_x = magnitude == 0
        has_zero = sum(zero_x.to(input.dtype), dims, keepdim=keepdim) > 0
        total = sum(where(zero_x, 1.0, magnitude) ** p, dims, keepdim=keepdim)
        return where(has_zero & (total == total), 0.0, total ** (1.0 / p))  # a NaN element wins over a zero
    if p < 1:  # |x|^p has an infinite slope at 0: keep 0 * inf out of the gradient (PyTorch gives 0)
        zero_x = magnitude == 0
        powered = where(zero_x, 0.0, where(zero_x, 1.0, magnitude) ** p)
    else:
        powered = magnitude ** p
    total = sum(powered, dims, keepdim=keepdim)
    zero = total == 0  # the zero vector: gradient 0, as PyTorch
    return where(zero, 0.0, where(zero, 1.0, total) ** (1.0 / p))


import builtins as _builtins  # noqa: E402
from ember.ops.elementwise import abs as absolute, exp, isinf, log, sign, sqrt, where

builtin_max = _builtins.max
