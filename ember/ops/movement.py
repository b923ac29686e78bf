"""Movement primitives: reshape, permute, expand, indexing (get and put), cat, flip, pad, gather,
scatter_add, tril/triu, contiguous/clone. Views share memory and their base's version counter.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from ember import dtypes
from ember.interpreters import TracingError
from ember.ops import dispatch
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops import batching, layout
from ember.onnx import emitters as to_onnx
from ember.ops.simplify import permute_rule, same_value
from ember.autograd.node import _FREED_MESSAGE, NotArrayable, SavedTensor
from ember.autograd.index_grad import IndexGrad
from ember.backends import cpu_parallel_ufunc
from ember.backends.cpu_scatter import scatter_add_rows
from ember.ops.elementwise import sum_to
from ember.ops.reductions import take_along


def _prod(values: Sequence[int]) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def infer_shape(shape: Sequence[int], numel: int, op: str, source: tuple) -> tuple:
    """Resolve one -1 in ``shape`` and check the element count, with PyTorch's message."""
    shape = tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise RuntimeError(f"{op}: only one dimension can be inferred, got shape {list(shape)}")
    if -1 in shape:
        known = _prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel} (shape {source})")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if _prod(shape) != numel:
        raise RuntimeError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel} (shape {source})")
    return shape


def _reshape_impl(xp: Any, x: Any, shape: tuple) -> Any:
    # A NumPy array's own method: np.reshape is a Python wrapper (fromnumeric) ending in this call (~0.5 us of a
    # ~3 us view); other namespaces (CuPy, the fuser's symbolic one) keep their function.
    return x.reshape(shape) if x.__class__ is np.ndarray else xp.reshape(x, shape)


def _permute_impl(xp: Any, x: Any, dims: tuple) -> Any:
    return x.transpose(dims) if x.__class__ is np.ndarray else xp.transpose(x, dims)  # (as _reshape_impl)


RESHAPE = register(OpDef(
    name="reshape", batch=batching.reshape, category="movement", impl=_reshape_impl, save="none",
    shape_rule=lambda x, shape: Spec(tuple(shape), x.dtype, x.device),
    vjp=lambda ctx, g: (g.reshape(ctx.input_meta[0]),), onnx=to_onnx.reshape, view=True, simplify=same_value,
))


def _inverse_permutation(dims: Sequence[int]) -> tuple:
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return tuple(inverse)


PERMUTE = register(OpDef(
    name="permute", batch=batching.permute, category="movement", impl=_permute_impl, save="none",
    shape_rule=lambda x, dims: Spec(tuple(x.shape[d] for d in dims), x.dtype, x.device),
    vjp=lambda ctx, g: (g.permute(_inverse_permutation(ctx.attrs["dims"])),), onnx=to_onnx.permute,
    view=True, simplify=permute_rule,
))

EXPAND = register(OpDef(
    name="expand", batch=batching.expand, category="movement", impl=lambda xp, x, shape: xp.broadcast_to(x, shape), save="none",
    shape_rule=lambda x, shape: Spec(tuple(shape), x.dtype, x.device),
    vjp=lambda ctx, g: (g.sum_to_size(ctx.input_meta[0]),), onnx=to_onnx.expand, view=True, simplify=same_value,
))

FLIP = register(OpDef(
    name="flip", batch="dims", category="movement", save="none",
    # a copy, as PyTorch's flip is (NumPy's is a view: writing into the result would change the input), laid out
    # as the input (torch's TensorIterator over the restrided input: a transposed or channels-last input stays so)
    impl=lambda xp, x, dims: layout.copy_with_strides(np, xp.flip(x, dims), layout.preserve_strides(
        x.shape, layout.element_strides(x))) if x.ndim > 1 and xp is np and not x.flags.c_contiguous and x.size
    else xp.flip(x, dims).copy(),
    shape_rule=lambda x, dims: Spec(x.shape, x.dtype, x.device),
    vjp=lambda ctx, g: (g.flip(ctx.attrs["dims"]),), onnx=to_onnx.flip,
))

CONTIGUOUS = register(OpDef(
    name="contiguous", batch="elementwise", category="movement", impl=lambda xp, x: xp.ascontiguousarray(x), save="none",
    shape_rule=lambda x: x, vjp=lambda ctx, g: (g,), onnx=to_onnx.identity, simplify=same_value,
))

