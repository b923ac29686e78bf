"""ONNX translations that op records name in their ``onnx`` field when a plain ONNX op name is not enough.

An op whose record says ``onnx="Exp"`` (same inputs, no attrs) needs nothing here. An op with attrs
(``sum`` dims, ``reshape`` shape, ``conv2d`` padding, ``getitem`` index...) or without a 1:1 ONNX op
has ``onnx=<one of these functions>`` on its record (``onnx=to_onnx.reduction("ReduceSum")``); the
exporter core only walks the graph and calls what the record names. There is no table keyed by op
name: what an op exports to is read where the op is defined.

Every emitter has the signature ``emit(b, n) -> output name (or list of names)``, where ``b`` is the
:class:`~ember.onnx.builder.GraphBuilder` and ``n`` the :class:`~ember.onnx.exporter.EmitNode`
(``n.inputs``: ONNX names, ``n.in_specs``: their specs, ``n.attrs``, ``n.out_specs``). Shapes and
other int lists that may depend on a dynamic size go through ``b.ints(...)``.

Example:
    >>> from ember.ops.registry import OPS
    >>> OPS["reshape"].onnx is reshape
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember import dtypes
from ember.onnx.builder import INT64_MAX, INT64_MIN, DynInt, GraphBuilder, implied, static as _static
from ember.onnx import complex_emitters
from ember.onnx.complex_emitters import as_pair, complex_dtype_error, is_complex, pairs, part

def _rank(n: Any, i: int = 0) -> int:
    return len(n.in_specs[i].shape)


def _cast(b: GraphBuilder, x: str, dtype: Any) -> str:
    return b.node("Cast", [x], to=dtype.onnx)




# ---- reductions ----------------------------------------------------------------------------------
_AXES_AS_INPUT_SINCE = {"ReduceSum": 13}  # the other Reduce* ops take axes as an input from opset 18


def reduce(b: GraphBuilder, op_type: str, x: str, dims: Any, keepdim: bool) -> str:
    """``op_type`` over ``dims`` (None: all), with axes as an attribute or an input per the opset."""
    keep = int(bool(keepdim))
    if dims is None:
        return b.node(op_type, [x], keepdims=keep)
    if b.opset >= _AXES_AS_INPUT_SINCE.get(op_type, 18):
        return b.node(op_type, [x, b.ints(dims)], keepdims=keep)
    return b.node(op_type, [x], axes=[int(d) for d in dims], keepdims=keep)


def reduction(onnx_op: str) -> Callable:
    """``sum``/``mean``/``amax``/... over ``dims`` as ONNX ``onnx_op`` (ReduceSum, ...)."""

    def emit(b: GraphBuilder, n: Any) -> str:
        x = n.inputs[0]
        out_dtype = n.out_specs[0].dtype
        if n.in_specs[0].dtype is not out_dtype:  # integer/bool sums accumulate in int64, as in PyTorch
            x = _cast(b, x, out_dtype)
        rank = _rank(n)
        if rank == 0:
            return b.node("Identity", [x])
        dims = n.attrs.get("dims")
        if is_complex(n.in_specs[0]):  # sum/mean of pairs: over the logical axes only, never the pair axis
            if onnx_op == "ReduceProd":
                return complex_emitters.prod_pairs(b, x, n.in_specs[0], dims, n.attrs.get("keepdim", False), n)
            if onnx_op not in ("ReduceSum", "ReduceMean"):
                raise complex_dtype_error(n.op.name)
            dims = list(range(rank)) if dims is None else [int(d) % rank for d in dims]
        out = reduce(b, onnx_op, x, dims, n.attrs.get("keepdim", False))
        if onnx_op in ("ReduceMax", "ReduceMin") and out_dtype.is_floating_point:
            # onnxruntime's ReduceMax/ReduceMin skip NaN; ember and PyTorch (amax, amin) return NaN
            nan = _cast(b, b.node("IsNaN", [x]), out_dtype)
            any_nan = _cast(b, reduce(b, "ReduceMax", nan, dims, n.attrs.get("keepdim", False)), dtypes.bool_)
            out = b.node("Where", [any_nan, b.scalar(float("nan"), out_dtype), out])
        return out

    return pairs(emit)


def variance(b: GraphBuilder, n: Any) -> str:
    """ember's ``var`` record (``root``: std): ReduceSum((x - ReduceMean(x))^2) / (n - correction) [then Sqrt],
    computed in the input's dtype (ember accumulates float32 in float64 where float32 would lose the value)."""
    x, dims, keepdim = n.inputs[0], n.attrs.get("dims"), n.attrs.get("keepdim", False)
    shape = n.in_specs[0].shape
    axes = range(len(shape)) if dims is None else dims
    count = 1
    for d in axes:
        count *= int(_static([shape[d]], n, "reduced size")[0])
    dtype = n.in_specs[0].dtype
    centered = b.node("Sub", [x, reduce(b, "ReduceMean", x, dims, True)])
    total = reduce(b, "ReduceSum", b.node("Mul", [centered, centered]), dims, keepdim)
    divisor = max(count - float(n.attrs.get("correction", 1.0)), 0.0)
    out = b.node("Div", [total, b.scalar(divisor if divisor else float("nan"), dtype)]) if divisor else \
        b.node("Mul", [total, b.scalar(float("nan"), dtype)])
    return b.node("Sqrt", [out]) if n.attrs.get("root", False) else out


def sum_to(b: GraphBuilder, n: Any) -> str:
    shape = tuple(n.attrs["shape"])
    in_shape = n.in_specs[0].shape
    lead = len(in_shape) - len(shape)
    axes = list(range(lead)) + [i + lead for i, s in enumerate(shape) if s == 1 and in_shape[i + lead] != 1]
    x = reduce(b, "ReduceSum", n.inputs[0], axes, True) if axes else n.inputs[0]
    return b.node("Reshape", [x, b.ints(shape)])


def _arg_nan_first(b: GraphBuilder, x: str, op_type: str, axis: int, keepdims: int, floating: bool) -> str:
    """``op_type`` (ArgMax/ArgMin) of ``x`` along ``axis``, where a NaN wins (its first position), as in ember and
    PyTorch: ONNX's ArgMax/ArgMin compare with NaN as false and skip it."""
    idx = b.node(op_type, [x], axis=axis, keepdims=keepdims)
    if not floating:
        return idx
    nan = _cast(b, b.node("IsNaN", [x]), dtypes.int32)
    first_nan = b.node("ArgMax", [nan], axis=axis, keepdims=keepdims)
    any_nan = _cast(b, reduce(b, "ReduceMax", nan, [axis], bool(keepdims)), dtypes.bool_)
    return b.node("Where", [any_nan, first_nan, idx])


def arg_reduce(op_type: str) -> Callable:
    """``argmax``/``argmin`` as ONNX ``op_type`` (ArgMax/ArgMin), over everything when dim is None."""

    def emit(b: GraphBuilder, n: Any) -> str:
        dim, keepdim = n.attrs.get("dim"), int(bool(n.attrs.get("keepdim", False)))
        floating = n.in_specs[0].dtype.is_floating_point
        if dim is None:
            flat = b.node("Reshape", [n.inputs[0], b.ints([-1])])
            out = _arg_nan_first(b, flat, op_type, 0, 0, floating)
            return b.node("Reshape", [out, b.ints([1] * _rank(n))]) if keepdim else out
        return _arg_nan_first(b, n.inputs[0], op_type, int(dim), keepdim, floating)

    return emit


def values_and_indices(arg_op: str) -> Callable:
    """``max(dim)``/``min(dim)``: the ``arg_op`` index, then the values gathered at it."""

    def emit(b: GraphBuilder, n: Any) -> list:
        dim, keepdim = int(n.attrs["dim"]), bool(n.attrs.get("keepdim", False))
        idx = _arg_nan_first(b, n.inputs[0], arg_op, dim, 1, n.in_specs[0].dtype.is_floating_point)
        values = b.node("GatherElements", [n.inputs[0], idx], axis=dim)
        if not keepdim:
            axes = b.ints([dim])
            values, idx = b.node("Squeeze", [values, axes]), b.node("Squeeze", [idx, axes])
        return [values, idx]

    return emit


@pairs
def cumsum(b: GraphBuilder, n: Any) -> str:
    x = n.inputs[0]
    if is_complex(n.out_specs[0]):  # a complex cumsum (a real input with dtype=complex: its pairs first)
        if not is_complex(n.in_specs[0]):
            x = as_pair(b, _cast(b, x, n.out_specs[0].dtype.to_real()), n.in_specs[0])
        return complex_emitters.cumsum_pairs(b, x, n.in_specs[0], n.attrs["dim"])
    if n.in_specs[0].dtype is not n.out_specs[0].dtype:
        x = _cast(b, x, n.out_specs[0].dtype)
    if not _rank(n):  # ONNX CumSum refuses scalars; the cumulative sum of one element is itself
        return b.node("Identity", [x])
    return b.node("CumSum", [x, b.const(np.array(int(n.attrs["dim"]), dtype=np.int64))])


def bool_reduction(onnx_op: str) -> Callable:
    """``all`` (ReduceMin over bools) / ``any`` (ReduceMax); ONNX reduces ints, so via int32 and back."""

    def emit(b: GraphBuilder, n: Any) -> str:
        x = _cast(b, _cast(b, n.inputs[0], dtypes.bool_), dtypes.int32)
        out = reduce(b, onnx_op, x, n.attrs.get("dims"), n.attrs.get("keepdim", False))
        return _cast(b, out, n.out_specs[0].dtype)  # bool (uint8 for uint8 input, as PyTorch)

    return emit


# ---- elementwise with attrs or without a 1:1 ONNX op ---------------------------------------------
def clamp(b: GraphBuilder, n: Any) -> str:
    dtype = n.in_specs[0].dtype
    lo, hi = n.attrs.get("min"), n.attrs.get("max")
    return b.node("Clip", [n.inputs[0], "" if lo is None else b.scalar(lo, dtype),
                           "" if hi is None else b.scalar(hi, dtype)])


@pairs
def to_dtype(b: GraphBuilder, n: Any) -> str:
    """Cast; complex values are (..., 2) pairs (ember/onnx/complex_emitters.py): real -> complex adds a zero
    imaginary part, complex -> real keeps the real part (as PyTorch's cast), complex -> complex casts the pairs."""
    target, source = n.attrs["dtype"], n.in_specs[0]
    x = n.inputs[0]
    if target.is_complex:
        real_target = target.to_real()
        if not source.dtype.is_complex and source.dtype is not real_target:
            x = _cast(b, x, real_target)
        elif source.dtype.is_complex and source.dtype is not target:
            x = _cast(b, x, real_target)
        return as_pair(b, x, source)
    if source.dtype.is_complex:
        x = part(b, x, 0)
        return x if target is source.dtype.to_real() else _cast(b, x, target)
    return _cast(b, n.inputs[0], n.attrs["dtype"])


def round_decimals(b: GraphBuilder, n: Any) -> str:
    decimals = int(n.attrs.get("decimals", 0))
    if not decimals:
        return b.node("Round", [n.inputs[0]])
    scale = b.scalar(10.0 ** decimals, n.in_specs[0].dtype)
    return b.node("Div", [b.node("Round", [b.node("Mul", [n.inputs[0], scale])]), scale])


def not_equal(b: GraphBuilder, n: Any) -> str:
    return b.node("Not", [b.node("Equal", n.inputs)])


def _log1p(b: GraphBuilder, n: Any) -> str:
    return b.node("Log", [b.node("Add", [n.inputs[0], b.scalar(1, n.in_specs[0].dtype)])])


def _rsqrt(b: GraphBuilder, n: Any) -> str:
    return b.node("Reciprocal", [b.node("Sqrt", [n.inputs[0]])])


# Real inputs: the ONNX ops; complex ones: formulas on the (..., 2) pairs (ember/onnx/complex_emitters.py).
log1p = complex_emitters.with_complex_formula("log1p", _log1p)
rsqrt = complex_emitters.with_complex_formula("rsqrt", _rsqrt)
reciprocal = complex_emitters.with_complex_formula("reciprocal", lambda b, n: b.node("Reciprocal", [n.inputs[0]]))
sigmoid = complex_emitters.with_complex_formula("sigmoid", lambda b, n: b.node("Sigmoid", [n.inputs[0]]))


def _operand_dtype(n: Any) -> Any:
    return next(s.dtype for s in n.in_specs if s is not None)


def floor_divide(b: GraphBuilder, n: Any) -> str:
    dtype = _operand_dtype(n)
    if dtype.is_floating_point:
        return b.node("Floor", [b.node("Div", n.inputs)])
    # ONNX integer Div truncates; Python/PyTorch floor. Divide in float64 and floor (exact below 2**53).
    a, c = (_cast(b, x, dtypes.float64) for x in n.inputs)
    return _cast(b, b.node("Floor", [b.node("Div", [a, c])]), dtype)