CLONE = register(OpDef(
    name="clone", batch="elementwise", category="movement", impl=layout.clone_array, save="none",
    shape_rule=lambda x: x, vjp=lambda ctx, g: (g,), onnx=to_onnx.identity, simplify=same_value,
))

TRIL = register(OpDef(
    name="tril", batch="leading", category="movement", impl=lambda xp, x, diagonal=0: xp.ascontiguousarray(xp.tril(x, diagonal)), save="none",  # row-major, as torch
    shape_rule=lambda x, diagonal=0: x, vjp=lambda ctx, g: (g.tril(ctx.attrs.get("diagonal", 0)),), onnx=to_onnx.trilu(upper=False),
))
TRIU = register(OpDef(
    name="triu", batch="leading", category="movement", impl=lambda xp, x, diagonal=0: xp.ascontiguousarray(xp.triu(x, diagonal)), save="none",
    shape_rule=lambda x, diagonal=0: x, vjp=lambda ctx, g: (g.triu(ctx.attrs.get("diagonal", 0)),), onnx=to_onnx.trilu(upper=True),
))


# ---- indexing ----------------------------------------------------------------------------------
TENSOR_SLOT = "__tensor__"


def _rebuild_index(index: tuple, arrays: Sequence[Any]) -> tuple:
    return tuple(arrays[item[1]] if isinstance(item, tuple) and item and item[0] == TENSOR_SLOT else item
                 for item in index)


def _ints_first(full: tuple) -> tuple | None:
    """PyTorch applies integer indices before tensor indices; NumPy counts an int among index arrays as one
    more advanced index, which moves the result's dimensions when a slice separates them (``x[0, :, [1, 2]]``
    of a (2, 3, 4) tensor is (3, 2) in PyTorch, (2, 3) in NumPy). Returns the (basic, rest) pair to apply one
    after the other (``x[basic][rest]``, the first a view), or None where NumPy's reading is PyTorch's."""
    if not any(type(i) is int for i in full) or not any(hasattr(i, "dtype") for i in full):
        return None
    basic: list = []
    rest: list = []
    for item in full:
        if type(item) is int:
            basic.append(item)
        elif hasattr(item, "dtype"):  # an index array: kept for the second step (a bool mask spans its ndim)
            basic.extend([slice(None)] * (item.ndim if item.dtype == bool else 1))
            rest.append(item)
        elif item is Ellipsis:
            basic.append(item)
            rest.append(item)
        else:  # slices, None and bool scalars act in the first step; their dims pass the second
            basic.append(item)
            rest.append(slice(None))
    return tuple(basic), tuple(rest)


def take_index(x: Any, full: tuple) -> Any:
    """``x[full]`` with PyTorch's reading of an index that mixes ints and index arrays."""
    parts = _ints_first(full)
    return x[full] if parts is None else x[parts[0]][parts[1]]


def _leading_ones_stripped(value: Any) -> Any:
    """PyTorch's setitem drops a value's leading size-1 dims that the selection lacks (x[1] = v of shape (1, 1))."""
    while getattr(value, "ndim", 0) and value.shape[0] == 1:
        value = value[0]
    return value


def assign_index(xp: Any, target: Any, full: tuple, value: Any, accumulate: bool = False) -> None:
    """``target[full] = value`` (or ``+=`` with repeats counted when ``accumulate``) in place, with PyTorch's
    index reading and its leniency for extra leading size-1 dims of ``value``."""
    parts = _ints_first(full)
    if parts is not None:
        target, full = target[parts[0]], parts[1]  # a view: writes land in the original
    if accumulate:
        full = _spread_bool(xp, full)
        if not scatter_add_rows(xp, target, full, value):  # (rows added in exact rounds: embeddings' gradients)
            xp.add.at(target, full, value)
        return
    try:
        target[full] = value
    except (ValueError, TypeError):
        stripped = _leading_ones_stripped(value)
        if stripped is value:
            raise
        target[full] = stripped