def remainder(b: GraphBuilder, n: Any) -> str:
    dtype = _operand_dtype(n)
    if not dtype.is_floating_point:
        return b.node("Mod", n.inputs, fmod=0)  # integer Mod with fmod=0 takes the divisor's sign, like Python
    a, c = n.inputs
    return b.node("Sub", [a, b.node("Mul", [b.node("Floor", [b.node("Div", [a, c])]), c])])


def logical(onnx_op: str) -> Callable:
    """``logical_not/and/or/xor``: ONNX's Not/And/Or/Xor take bools only; other inputs are cast (0 -> False,
    anything else, NaN included, -> True, as PyTorch reads them)."""

    def emit(b: GraphBuilder, n: Any) -> str:
        inputs = [x if spec.dtype is dtypes.bool_ else _cast(b, x, dtypes.bool_)
                  for x, spec in zip(n.inputs, n.in_specs)]
        return b.node(onnx_op, inputs)

    return emit


def bitwise(bool_op: str, int_op: str) -> Callable:
    def emit(b: GraphBuilder, n: Any) -> str:
        if _operand_dtype(n) is dtypes.bool_:
            return b.node(bool_op, n.inputs)
        if b.opset < 18:
            raise NotImplementedError(f"ember.onnx.export: {n.op.name} on integers needs ONNX {int_op} "
                                      "(opset >= 18); pass opset_version=18")
        return b.node(int_op, n.inputs)

    return emit




# ---- movement --------------------------------------------------------------------------------------
def _pair_axis(n: Any) -> list:
    """The trailing axis of complex (..., 2) pairs, to append to shapes and permutations."""
    return [2] if is_complex(n.in_specs[0]) else []


@pairs
def reshape(b: GraphBuilder, n: Any) -> str:
    return b.node("Reshape", [n.inputs[0], b.ints(list(n.attrs["shape"]) + _pair_axis(n))])


@pairs
def expand(b: GraphBuilder, n: Any) -> str:
    return b.node("Expand", [n.inputs[0], b.ints(list(n.attrs["shape"]) + _pair_axis(n))])


@pairs
def permute(b: GraphBuilder, n: Any) -> str:
    rank = _rank(n)
    perm = [d % rank for d in _static(n.attrs["dims"], n, "dims")] if rank else []
    return b.node("Transpose", [n.inputs[0]], perm=perm + ([rank] if is_complex(n.in_specs[0]) else []))


@pairs
def identity(b: GraphBuilder, n: Any) -> str:
    return b.node("Identity", [n.inputs[0]])


def trilu(upper: bool) -> Callable:
    """``tril``/``triu`` as ONNX Trilu."""

    def emit(b: GraphBuilder, n: Any) -> str:
        return _trilu(b, n.inputs[0], int(n.attrs.get("diagonal", 0)), upper, n.in_specs[0].dtype)

    return emit


def _trilu(b: GraphBuilder, x: str, k: int, upper: bool, dtype: Any) -> str:
    """Trilu (opset 14); before it, a mask ``col - row >= k`` (``<= k`` for lower) from run-time sizes and Where."""
    if b.opset >= 14:
        return b.node("Trilu", [x, b.const(np.array(k, dtype=np.int64))], upper=int(upper))
    shape = b.node("Shape", [x])
    zero, one = b.const(np.array(0, dtype=np.int64)), b.const(np.array(1, dtype=np.int64))
    size = {axis: b.node("Gather", [shape, b.const(np.array(axis, dtype=np.int64))], axis=0) for axis in (-2, -1)}
    rows = b.node("Unsqueeze", [b.node("Range", [zero, size[-2], one]), b.ints([1])])
    cols = b.node("Range", [zero, size[-1], one])
    offset = b.node("Sub", [cols, rows])
    keep = b.node("GreaterOrEqual" if upper else "LessOrEqual", [offset, b.const(np.array(k, dtype=np.int64))])
    if dtype.name == "bool":
        return b.node("And", [x, keep])
    return b.node("Where", [keep, x, b.scalar(0, dtype)])


@pairs
def flip(b: GraphBuilder, n: Any) -> str:
    dims = [int(d) % max(_rank(n), 1) for d in n.attrs["dims"]]
    count = len(dims)
    return b.node("Slice", [n.inputs[0], b.ints([-1] * count), b.ints([INT64_MIN] * count), b.ints(dims),
                            b.ints([-1] * count)])


@pairs
def cat(b: GraphBuilder, n: Any) -> str:
    if any(is_complex(s) for s in n.in_specs) and not all(is_complex(s) for s in n.in_specs):
        raise NotImplementedError("ember.onnx.export: cat of complex and real tensors is not exported")
    return b.node("Concat", n.inputs, axis=int(n.attrs["dim"]) % max(_rank(n), 1))


def stack(b: GraphBuilder, n: Any) -> str:
    """Unsqueeze each input at ``dim``, then one Concat (ONNX has no Stack)."""
    if any(is_complex(s) for s in n.in_specs):
        raise NotImplementedError("ember.onnx.export: stack of complex tensors is not exported")
    dim = int(n.attrs["dim"])
    parts = [b.node("Unsqueeze", [x, b.ints([dim])]) if b.opset >= 13 else b.node("Unsqueeze", [x], axes=[dim])
             for x in n.inputs]
    return b.node("Concat", parts, axis=dim)


def pad(b: GraphBuilder, n: Any) -> str:
    rank = _rank(n)
    pad = list(n.attrs["pad"])
    begins, ends = [0] * rank, [0] * rank
    for i in range(len(pad) // 2):  # ember/PyTorch: (last-dim lo, last-dim hi, previous dim lo, ...)
        begins[rank - 1 - i], ends[rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    value = b.scalar(n.attrs.get("value", 0.0), n.in_specs[0].dtype)
    return b.node("Pad", [n.inputs[0], b.ints(begins + ends), value], mode="constant")


def gather(b: GraphBuilder, n: Any) -> str:
    return b.node("GatherElements", n.inputs, axis=int(n.attrs["dim"]))


def scatter_add(b: GraphBuilder, n: Any) -> str:
    return b.node("ScatterElements", n.inputs, axis=int(n.attrs["dim"]), reduction="add")


@pairs  # every axis it touches is counted from the front, so the trailing pair axis of complex values stays
def getitem(b: GraphBuilder, n: Any) -> str:
    """Basic indexing -> one Slice, then Squeeze (int items) and Unsqueeze (None items); a single
    integer index tensor -> Gather on its axis."""
    x, index_names = n.inputs[0], n.inputs[1:]
    rank = _rank(n)
    items = list(n.attrs["index"])
    consumed = sum(0 if (it is None or it is Ellipsis) else
                   (len(n.in_specs[1 + it[1]].shape) if _is_tensor_slot(it) and
                    n.in_specs[1 + it[1]].dtype is dtypes.bool_ else 1) for it in items)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (rank - consumed)
    else:
        items += [slice(None)] * (rank - consumed)
    starts, ends, axes, steps, squeeze, unsqueeze, tensors = [], [], [], [], [], [], []
    axis = out_axis = 0
    for it in items:
        if it is None:
            unsqueeze.append(out_axis)
            out_axis += 1
        elif isinstance(it, slice):
            if it != slice(None):
                step = 1 if it.step is None else it.step
                starts.append(it.start if it.start is not None else (0 if step > 0 else INT64_MAX))
                ends.append(it.stop if it.stop is not None else (INT64_MAX if step > 0 else INT64_MIN))
                axes.append(axis)
                steps.append(step)
            axis += 1
            out_axis += 1
        elif _is_tensor_slot(it):
            spec = n.in_specs[1 + it[1]]
            if spec.dtype is dtypes.bool_:
                raise NotImplementedError("ember.onnx.export: boolean-mask indexing has a data-dependent output "
                                          "shape; use ember.where(mask, x, 0) instead of x[mask]")
            tensors.append((axis, index_names[it[1]], len(spec.shape)))
            axis += 1
            out_axis += len(spec.shape)
        else:  # an int: slice [i, i+1) then squeeze the axis away
            i = int(it) if not isinstance(it, DynInt) else it
            starts.append(i)
            ends.append(i + 1 if i != -1 else INT64_MAX)
            axes.append(axis)
            steps.append(1)
            squeeze.append(axis)
            axis += 1
    if tensors and (len(tensors) > 1 or squeeze):
        raise NotImplementedError("ember.onnx.export: indexing with an index tensor combined with other integer or "
                                  "tensor indices is not supported; index one axis with a tensor at a time")
    out = x
    if axes:
        out = b.node("Slice", [out, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if tensors:
        axis, index, _ = tensors[0]
        out = b.node("Gather", [out, index], axis=axis)
    if squeeze:
        out = b.node("Squeeze", [out, b.ints(squeeze)])
    if unsqueeze:
        out = b.node("Unsqueeze", [out, b.ints(unsqueeze)])
    return out if out is not x else b.node("Identity", [x])


def index_put(b: GraphBuilder, n: Any) -> str:
    """``x[index] = value`` (``+=`` with ``accumulate``) as ScatterND (reduction="add") on ``x`` flattened.

    The flat positions written are ``arange(numel).reshape(shape)[index]``, built with Slice, Transpose
    and one Gather (NumPy's advanced-index rules); ``value`` is expanded to the selection's shape. ONNX
    leaves repeated positions without accumulate undefined (NumPy and ember keep the last). A boolean
    mask exports only as ``x[mask] = scalar`` (a Where): other mask writes have a data-dependent size.
    """
    x, value = n.inputs[0], n.inputs[1]
    shape = _static(n.in_specs[0].shape, n, "input shape")
    items, idx_specs, accumulate = list(n.attrs["index"]), n.in_specs[2:], bool(n.attrs.get("accumulate"))
    if any(_is_tensor_slot(it) and idx_specs[it[1]].dtype is dtypes.bool_ for it in items):
        return _masked_put(b, n, shape, items, accumulate)
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - sum(it is not None and it is not Ellipsis for it in items))
    items += [slice(None)] * (len(shape) - sum(it is not None for it in items))
    if None in items and any(_is_tensor_slot(it) for it in items):
        raise NotImplementedError("ember.onnx.export: index_put with both an index tensor and None in the index is "
                                  "not supported; unsqueeze the value instead of indexing with None")
    probe = tuple(np.zeros(_static(idx_specs[it[1]].shape, n, "index shape"), dtype=np.int64)
                  if _is_tensor_slot(it) else it for it in items)
    zeros = np.broadcast_to(np.zeros((), dtype=bool), shape)
    ints_first = any(_is_tensor_slot(it) for it in items) and any(type(it) is int for it in items)
    if ints_first:  # PyTorch applies ints before index tensors (ember/ops/movement.py, _ints_first)
        basic = tuple(it if type(it) is int else slice(None) for it in probe)
        selection = zeros[basic][tuple(it for it in probe if type(it) is not int)].shape
    else:  # NumPy's selection shape, from shapes only
        selection = zeros[probe].shape
    numel = int(np.prod(shape, dtype=np.int64))
    arange = b.node("Range", [b.const(np.array(0, dtype=np.int64)), b.const(np.array(numel, dtype=np.int64)),
                              b.const(np.array(1, dtype=np.int64))])
    grid = b.node("Reshape", [arange, b.ints(shape)])
    kept = [it for it in items if it is not None]
    if ints_first:  # take the int axes away first (a scalar Gather drops its axis), then the rest as usual
        for axis in reversed([a for a, it in enumerate(kept) if type(it) is int]):
            grid = b.node("Gather", [grid, b.const(np.array(int(kept[axis]) % shape[axis], dtype=np.int64))],
                          axis=axis)
        shape = [size for size, it in zip(shape, kept) if type(it) is not int]
        kept = [it for it in kept if type(it) is not int]
    positions = _select_positions(b, n, grid, shape, kept)
    updates = b.node("Reshape", [b.node("Expand", [value, b.ints(selection)]), b.ints([-1])])
    flat = b.node("Reshape", [x, b.ints([-1])])
    out = b.node("ScatterND", [flat, b.node("Reshape", [positions, b.ints([-1, 1])]), updates],
                 reduction="add" if accumulate else None)
    return b.node("Reshape", [out, b.ints(list(n.in_specs[0].shape))])


def _select_positions(b: GraphBuilder, n: Any, positions: str, shape: list, items: list) -> str:
    """``positions[items]`` for slices, ints and integer index tensors; ints count as 0-d index tensors
    (for basic indexing that gives NumPy's result too)."""
    starts, ends, axes, steps, sizes, advanced = [], [], [], [], [], []
    for axis, it in enumerate(items):
        if isinstance(it, slice):
            if it != slice(None):
                step = 1 if it.step is None else it.step
                starts.append(it.start if it.start is not None else (0 if step > 0 else INT64_MAX))
                ends.append(it.stop if it.stop is not None else (INT64_MAX if step > 0 else INT64_MIN))
                axes.append(axis)
                steps.append(step)
            sizes.append(len(range(*it.indices(shape[axis]))))
        else:
            sizes.append(shape[axis])
            advanced.append(axis)
    if axes:
        positions = b.node("Slice", [positions, b.ints(starts), b.ints(ends), b.ints(axes), b.ints(steps)])
    if not advanced:
        return positions
    others = [a for a in range(len(items)) if a not in advanced]
    positions = b.node("Transpose", [positions], perm=advanced + others)  # the indexed axes first, flattened
    positions = b.node("Reshape", [positions, b.ints([-1] + [sizes[a] for a in others])])
    linear, stride = None, 1
    for axis in reversed(advanced):  # the row-major flat index over the indexed axes, negatives wrapped
        it = items[axis]
        if _is_tensor_slot(it):
            index = n.inputs[2 + it[1]]
            if n.in_specs[2 + it[1]].dtype is not dtypes.int64:
                index = _cast(b, index, dtypes.int64)
        else:
            index = b.const(np.array(int(it), dtype=np.int64))
        term = b.node("Mod", [index, b.const(np.array(shape[axis], dtype=np.int64))], fmod=0)
        if stride != 1:
            term = b.node("Mul", [term, b.const(np.array(stride, dtype=np.int64))])
        linear = term if linear is None else b.node("Add", [term, linear])
        stride *= shape[axis]
    out = b.node("Gather", [positions, linear], axis=0)
    first = advanced[0]
    if first and advanced == list(range(first, first + len(advanced))):  # adjacent: NumPy keeps them in place
        batch = len(np.broadcast_shapes(*(tuple(n.in_specs[2 + items[a][1]].shape) if _is_tensor_slot(items[a])
                                          else () for a in advanced)))
        perm = [batch + i for i in range(first)] + list(range(batch)) + [batch + i for i in range(first, len(others))]
        out = b.node("Transpose", [out], perm=perm)
    return out


def _masked_put(b: GraphBuilder, n: Any, shape: list, items: list, accumulate: bool) -> str:
    """``x[mask] = scalar`` (or ``+=``): Where(mask, value, x), the mask covering x's leading dims."""
    x, value = n.inputs[0], n.inputs[1]
    items = [it for it in items if it is not Ellipsis]
    mask_shape = tuple(n.in_specs[2 + items[0][1]].shape) if len(items) == 1 else None
    if mask_shape is None or tuple(shape[:len(mask_shape)]) != mask_shape or \
            int(np.prod(_static(n.in_specs[1].shape, n, "value shape"))) != 1:
        raise NotImplementedError("ember.onnx.export: index_put with a boolean mask exports only as x[mask] = scalar "
                                  "(other mask writes have a data-dependent number of elements); use "
                                  "ember.where(mask, value, x)")
    trailing = [1] * (len(shape) - len(mask_shape))
    mask = b.node("Reshape", [n.inputs[2 + items[0][1]], b.ints(list(mask_shape) + trailing)])
    value = b.node("Reshape", [value, b.ints([])])
    if accumulate:
        value = b.node("Add", [x, value])
    return b.node("Where", [mask, value, x])


def _is_tensor_slot(item: Any) -> bool:
    from ember.ops.movement import TENSOR_SLOT

    return isinstance(item, tuple) and len(item) == 2 and item[0] == TENSOR_SLOT


# ---- linear algebra ------------------------------------------------------------------------------------
@pairs
def einsum(b: GraphBuilder, n: Any) -> str:
    """Einsum; of complex operands, real Einsums of their parts (ember/onnx/complex_emitters.py)."""
    equation = n.attrs["equation"].replace(" ", "")
    if is_complex(n.out_specs[0]):
        return complex_emitters.einsum_pairs(b, n.inputs, n.in_specs, equation)
    return b.node("Einsum", n.inputs, equation=equation)


def matmul_t(b: GraphBuilder, n: Any) -> str:
    a, c = n.inputs
    if n.attrs.get("transpose_a"):
        a = b.node("Transpose", [a], perm=_swap_last(_rank(n, 0)))
    if n.attrs.get("transpose_b"):
        c = b.node("Transpose", [c], perm=_swap_last(_rank(n, 1)))
    return b.node("MatMul", [a, c])


def _swap_last(rank: int) -> list:
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return perm


def linear(b: GraphBuilder, n: Any) -> str:
    """y = x @ w.T + bias: Gemm for 2-D inputs, MatMul (+ Add) for any other rank."""
    x, w, bias = n.inputs[0], n.inputs[1], (n.inputs[2] if len(n.inputs) > 2 else "")
    if _rank(n) == 2:
        return b.node("Gemm", [x, w] + ([bias] if bias else []), transB=1)
    out = b.node("MatMul", [x, b.node("Transpose", [w], perm=[1, 0])])
    return b.node("Add", [out, bias]) if bias else out


# ---- convolution and pooling -----------------------------------------------------------------------------
def conv2d(b: GraphBuilder, n: Any) -> str:
    top, bottom, left, right = _static(n.attrs["padding"], n, "padding")
    return b.node("Conv", n.inputs, strides=_static(n.attrs["stride"], n, "stride"), pads=[top, left, bottom, right],
                  dilations=_static(n.attrs["dilation"], n, "dilation"), group=int(n.attrs["groups"]),
                  kernel_shape=[int(k) for k in n.in_specs[1].shape[2:]])


def conv2d_input_grad(b: GraphBuilder, n: Any) -> str:
    """The adjoint of conv2d in its input is ConvTranspose, with output_padding fixing the size."""
    top, bottom, left, right = _static(n.attrs["padding"], n, "padding")
    stride = _static(n.attrs["stride"], n, "stride")
    dilation = _static(n.attrs["dilation"], n, "dilation")
    kernel = [int(k) for k in n.in_specs[1].shape[2:]]
    g_shape, target = n.in_specs[0].shape, n.attrs["input_shape"]
    implied(*target[:2])  # batch and channels follow from the inputs; only H, W need output_padding
    extra = []
    for axis, (lo, hi) in enumerate(((top, bottom), (left, right))):
        g, size = g_shape[2 + axis], target[2 + axis]
        natural = stride[axis] * (int(g) - 1) + dilation[axis] * (kernel[axis] - 1) + 1 - lo - hi
        # a dynamic size is fine when output_padding (size - natural) is the same at every traced size (a
        # ConvTranspose2d's own output, a U-Net's up-sampling): ONNX derives the size from the input then
        if isinstance(size, DynInt):
            pads = {t - stride[axis] * g_t for t, g_t in zip(b.values_at(size), b.values_at(g))}
            if len(pads) != 1:
                _static([size], n, "input_shape (spatial)")
            implied(size)
        extra.append(int(size) - natural)
    return b.node("ConvTranspose", n.inputs, strides=stride, pads=[top, left, bottom, right], dilations=dilation,
                  group=int(n.attrs["groups"]), kernel_shape=kernel, output_padding=extra)


def max_pool2d(b: GraphBuilder, n: Any) -> list:
    """MaxPool gives values and NCHW-flat indices; ember's indices are flat within each H*W plane."""
    ph, pw = _static(n.attrs["padding"], n, "padding")
    values, flat = b.node("MaxPool", [n.inputs[0]], outputs=2, kernel_shape=_static(n.attrs["kernel"], n, "kernel"),
                          strides=_static(n.attrs["stride"], n, "stride"), pads=[ph, pw, ph, pw],
                          dilations=_static(n.attrs["dilation"], n, "dilation"),
                          ceil_mode=int(bool(n.attrs.get("ceil_mode", False))))
    h, w = n.in_specs[0].shape[2:]
    if isinstance(h, DynInt) or isinstance(w, DynInt):  # dynamic: the plane's size at run time, not the traced one
        plane = b.node("Mul", [b.ints([h]), b.ints([w])])
    else:
        plane = b.const(np.array(int(h) * int(w), dtype=np.int64))
    indices = b.node("Mod", [flat, plane], fmod=0)
    return [values, indices]


def avg_pool2d(b: GraphBuilder, n: Any) -> str:
    if n.attrs.get("divisor_override"):
        raise NotImplementedError("ember.onnx.export: avg_pool2d with divisor_override has no ONNX equivalent")
    ph, pw = _static(n.attrs["padding"], n, "padding")
    return b.node("AveragePool", [n.inputs[0]], kernel_shape=_static(n.attrs["kernel"], n, "kernel"),
                  strides=_static(n.attrs["stride"], n, "stride"), pads=[ph, pw, ph, pw],
                  ceil_mode=int(bool(n.attrs.get("ceil_mode", False))),
                  count_include_pad=int(bool(n.attrs.get("count_include_pad", True))))


def fmod(b: GraphBuilder, n: Any) -> str:
    return b.node("Mod", n.inputs, fmod=1)  # C fmod: the dividend's sign (ONNX requires fmod=1 for floats)


# ---- nn primitives ----------------------------------------------------------------------------------------
def along_dim(onnx_op: str) -> Callable:
    """``softmax``/``log_softmax``: ONNX ``onnx_op`` with ember's ``dim`` as its axis."""

    def emit(b: GraphBuilder, n: Any) -> str:
        return b.node(onnx_op, [n.inputs[0]], axis=int(n.attrs["dim"]))

    return emit


def gelu(b: GraphBuilder, n: Any) -> str:
    approximate = n.attrs.get("approximate", "none")
    if b.opset >= 20:
        return b.node("Gelu", [n.inputs[0]], approximate=approximate)
    x, dtype = n.inputs[0], n.in_specs[0].dtype

    def c(value: float) -> str:
        return b.scalar(value, dtype)

    if approximate == "tanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = b.node("Mul", [b.node("Mul", [x, x]), x])
        inner = b.node("Mul", [b.node("Add", [x, b.node("Mul", [cube, c(0.044715)])]), c(math.sqrt(2 / math.pi))])
        core = b.node("Tanh", [inner])
    else:  # 0.5 x (1 + erf(x / sqrt 2))
        core = b.node("Erf", [b.node("Mul", [x, c(1 / math.sqrt(2))])])
    return b.node("Mul", [b.node("Mul", [x, c(0.5)]), b.node("Add", [core, c(1.0)])])


def scaled_dot_product_attention(b: GraphBuilder, n: Any) -> list:
    """ember's attention record: softmax(Q K^T scale (+ causal bias)) V; outputs (out, weights)."""
    q, k, v = n.inputs
    rank, dtype = _rank(n), n.in_specs[0].dtype
    key_t = b.node("Transpose", [k], perm=list(range(rank - 2)) + [rank - 1, rank - 2])
    scores = b.node("Mul", [b.node("MatMul", [q, key_t]), b.scalar(n.attrs["scale"], dtype)])
    if n.attrs["is_causal"]:
        # tril(ones(L, S)) built at run time (Trilu of an Expand): L and S may follow dynamic sequence axes
        sizes = b.ints([n.in_specs[0].shape[-2], n.in_specs[1].shape[-2]])
        keep = _trilu(b, b.node("Expand", [b.const(np.array(True)), sizes]), 0, False, dtypes.bool_)
        scores = b.node("Add", [scores, b.node("Where", [keep, b.scalar(0.0, dtype), b.scalar(-np.inf, dtype)])])
    weights = b.node("Softmax", [scores], axis=-1)
    return [b.node("MatMul", [weights, v]), weights]


def silu(b: GraphBuilder, n: Any) -> str:
    return b.node("Mul", [n.inputs[0], b.node("Sigmoid", [n.inputs[0]])])


def binary_cross_entropy(b: GraphBuilder, n: Any) -> str:
    """(t - 1) max(log(1 - p), -100) - t max(log p, -100), ember's (and PyTorch's) clamped logs. ONNX cannot
    raise: an exported graph gives NaN for p outside [0, 1] where ember refuses the input."""
    p, t = n.inputs
    dtype = n.in_specs[0].dtype
    floor = b.scalar(-100.0, dtype)
    log_p = b.node("Max", [b.node("Log", [p]), floor])
    log_q = b.node("Max", [b.node("Log", [b.node("Sub", [b.scalar(1.0, dtype), p])]), floor])
    positive = b.node("Mul", [t, log_p])
    negative = b.node("Mul", [b.node("Sub", [t, b.scalar(1.0, dtype)]), log_q])
    return b.node("Sub", [negative, positive])


def binary_cross_entropy_with_logits(b: GraphBuilder, n: Any) -> str:
    """(1 - t) x + w (log(1 + exp(-|x|)) + max(-x, 0)), w = (pos_weight - 1) t + 1: exp of a non-positive
    number never overflows (ember's formula; Log(1 + e) instead of log1p loses e < 1e-7 in float32)."""
    x, t = n.inputs[0], n.inputs[1]
    dtype = n.in_specs[0].dtype
    one = b.scalar(1.0, dtype)
    tail = b.node("Log", [b.node("Add", [b.node("Exp", [b.node("Neg", [b.node("Abs", [x])])]), one])])
    softplus_neg = b.node("Add", [tail, b.node("Max", [b.node("Neg", [x]), b.scalar(0.0, dtype)])])
    if len(n.inputs) > 2:
        weight = b.node("Add", [b.node("Mul", [b.node("Sub", [n.inputs[2], one]), t]), one])
        softplus_neg = b.node("Mul", [weight, softplus_neg])
    return b.node("Add", [b.node("Mul", [b.node("Sub", [one, t]), x]), softplus_neg])


def mish(b: GraphBuilder, n: Any) -> str:
    """Mish (opset 18), else x * tanh(softplus(x)) from ONNX's Softplus (log(exp(x) + 1))."""
    x = n.inputs[0]
    if b.opset >= 18:
        return b.node("Mish", [x])
    return b.node("Mul", [x, b.node("Tanh", [b.node("Softplus", [x])])])


def layer_norm(b: GraphBuilder, n: Any) -> list:
    """LayerNormalization over the last ``count`` dims; outputs (y, mean, 1/std) as ember's op."""
    count, dtype = int(n.attrs["count"]), n.in_specs[0].dtype
    affine = list(n.inputs[1:])
    if n.attrs["has_weight"]:
        scale = affine.pop(0)
    else:  # ONNX requires a scale input
        shape = _static(n.in_specs[0].shape[_rank(n) - count:], n, "normalized shape")
        scale = b.const(np.ones(shape, dtype=dtype.np), dtype)
    if b.opset < 17:  # LayerNormalization came in opset 17
        return _layer_norm_primitives(b, n.inputs[0], scale, affine[:1], count, float(n.attrs["eps"]), dtype)
    return b.node("LayerNormalization", [n.inputs[0], scale] + affine[:1], outputs=3, axis=-count,
                  epsilon=float(n.attrs["eps"]), stash_type=dtypes.float64.onnx if dtype is dtypes.float64 else 1)


def _layer_norm_primitives(b: GraphBuilder, x: str, scale: str, bias: list, count: int, eps: float,
                           dtype: Any) -> list:
    """LayerNormalization's own definition in primitives (opset < 17): statistics in float32 for 16-bit inputs
    (its stash_type 1), in the input's dtype otherwise; outputs (y, mean, 1/std)."""
    axes = list(range(-count, 0))
    stash = dtype if dtype in (dtypes.float32, dtypes.float64) else dtypes.float32
    if stash is not dtype:
        x = b.node("Cast", [x], to=stash.onnx)
    mean = reduce(b, "ReduceMean", x, axes, True)
    centred = b.node("Sub", [x, mean])
    var = reduce(b, "ReduceMean", b.node("Mul", [centred, centred]), axes, True)
    rstd = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [var, b.scalar(eps, stash)])])])
    y = b.node("Mul", [centred, rstd])
    if stash is not dtype:
        y = b.node("Cast", [y], to=dtype.onnx)
    y = b.node("Mul", [y, scale])
    if bias:
        y = b.node("Add", [y, bias[0]])
    return [y, mean, rstd]