def _one_take(xp: Any, x: Any, full: tuple) -> tuple | None:
    """``(array, axis)`` when ``x[full]`` selects with one integer index array along an axis past the first and takes
    every other dim whole (``x[:, i]``, ``x[..., i]``): ``np.take`` along that axis gives PyTorch's row-major result
    in one pass. None otherwise (the first axis: NumPy's result is row-major already)."""
    if xp is not np or len(full) > x.ndim + 1:
        return None
    array, position, ellipsis = None, -1, -1
    for k, item in enumerate(full):
        if item is Ellipsis:
            if ellipsis >= 0:
                return None
            ellipsis = k
        elif type(item) is slice:
            if item != _WHOLE:
                return None
        elif array is None and type(item) is np.ndarray and item.dtype.kind in "iu":
            array, position = item, k
        else:
            return None
    if array is None:
        return None
    if ellipsis < 0:
        axis = position
    elif ellipsis > position:
        axis = position
    else:
        axis = x.ndim - (len(full) - position)
    return (array, axis) if 0 < axis < x.ndim else None


_WHOLE = slice(None)


def _has_advanced(index: tuple) -> bool:
    return any(isinstance(item, tuple) and item and item[0] == TENSOR_SLOT for item in index)


def _index_error(x: Any, index: tuple, error: Exception) -> IndexError:
    if len(x.shape) == 0 and len(index) == 1:  # PyTorch's words for `loss.data[0]` (code from before 0.4)
        item = index[0]
        if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
            return IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` "
                              "in C++ to convert a 0-dim tensor to a number")
        if isinstance(item, slice):
            return IndexError("slice() cannot be applied to a 0-dim tensor.")
    return IndexError(f"index: {error} (indexing a tensor of shape {tuple(x.shape)}). Check the index against "
                      "the tensor's size in that dimension.")


def _getitem_impl(xp: Any, x: Any, *index_arrays: Any, index: tuple) -> Any:
    try:
        if not index_arrays:  # basic indexing: the structure is the index
            out = x[index]
            if not isinstance(out, xp.ndarray):  # x[1, 2]: a 0-d view, as in PyTorch
                out = x[index + (Ellipsis,)]
            return out
        full = _rebuild_index(index, index_arrays)
        one = _one_take(xp, x, full)
        if one is not None:  # x[:, i], index_select(x, 1, i): np.take writes the row-major result directly
            return xp.take(x, one[0], axis=one[1])
        out = take_index(x, full)  # (ints before arrays matter only with arrays)
        if xp is np and not out.flags.c_contiguous:
            # PyTorch's index kernel writes a fresh row-major result; NumPy puts the advanced-index dims outermost
            # in memory (x[:, i] of a (2, 3, 8, 8) tensor had strides (64, 128, 8, 1) against torch's (128, 64, 8, 1))
            out = np.ascontiguousarray(out)
        return out
    except IndexError as error:
        raise _index_error(x, index, error) from None


def _saved_index_tensors(ctx: Any, first: int) -> tuple:
    """The saved index tensors only: the indexed tensor's own version is not checked (PyTorch's
    index/slice backward does not need its values, so changing it in place later is fine)."""
    saved = getattr(ctx, "saved", ())
    if saved is None:
        raise RuntimeError(_FREED_MESSAGE)
    if not saved:  # a symbolic-graph ctx: no saved versions to check
        return tuple(ctx.inputs[first:])
    return tuple(s.unpack(ctx, ctx.op.name, f"input {i}") if isinstance(s, SavedTensor) else s
                 for i, s in enumerate(saved[first:], first))


def _getitem_vjp(ctx: Any, g: Any) -> tuple:
    index_tensors = _saved_index_tensors(ctx, 1)
    grad = dispatch.apply(INDEX_BACKWARD, (g, *index_tensors), {"index": ctx.attrs["index"], "shape": ctx.input_meta[0]})
    return (grad,) + (None,) * len(index_tensors)


def _getitem_rule(x: Spec, *index_arrays: Any, index: tuple) -> Spec:
    """The shape ``x[index]`` has, from shapes alone; a boolean mask's selection size depends on its values."""
    if any(isinstance(a, Spec) and a.dtype is dtypes.bool_ for a in index_arrays):
        raise TracingError(
            f"index: a boolean mask of shape {[tuple(a.shape) for a in index_arrays if isinstance(a, Spec)]} selects a "
            "number of elements that depends on its values, which a static graph cannot hold (ember.compile runs it "
            "eagerly). Inside a compiled function keep the shape: ember.where(mask, x, 0) or x.masked_fill(~mask, 0).")
    zeros = [np.broadcast_to(np.zeros((), dtype=a.dtype.np), a.shape) if isinstance(a, Spec) else a  # valid indices
             for a in (x, *index_arrays)]
    out = _getitem_impl(np, zeros[0], *zeros[1:], index=index)
    return Spec(tuple(out.shape), x.dtype, x.device)


GETITEM = register(OpDef(
    name="getitem", batch=batching.getitem, category="movement", impl=_getitem_impl, vjp=_getitem_vjp, save="after_first", shape_rule=_getitem_rule,
    nondiff_inputs=tuple(range(1, 64)), onnx=to_onnx.getitem, view=True,
))


def _spread_bool(xp: Any, index: tuple) -> tuple:
    """``ufunc.at`` wants integer index arrays: expand boolean masks to their nonzero indices."""
    out: list = []
    for item in index:
        if hasattr(item, "dtype") and item.dtype == bool:
            out.extend(xp.nonzero(item))
        else:
            out.append(item)
    return tuple(out)


def _index_backward_impl(xp: Any, g: Any, *index_arrays: Any, index: tuple, shape: tuple) -> Any:
    out = xp.zeros(shape, dtype=g.dtype)
    full = _rebuild_index(index, index_arrays)
    assign_index(xp, out, full, g, accumulate=_has_advanced(index))
    return out


INDEX_BACKWARD = register(OpDef(
    name="index_backward", batch=batching.index_backward, category="movement", impl=_index_backward_impl,
    vjp=lambda ctx, g: (getitem_with(g, ctx.attrs["index"], ctx.inputs[1:]),) + (None,) * (len(ctx.inputs) - 1),
    shape_rule=lambda g, *idx, index, shape: Spec(tuple(shape), g.dtype, g.device),
    nondiff_inputs=tuple(range(1, 64)),
))



# Array gradient rules (OpDef.array_vjp, see ember/ops/elementwise.py): the same NumPy calls as the rules above.
def _getitem_array_vjp(ctx: Any, g: Any) -> tuple:
    if len(ctx.input_meta) > 1:  # index tensors: the ember-op rule (it checks their versions)
        raise NotArrayable
    shape = ctx.input_meta[0]
    if g.size >= _LAZY_INDEX_GRAD:  # kept as (index, values): sibling views' gradients fill one buffer
        return (IndexGrad(g, ctx.attrs["index"], shape, dims=_permuted_from(ctx)),)
    return (_index_backward_impl(np, g, index=ctx.attrs["index"], shape=shape),)


def _permuted_from(ctx: Any) -> tuple | None:
    """The dims of the ``permute`` that made the indexed tensor, if one did: its gradient buffer is then laid out
    so that the permute's backward gives a C-contiguous array (index_grad.py), which a ``view`` before the permute
    (the q/k/v unpack's ``view(b, t, 3, h, d)``) reshapes without a copy."""
    edges = getattr(getattr(ctx, "node", None), "next_edges", None)
    edge = edges[0] if edges else None
    child = edge[0] if edge is not None else None
    op = getattr(child, "op", None)
    if op is PERMUTE:
        return child.attrs["dims"]
    return None


# Basic-index gradients of this many elements or more stay (index, values) until the engine needs the full
# array (ember/autograd/index_grad.py); below it the zeros and the copy cost less than the bookkeeping.
_LAZY_INDEX_GRAD = 1 << 14


def _sum_to_array(g: Any, shape: tuple) -> Any:
    return g if g.shape == tuple(shape) else OPS["sum_to"].impl(np, g, tuple(shape))


RESHAPE.array_vjp = (lambda ctx, g: cpu_parallel_ufunc.reshape(g, ctx.input_meta[0]),)  # a large copy on all cores
PERMUTE.array_vjp = (lambda ctx, g: np.transpose(g, _inverse_permutation(ctx.attrs["dims"])),)
EXPAND.array_vjp = (lambda ctx, g: _sum_to_array(g, ctx.input_meta[0]),)
CONTIGUOUS.array_vjp = CLONE.array_vjp = (lambda ctx, g: g,)
GETITEM.array_vjp = _getitem_array_vjp


# Batched array rules (OpDef.batch_array_vjp, ember/func/batched_backward.py): the rules above on vmap's batch,
# which comes first in ``g``; the engine sums each result back to (batch, *input shape).
def _batch_first(rule: Any) -> Any:
    def batched(ctx: Any, g: Any, gdim: int | None) -> list:
        if gdim is None:  # an unbatched cotangent: the ember-op rules
            raise NotArrayable
        return [(rule(ctx, g), 0)]
    return batched


RESHAPE.batch_array_vjp = _batch_first(lambda ctx, g: g.reshape((ctx.size,) + tuple(ctx.input_meta[0])))
PERMUTE.batch_array_vjp = _batch_first(
    lambda ctx, g: np.transpose(g, (0,) + tuple(d + 1 for d in _inverse_permutation(ctx.attrs["dims"]))))
EXPAND.batch_array_vjp = CONTIGUOUS.batch_array_vjp = CLONE.batch_array_vjp = _batch_first(lambda ctx, g: g)

def _index_put_impl(xp: Any, x: Any, value: Any, *index_arrays: Any, index: tuple, accumulate: bool = False) -> Any:
    out = x.copy()
    full = _rebuild_index(index, index_arrays)
    try:
        assign_index(xp, out, full, value, accumulate)
    except IndexError as error:
        raise _index_error(x, index, error) from None
    except ValueError as error:
        raise RuntimeError(f"index_put: cannot assign a value of shape {tuple(getattr(value, 'shape', ()))} to the "
                           f"selection of a tensor of shape {tuple(x.shape)}: {error}") from None
    return out


def _index_put_value_grad(ctx: Any, g: Any) -> Any:
    """The value's gradient: g at the written positions (the engine sums a broadcast value back)."""
    index, index_tensors = ctx.attrs["index"], _saved_index_tensors(ctx, 2)
    value_shape = tuple(ctx.input_meta[1])
    mask = index_tensors[0] if len(index) == 1 and len(index_tensors) == 1 else None
    if mask is not None and mask.dtype is dtypes.bool_ and tuple(mask.shape) == tuple(g.shape) \
            and int(np.prod(value_shape)) == 1:
        from ember.ops.elementwise import where

        # x[mask] = scalar: sum g over the mask without selecting (a static shape, so graphs hold it)
        return where(mask, g, 0.0).sum().reshape(value_shape)
    selected = getitem_with(g, index, index_tensors)
    extra = len(value_shape) - selected.ndim
    if extra > 0 and all(n == 1 for n in value_shape[:extra]):
        # x[i] = v with v's extra leading size-1 dims (PyTorch strips them, assign_index too): put them back
        selected = selected.reshape(value_shape[:extra] + tuple(selected.shape))
    return selected


# index_put(x, value, *index_tensors): one rule per differentiable input.
_INDEX_PUT_VJP = (
    lambda ctx, g: g if ctx.attrs.get("accumulate") else index_put(g, ctx.attrs["index"], _saved_index_tensors(ctx, 2), 0.0),
    _index_put_value_grad,
)


INDEX_PUT = register(OpDef(
    name="index_put", batch=batching.index_put, category="movement", impl=_index_put_impl, vjp=_INDEX_PUT_VJP,
    shape_rule=lambda x, v, *idx, index, accumulate=False: x, nondiff_inputs=tuple(range(2, 64)),
    onnx=to_onnx.index_put,
))


_BASIC_INDEX = frozenset((int, type(None), type(Ellipsis)))


def _basic_index(key: Any) -> tuple | None:
    """``key`` as split_index's structure when it is basic indexing only (ints, slices of step None or > 0, None,
    ``...``): no index tensors, nothing to convert. None for anything else (split_index's full path decides)."""
    if key.__class__ is not tuple:
        key = (key,)
    for item in key:
        if item.__class__ in _BASIC_INDEX:
            continue
        if item.__class__ is slice and (item.step is None or (item.step.__class__ is int and item.step > 0)):
            continue
        return None
    return key


def _uint8_mask(item: Any) -> Any:
    """A uint8 index is a boolean mask in PyTorch (pre-bool code, e.g. ``x[1 - suppress]``), with its warning.

    >>> x = ember.arange(3.); x[ember.tensor([1, 0, 1], dtype=ember.uint8)]  # tensor([0., 2.]), as x[mask.bool()]
    """
    import warnings

    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                  UserWarning, stacklevel=5)  # the line of the caller of x[...]
    return item != 0


def _sequence_as_tuple(key: list) -> bool:
    """PyTorch's legacy rule (``treatSequenceAsTuple``): a list of fewer than 32 items holding a slice, ``...``,
    None, a tensor or a sequence indexes as the tuple of its items (``x[[slice(0, 2), 1]]`` is ``x[0:2, 1]``,
    ``x[[[0, 1], [1, 0]]]`` is ``x[[0, 1], [1, 0]]``), with torch's deprecation warning; ``x[[0, 1]]`` stays a list
    index."""
    if len(key) >= 32 or not any(item is None or item is Ellipsis or isinstance(item, (slice, list, tuple, range,
                                                                                         dispatch.Tensor))
                                 for item in key):
        return False
    warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in "
                  "pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as "
                  "tensor index, x[torch.tensor(seq)], which will result either in an error or a different result",
                  UserWarning, stacklevel=4)
    return True


def split_index(key: Any, device: Any) -> tuple[tuple, list]:
    """Turn a Python index into (static structure, index tensors); lists/arrays become tensors."""
    basic = _basic_index(key)
    if basic is not None:
        return basic, []
    from ember.creation import tensor as make_tensor

    if type(key) is list and _sequence_as_tuple(key):
        key = tuple(key)
    elif not isinstance(key, tuple):
        key = (key,)
    structure: list = []
    tensors: list = []
    for item in key:
        if isinstance(item, dispatch.Tensor):
            if item.dtype is dtypes.uint8:
                item = _uint8_mask(item)
            if item.dtype is not dtypes.bool_ and item.dtype.category != 1:
                raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors (got {item.dtype}); "
                                 "convert with .long(), e.g. x[(i // n).long()]")
            if item._device != device and item._device.type == "cpu":
                item = item.to(device)  # CPU indices of a device tensor move with it, as in PyTorch
            structure.append((TENSOR_SLOT, len(tensors)))
            tensors.append(item)
        elif isinstance(item, (list, tuple, range)) or (
                hasattr(item, "__array__") and not isinstance(item, (int, float))):
            # a nested sequence or a Python range is an integer (or bool) index, as in PyTorch
            t = make_tensor(list(item) if isinstance(item, range) else item, device=device)
            if len(t.shape) == 1 and t.shape[0] == 0:
                t = t.long()
            elif t.dtype is dtypes.uint8:
                t = _uint8_mask(t)
            structure.append((TENSOR_SLOT, len(tensors)))
            tensors.append(t)
        elif item is None or item is Ellipsis or isinstance(item, (int, slice, bool)):
            if isinstance(item, slice) and item.step is not None and item.step <= 0:
                raise ValueError(f"index: step must be greater than zero (got {item.step}); PyTorch has no negative "
                                 "strides: use x.flip(dim) to reverse")
            structure.append(item)
        elif hasattr(item, "__index__"):
            structure.append(int(item))
        else:
            raise IndexError(f"index: unsupported index element {item!r} of type {type(item).__name__}")
    return tuple(structure), tensors


def getitem_with(x: Any, index: tuple, index_tensors: Sequence[Any]) -> Any:
    return dispatch.apply(GETITEM, (x, *index_tensors), {"index": index})


def getitem(x: Any, key: Any) -> Any:
    index, tensors = split_index(key, x.device)
    return getitem_with(x, index, tensors)


def index_range(index: Any) -> tuple[int, int] | None:
    """``(min, max)`` of an integer index tensor's values, or None when there are none to read (an empty index, or
    a graph under construction). A CPU index is read with two ufunc reductions instead of two dispatched ops and
    their tensors (index_select, embedding: ~4 us a call)."""
    data = index._data
    if type(data) is np.ndarray and not dispatch.is_symbolic(index):
        if not data.size:
            return None
        return int_range(data)
    if not index.numel() or dispatch.is_symbolic(index):  # traced indices have no values to check
        return None
    return int(index.min()), int(index.max())


_MINIMUM, _MAXIMUM = np.minimum.reduce, np.maximum.reduce
SMALL_RANGE = 64  # elements up to which int_range reads Python ints (two ufunc reductions cost ~1.5-2.5 us each)


def int_range(data: Any) -> tuple[int, int]:
    """``(min, max)`` of a non-empty NumPy integer array as Python ints: a small one (the index of a gather, a
    batch's targets) through ``tolist``, a larger one by the ufuncs' own reductions.

    Example:
        >>> int_range(np.array([[3], [0], [7]]))
        (0, 7)
    """
    if data.size <= SMALL_RANGE:
        values = data.ravel().tolist()
        return min(values), max(values)
    return int(_MINIMUM(data, axis=None)), int(_MAXIMUM(data, axis=None))


def take_by_index(x: Any, dim: int, index: Any) -> Any:
    """``x[(slice(None),) * dim + (index,)]`` for an integer index tensor, without split_index's reading of the key
    (the structure is known); a CPU index of a device tensor moves with it, as split_index does."""
    if index._device is not x._device and index._device != x._device and index._device.type == "cpu":
        index = index.to(x._device)
    return getitem_with(x, _TAKE_STRUCTURES[dim] if dim < 8 else (slice(None),) * dim + ((TENSOR_SLOT, 0),), (index,))


_TAKE_STRUCTURES = tuple((slice(None),) * d + ((TENSOR_SLOT, 0),) for d in range(8))


def index_put(x: Any, index: tuple, index_tensors: Sequence[Any], value: Any, accumulate: bool = False) -> Any:
    if not isinstance(value, dispatch.Tensor):
        from ember.creation import tensor as make_tensor

        value = make_tensor(value, dtype=x.dtype, device=x.device)
    elif value.dtype is not x.dtype:
        value = dispatch.cast(value, x.dtype)
    return dispatch.apply(INDEX_PUT, (x, value, *index_tensors), {"index": index, "accumulate": accumulate})


# ---- cat, pad, gather, scatter ------------------------------------------------------------------
def _cat_vjp(ctx: Any, g: Any) -> tuple:
    dim = ctx.attrs["dim"]
    grads = []
    start = 0
    for shape, need in zip(ctx.input_meta, ctx.needs):
        size = shape[dim]
        if need:
            grads.append(g.narrow(dim, start, size))
        else:
            grads.append(None)
        start += size
    return tuple(grads)


def _cat_rule(*specs: Spec, dim: int) -> Spec:
    shape = list(specs[0].shape)
    shape[dim] = sum(s.shape[dim] for s in specs)
    return Spec(tuple(shape), specs[0].dtype, specs[0].device)


CAT = register(OpDef(
    name="cat", batch=batching.cat, category="movement", vjp=_cat_vjp,
    # torch's result layout: channels-last when every input suggests it, else row-major (NumPy kept a transposed order)
    impl=lambda xp, *xs, dim: layout.fresh_like_inputs(xp.concatenate(xs, axis=dim), xs),
    save="none", shape_rule=_cat_rule, onnx=to_onnx.cat, autocast="promote",
))


def _cat_array_vjp(ctx: Any, g: Any) -> tuple:
    dim = ctx.attrs["dim"]
    grads = []
    start = 0
    for shape, need in zip(ctx.input_meta, ctx.needs):
        size = shape[dim]
        grads.append(g[(slice(None),) * dim + (slice(start, start + size),)] if need else None)
        start += size
    return tuple(grads)


# Array gradient rule (OpDef.array_vjp): the views narrow() makes in the rule above.
CAT.array_vjp = _cat_array_vjp


# ---- stack: one op (it was unsqueeze of each input, then cat: 1 + n recorded ops) --------------------------
def _stack_vjp(ctx: Any, g: Any) -> tuple:
    dim = ctx.attrs["dim"]
    return tuple(g.select(dim, i) if need else None for i, need in enumerate(ctx.needs))


def _stack_array_vjp(ctx: Any, g: Any) -> tuple:
    lead = (slice(None),) * ctx.attrs["dim"]
    return tuple(g[lead + (i,)] if need else None for i, need in enumerate(ctx.needs))


def _stack_rule(*specs: Spec, dim: int) -> Spec:
    shape = list(specs[0].shape)
    shape.insert(dim, len(specs))
    return Spec(tuple(shape), specs[0].dtype, specs[0].device)


# ``dim`` is normalized (0 <= dim <= rank of the inputs), the inputs have one shape and one dtype (views.stack
# checks and promotes, as torch.stack).
STACK = register(OpDef(
    name="stack", batch=batching.stack, category="movement",
    impl=lambda xp, *xs, dim: layout.fresh_like_inputs(xp.stack(xs, axis=dim), xs, unsqueeze=dim),  # cat's layout
    vjp=_stack_vjp, save="none", shape_rule=_stack_rule, onnx=to_onnx.stack, autocast="promote",
))
STACK.array_vjp = _stack_array_vjp


def _pad_impl(xp: Any, x: Any, pad: tuple, value: float = 0.0) -> Any:
    if x.ndim == 0:  # only an empty pad reaches here (pad checks its length); NumPy refuses empty widths
        return x.copy()
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        widths[x.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        slices = tuple(slice(-lo if lo < 0 else None, hi if hi < 0 else None) for lo, hi in widths)
        x = x[slices]
        widths = [(max(lo, 0), max(hi, 0)) for lo, hi in widths]
    # torch's constant pad writes a fresh tensor in the input's suggested format (row-major for a transposed input)
    return layout.fresh_like_inputs(xp.pad(x, widths, mode="constant", constant_values=value), (x,))


def _pad_vjp(ctx: Any, g: Any) -> tuple:
    pad = ctx.attrs["pad"]
    negated = tuple(-p for p in pad)
    return (dispatch.apply(PAD, (g,), {"pad": negated, "value": 0.0}),)


def _pad_rule(x: Spec, pad: tuple, value: float = 0.0) -> Spec:
    shape = list(x.shape)
    for i in range(len(pad) // 2):
        shape[len(shape) - 1 - i] += pad[2 * i] + pad[2 * i + 1]
    return Spec(tuple(shape), x.dtype, x.device)


PAD = register(OpDef(name="pad", batch="leading", category="movement", impl=_pad_impl, vjp=_pad_vjp, save="none",
                     shape_rule=_pad_rule, onnx=to_onnx.pad))


def _gather_impl(xp: Any, x: Any, index: Any, dim: int) -> Any:
    if index.ndim != x.ndim:
        raise RuntimeError(f"gather: index tensor must have the same number of dimensions as input "
                           f"({index.ndim} vs {x.ndim})")
    if index.size:
        if index.__class__ is np.ndarray:  # (the methods' Python wrappers: ~1 us each)
            lo, hi = int_range(index)
        else:
            hi, lo = index.max(), index.min()
        if hi >= x.shape[dim] or lo < 0:  # torch refuses negative indices
            bad = int(hi) if hi >= x.shape[dim] else int(lo)
            raise RuntimeError(f"gather: index {bad} is out of bounds for dimension {dim} with size {x.shape[dim]}")
    if index.shape != x.shape and any(i != s for d, (i, s) in enumerate(zip(index.shape, x.shape))
                                      if d != dim):  # index smaller: crop x
        x = x[tuple(slice(None) if d == dim else slice(0, index.shape[d]) for d in range(x.ndim))]
    return take_along(xp, x, index, dim)


def _scatter_add_impl(xp: Any, x: Any, index: Any, src: Any, dim: int) -> Any:
    if index.size and (index.max() >= x.shape[dim] or index.min() < 0):
        bad = int(index.max()) if index.max() >= x.shape[dim] else int(index.min())
        raise RuntimeError(f"scatter_add/scatter: index {bad} is out of bounds for dimension {dim} with size "
                           f"{x.shape[dim]} (input shape {tuple(x.shape)})")
    out = x.copy()
    grids = xp.meshgrid(*(xp.arange(s) for s in index.shape), indexing="ij", sparse=True)
    full = tuple(index if d == dim else grids[d] for d in range(index.ndim))
    src = src[tuple(slice(0, s) for s in index.shape)]
    xp.add.at(out, full, src)
    return out


GATHER = register(OpDef(
    name="gather", batch=batching.gather, category="movement", impl=_gather_impl, nondiff_inputs=(1,),
    vjp=lambda ctx, g: (_zeros_like_shape(g, ctx.input_meta[0]).scatter_add(ctx.attrs["dim"], ctx.inputs[1], g), None),
    shape_rule=lambda x, index, dim: Spec(index.shape, x.dtype, x.device), onnx=to_onnx.gather,
))

SCATTER_ADD = register(OpDef(
    name="scatter_add", batch=batching.gather, category="movement", impl=_scatter_add_impl, nondiff_inputs=(1,),
    vjp=(lambda ctx, g: g, None, lambda ctx, g: g.gather(ctx.attrs["dim"], ctx.inputs[1])),
    shape_rule=lambda x, index, src, dim: x, onnx=to_onnx.scatter_add,
))


def _zeros_like_shape(g: Any, shape: tuple) -> Any:
    from ember.creation import zeros

    return zeros(shape, dtype=g.dtype, device=g.device)