def batch_norm(b: GraphBuilder, n: Any) -> list:
    """Training-mode batch norm (batch statistics) as primitives; outputs (y, mean, var) as ember's
    op. ONNX's BatchNormalization in training mode returns running statistics instead."""
    rank, has_weight = _rank(n), n.attrs["has_weight"]
    dtype = n.in_specs[0].dtype
    axes = [0] + list(range(2, rank))
    mean = reduce(b, "ReduceMean", n.inputs[0], axes, True)
    centered = b.node("Sub", [n.inputs[0], mean])
    var = reduce(b, "ReduceMean", b.node("Mul", [centered, centered]), axes, True)
    y = b.node("Div", [centered, b.node("Sqrt", [b.node("Add", [var, b.scalar(n.attrs["eps"], dtype)])])])
    per_channel = b.ints([1, -1] + [1] * (rank - 2))
    affine = list(n.inputs[1:])
    if has_weight:
        y = b.node("Mul", [y, b.node("Reshape", [affine.pop(0), per_channel])])
    if affine:
        y = b.node("Add", [y, b.node("Reshape", [affine[0], per_channel])])
    flat = b.ints([-1])
    return [y, b.node("Reshape", [mean, flat]), b.node("Reshape", [var, flat])]


def cross_entropy(b: GraphBuilder, n: Any) -> list:
    """The fused class-index cross entropy: LogSoftmax then NegativeLogLikelihoodLoss (opset 13's
    ignore_index and reductions are PyTorch's); outputs (loss, log-softmax) as ember's op."""
    if len(n.in_specs[0].shape) != 2:  # the leading-dims form comes only from vmap's batching rule
        raise NotImplementedError(f"ember.onnx.export: fused cross_entropy of {len(n.in_specs[0].shape)}-D logits "
                                  "(vmap's batched form) is not exported; export the per-sample function instead")
    logp = b.node("LogSoftmax", [n.inputs[0]], axis=1)
    loss = b.node("NegativeLogLikelihoodLoss", [logp, n.inputs[1]], reduction=n.attrs["reduction"],
                  ignore_index=int(n.attrs["ignore_index"]))
    return [loss, logp]


# ---- elementwise math without a 1:1 ONNX op ----------------------------------------------------------------
def _expm1(b: GraphBuilder, n: Any) -> str:
    """exp(x) - 1 (ONNX has no Expm1: near 0 this loses the relative precision ember's op keeps)."""
    return b.node("Sub", [b.node("Exp", [n.inputs[0]]), b.scalar(1, n.in_specs[0].dtype)])


expm1 = complex_emitters.with_complex_formula("expm1", _expm1)


def log_base(base: float) -> Callable:
    """``log2``/``log10``: Log(x) / ln(base) (complex: on the pairs)."""

    def emit(b: GraphBuilder, n: Any) -> str:
        return b.node("Div", [b.node("Log", [n.inputs[0]]), b.scalar(math.log(base), n.in_specs[0].dtype)])

    return complex_emitters.with_complex_formula({2: "log2", 10: "log10"}[int(base)], emit)


def exp2(b: GraphBuilder, n: Any) -> str:
    return b.node("Pow", [b.scalar(2.0, n.in_specs[0].dtype), n.inputs[0]])


def trunc(b: GraphBuilder, n: Any) -> str:
    """Round toward zero: Ceil below 0, Floor elsewhere (ONNX has no Trunc)."""
    x = n.inputs[0]
    if not n.in_specs[0].dtype.is_floating_point:
        return b.node("Identity", [x])
    negative = b.node("Less", [x, b.scalar(0, n.in_specs[0].dtype)])
    return b.node("Where", [negative, b.node("Ceil", [x]), b.node("Floor", [x])])


def atan2(b: GraphBuilder, n: Any) -> str:
    """atan2(y, x) = atan(y / x), shifted by +-pi where x < 0 (by y's sign); x == 0 gives +-pi/2 through
    atan(+-inf). (atan2(0, 0) is NaN here; ember and PyTorch give 0.)"""
    y, x = n.inputs
    dtype = n.in_specs[0].dtype
    base = b.node("Atan", [b.node("Div", [y, x])])
    pi = b.node("Where", [b.node("Less", [y, b.scalar(0, dtype)]), b.scalar(-math.pi, dtype), b.scalar(math.pi, dtype)])
    shift = b.node("Where", [b.node("Less", [x, b.scalar(0, dtype)]), pi, b.scalar(0, dtype)])
    return b.node("Add", [base, shift])


def sort(b: GraphBuilder, n: Any) -> list:
    """sort(dim, descending) as TopK over the whole dim (values and int64 indices). TopK is not
    stable: indices of equal values may come in another order than ember's stable sort."""
    if not _rank(n):  # TopK needs an axis: a 0-d tensor sorts to itself at index 0
        return [b.node("Identity", [n.inputs[0]]), b.const(np.array(0, dtype=np.int64))]
    dim = int(n.attrs.get("dim", -1))
    size = n.in_specs[0].shape[dim]
    k = b.ints([size])
    return b.node("TopK", [n.inputs[0], k], outputs=2, axis=dim, largest=int(bool(n.attrs.get("descending", False))),
                  sorted=1)


def relu_grad(b: GraphBuilder, n: Any) -> str:
    """relu's backward: the gradient where relu's output is positive, else 0."""
    g, out = n.inputs
    zero = b.scalar(0, n.in_specs[0].dtype)
    return b.node("Where", [b.node("Greater", [out, b.scalar(0, n.in_specs[1].dtype)]), g, zero])


def grad_mask(b: GraphBuilder, n: Any) -> str:
    """clamp's backward: the gradient where the mask holds, else 0."""
    g, mask = n.inputs
    if n.in_specs[1].dtype is not dtypes.bool_:
        mask = _cast(b, mask, dtypes.bool_)
    return b.node("Where", [mask, g, b.scalar(0, n.in_specs[0].dtype)])


def hardtanh(b: GraphBuilder, n: Any) -> str:
    dtype = n.in_specs[0].dtype
    return b.node("Clip", [n.inputs[0], b.scalar(n.attrs.get("min_val", -1.0), dtype),
                           b.scalar(n.attrs.get("max_val", 1.0), dtype)])


def logsigmoid(b: GraphBuilder, n: Any) -> str:
    """min(x, 0) - log(1 + exp(-|x|)): exp of a non-positive number never overflows (as ember's impl)."""
    x, dtype = n.inputs[0], n.in_specs[0].dtype
    tail = b.node("Log", [b.node("Add", [b.node("Exp", [b.node("Neg", [b.node("Abs", [x])])]), b.scalar(1, dtype)])])
    return b.node("Sub", [b.node("Min", [x, b.scalar(0, dtype)]), tail])


def hypot(b: GraphBuilder, n: Any) -> str:
    """sqrt(a^2 + b^2) (overflows above ~1.8e19 in float32, where ember's scaled hypot does not)."""
    a, c = n.inputs
    return b.node("Sqrt", [b.node("Add", [b.node("Mul", [a, a]), b.node("Mul", [c, c])])])


# ---- diagonal, searchsorted --------------------------------------------------------------------------
@pairs
def diagonal(b: GraphBuilder, n: Any) -> str:
    """``diagonal(x, offset, dim1, dim2)``: move (dim1, dim2) last, flatten them, Gather the diagonal's flat
    positions (static: rows and columns are known when exporting). A complex input keeps its pair axis last
    (``einsum('ii->i', z)`` is this view)."""
    shape = list(n.in_specs[0].shape)
    rank = len(shape)
    pair = [rank] if is_complex(n.in_specs[0]) else []  # the (..., 2) real/imaginary axis stays where it is
    dim1, dim2 = int(n.attrs.get("dim1", 0)) % rank, int(n.attrs.get("dim2", 1)) % rank
    offset = int(n.attrs.get("offset", 0))
    rows, cols = _static([shape[dim1], shape[dim2]], n, "diagonal size")
    rest = [k for k in range(rank) if k not in (dim1, dim2)]
    moved = b.node("Transpose", [n.inputs[0]], perm=rest + [dim1, dim2] + pair)
    flat = b.node("Reshape", [moved, b.ints([0] * len(rest) + [rows * cols] + [2] * len(pair))])
    first_row, first_col = max(-offset, 0), max(offset, 0)
    length = max(0, min(rows - first_row, cols - first_col))
    positions = np.array([(first_row + i) * cols + first_col + i for i in range(length)], dtype=np.int64)
    return b.node("Gather", [flat, b.const(positions)], axis=len(rest))


def unfold(b: GraphBuilder, n: Any) -> str:
    """``unfold(x, dimension, size, step)``: flatten, then Gather every window element's flat position (static:
    the shape is known when exporting)."""
    shape = tuple(_static(list(n.in_specs[0].shape), n, "unfold size"))
    dim, size, step = (int(n.attrs[k]) for k in ("dimension", "size", "step"))
    if not shape:  # a 0-d tensor unfolds to (size,)
        return b.node("Reshape", [n.inputs[0], b.ints([size])])
    count = (shape[dim] - size) // step + 1
    host = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    st = host.strides
    positions = np.lib.stride_tricks.as_strided(
        host, shape[:dim] + (count,) + shape[dim + 1:] + (size,), st[:dim] + (st[dim] * step,) + st[dim + 1:] + (st[dim],))
    flat = b.node("Reshape", [n.inputs[0], b.ints([-1])])
    return b.node("Gather", [flat, b.const(np.ascontiguousarray(positions))], axis=0)


def searchsorted(b: GraphBuilder, n: Any) -> str:
    """Insertion points by counting: ``sum(sequence < value)`` (``<=`` with ``right``) over the sequence's
    last dim, a broadcast compare of (..., N, 1) values with (..., 1, M) boundaries (N*M memory)."""
    sequence, values = n.inputs
    if len(n.in_specs[0].shape) > 1:
        sequence = b.node("Unsqueeze", [sequence, b.ints([-2])]) if b.opset >= 13 else \
            b.node("Unsqueeze", [sequence], axes=[-2])
    column = b.node("Unsqueeze", [values, b.ints([-1])]) if b.opset >= 13 else \
        b.node("Unsqueeze", [values], axes=[-1])
    before = b.node("LessOrEqual" if n.attrs.get("right", False) else "Less", [sequence, column])
    return reduce(b, "ReduceSum", _cast(b, before, dtypes.int64), [-1], False)
