"""Batching rules: how each op record runs on a batch under ``ember.func.vmap`` (JAX's batching rules).

A rule is ``rule(op, args, bdims, attrs, size) -> (result, out_bdims)``: ``args`` are the op's inputs one
level below vmap (tensors carrying the batch dimension ``bdims[i]``, or ``None`` for unbatched inputs and
Python scalars); the rule runs ops on them (through dispatch, so lower levels of nested transforms and
autograd see them) and says where the batch dimension of each output is. Records choose their rule with
the ``batch`` field (:class:`ember.ops.registry.OpDef`): a name from :data:`GENERIC` or a function here;
unary/binary/ternary/cast records default to ``"elementwise"``.

``"loop"`` is the explicit fallback: the op runs once per sample and the results are stacked (a warning
names the op once per process). The records on it are listed, with reasons, in docs/func.md.

Example:
    >>> from ember.ops.registry import OPS
    >>> from ember.ops.batching import rule_for
    >>> rule_for(OPS["exp"]).__name__
    'elementwise'
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ember.ops import dispatch
from ember.ops.registry import OPS, OpDef

ELEMENTWISE_CATEGORIES = ("unary", "binary", "ternary", "cast")
_WARNED: set = set()


# ---- helpers on tensors one level below vmap ----------------------------------------------------------
def _is_tensor(value: Any) -> bool:
    return isinstance(value, dispatch.Tensor)


def is_batched(value: Any) -> bool:
    """True for a tensor with a batch dim at the innermost vmap level that holds it (vmap's batched values
    carry ``bdim``; ember/func/batched.py)."""
    data = getattr(value, "_data", None)
    # asked of the class: a graph value's attribute lookup raises (a traced tensor has no data to read)
    return bool(getattr(type(data), "replays_views", False)) and getattr(data, "bdim", None) is not None


def _apply(name: str, *args: Any, **attrs: Any) -> Any:
    return dispatch.apply(OPS[name], args, attrs)


def to_front(x: Any, bdim: int | None) -> Any:
    """``x`` with its batch dimension first (a view)."""
    if not bdim:
        return x
    dims = (bdim,) + tuple(d for d in range(x.ndim) if d != bdim)
    return _apply("permute", x, dims=dims)


def move(x: Any, source: int, destination: int) -> Any:
    """``x`` with dimension ``source`` moved to ``destination`` (both non-negative)."""
    if source == destination:
        return x
    order = [d for d in range(x.ndim) if d != source]
    order.insert(destination, source)
    return _apply("permute", x, dims=tuple(order))


def with_batch(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` batched at dimension 0: moved there, or broadcast to ``size`` copies when unbatched (a view)."""
    if bdim is not None:
        return to_front(x, bdim)
    return _apply("expand", x, shape=(size,) + tuple(x.shape))


def pad_rank(x: Any, rank: int) -> Any:
    """A front-batched ``x`` with ones inserted after the batch dim up to logical rank ``rank``."""
    missing = rank - (x.ndim - 1)
    if missing <= 0:
        return x
    shape = tuple(x.shape)
    return _apply("reshape", x, shape=shape[:1] + (1,) * missing + shape[1:])


def _logical_ndim(x: Any, bdim: int | None) -> int:
    return x.ndim - (bdim is not None)


def _norm(dim: int, rank: int) -> int:
    n = max(rank, 1)
    return dim % n if -n <= dim < n else dim  # out of range: let the op raise its own error


# ---- generic rules -------------------------------------------------------------------------------------
def elementwise(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Broadcasting ops: batch dims to the front, batched operands padded to the result's logical rank
    (unbatched operands and scalars broadcast from the right as they are)."""
    rank = 0
    for a, d in zip(args, bdims):
        if d is not None:
            r = a._data.ndim - 1
        elif isinstance(a, dispatch.Tensor):
            r = a._data.ndim
        else:
            continue
        if r > rank:
            rank = r
    for a, d in zip(args, bdims):
        if d is not None and (d or a._data.ndim - 1 != rank):  # move to the front, pad to the result's rank
            args = tuple(a if d is None else pad_rank(to_front(a, d), rank) for a, d in zip(args, bdims))
            break
    # the dispatcher's fast paths (the operands were promoted at the batched level already)
    if len(args) == 2 and op.category == "binary" and not attrs:
        return dispatch.binary(op, args[0], args[1]), 0
    if len(args) == 1 and op.category == "unary":
        return dispatch.unary(op, args[0], attrs), 0
    return dispatch.apply(op, args, attrs), _same(op, 0)


def _same(op: OpDef, bdim: int) -> Any:
    return bdim if op.num_outputs == 1 else (bdim,) * op.num_outputs


def leading(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Ops that already batch over leading dimensions (matrix ops, tril, pad): batch dims first; with more
    than one tensor input, unbatched ones are broadcast to the batch."""
    tensors = sum(1 for a in args if _is_tensor(a))
    moved = tuple(a if not _is_tensor(a) else (to_front(a, d) if d is not None else
                                                (with_batch(a, None, size) if tensors > 1 else a))
                  for a, d in zip(args, bdims))
    return dispatch.apply(op, moved, attrs), _same(op, 0)


def dims(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Ops with a ``dims`` attribute (reductions, flip): shifted past the batch dim; None means every
    logical dim."""
    x = to_front(args[0], bdims[0])
    rank = x.ndim - 1
    given = attrs.get("dims")
    if rank == 0 and given:  # dim 0 / -1 of a 0-d sample: a unit dim to reduce over, then the sample shape
        return _on_unit_dim(op, x, args, {**attrs, "dims": (1,)})
    if given is None:
        new = tuple(range(1, rank + 1))
    else:
        given = (given,) if isinstance(given, int) else given
        new = tuple(_norm(d, rank) + 1 for d in given)
    return dispatch.apply(op, (x,) + tuple(args[1:]), {**attrs, "dims": new}), _same(op, 0)


def dim(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Ops with one ``dim`` attribute (softmax, cumsum, sort, max over a dim): shifted past the batch dim;
    None (argmax over everything) flattens the logical dims first."""
    x = to_front(args[0], bdims[0])
    rank = x.ndim - 1
    given = attrs.get("dim")
    if given is None:
        keepdim = attrs.get("keepdim", False)
        flat = _apply("reshape", x, shape=(x.shape[0], -1) if rank else (x.shape[0], 1))
        out = dispatch.apply(op, (flat,) + tuple(args[1:]), {**attrs, "dim": 1, "keepdim": False})
        if keepdim:
            out = _apply("reshape", out, shape=(x.shape[0],) + (1,) * rank)
        return out, _same(op, 0)
    if rank == 0:
        return _on_unit_dim(op, x, args, {**attrs, "dim": 1})
    return dispatch.apply(op, (x,) + tuple(args[1:]), {**attrs, "dim": _norm(given, rank) + 1}), _same(op, 0)


def _on_unit_dim(op: OpDef, x: Any, args: tuple, attrs: dict) -> tuple:
    """A dim argument on 0-d samples (PyTorch accepts 0 and -1 there): run on (B, 1), give back (B,)."""
    out = dispatch.apply(op, (_apply("reshape", x, shape=(x.shape[0], 1)),) + tuple(args[1:]), attrs)
    if op.num_outputs == 1:
        return _apply("reshape", out, shape=(x.shape[0],)), 0
    return tuple(_apply("reshape", o, shape=(x.shape[0],)) for o in out), (0,) * op.num_outputs


def loop(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """The fallback: run the op once per sample and stack the results (slow; warns once per op)."""
    if op.name not in _WARNED:
        _WARNED.add(op.name)
        warnings.warn(f"vmap: there is no batching rule for {op.name!r}; it runs once per sample in a Python "
                      "loop (slow). See docs/func.md.", stacklevel=4)
    results = []
    for i in range(size):
        sample = tuple(a if d is None else _apply("getitem", a, index=(slice(None),) * d + (i,))
                       for a, d in zip(args, bdims))
        results.append(dispatch.apply(op, sample, dict(attrs)))
    if op.num_outputs == 1:
        return _stack(results, op.name), 0
    return tuple(_stack([r[k] for r in results], op.name) for k in range(op.num_outputs)), (0,) * op.num_outputs


def _stack(tensors: list, op_name: str = "") -> Any:
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"vmap: {op_name} gives outputs of different shapes for different samples "
                           f"({sorted(shapes)}): an output shape that depends on the data cannot be batched. "
                           "Compute it outside vmap, or use a fixed-size form (e.g. ember.where instead of a mask index).")
    parts = [_apply("reshape", t, shape=(1,) + tuple(t.shape)) for t in tensors]
    return dispatch.apply(OPS["cat"], tuple(parts), {"dim": 0})


GENERIC: dict[str, Callable[..., tuple]] = {
    "elementwise": elementwise, "leading": leading, "dims": dims, "dim": dim, "loop": loop,
}


def rule_for(op: OpDef) -> Callable[..., tuple] | None:
    """The record's batching rule (its ``batch`` field, by name or function), or None when it has none."""
    batch = op.batch
    if batch is None:
        return elementwise if op.category in ELEMENTWISE_CATEGORIES else None
    if isinstance(batch, str):
        return GENERIC[batch]
    return batch


# ---- shape ops -----------------------------------------------------------------------------------------
def reshape(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x, d = args[0], bdims[0]
    shape = tuple(attrs["shape"])
    full = tuple(x.shape)
    if shape == full[:d] + full[d + 1:]:  # to its own shape (rows of a matrix, squeeze of nothing): itself
        return x, d
    x = to_front(x, d)
    if -1 in shape:  # resolve against the logical size, so -1 never swallows the batch
        known = 1
        for s in shape:
            known *= s if s != -1 else 1
        logical = 1
        for s in x.shape[1:]:
            logical *= s
        shape = tuple(logical // known if s == -1 and known else s for s in shape)
    return dispatch.apply(op, (x,), {**attrs, "shape": (x.shape[0],) + shape}), 0


def permute(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x = to_front(args[0], bdims[0])
    rank = x.ndim - 1
    order = (0,) + tuple(_norm(d, rank) + 1 for d in attrs["dims"])
    return dispatch.apply(op, (x,), {**attrs, "dims": order}), 0


def expand(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    shape = tuple(attrs["shape"])
    x = pad_rank(to_front(args[0], bdims[0]), len(shape))
    target = tuple(x.shape[i + 1] if s == -1 else s for i, s in enumerate(shape))
    return dispatch.apply(op, (x,), {**attrs, "shape": (x.shape[0],) + target}), 0


def diagonal(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x = to_front(args[0], bdims[0])
    rank = x.ndim - 1
    new = {**attrs, "dim1": _norm(attrs.get("dim1", 0), rank) + 1, "dim2": _norm(attrs.get("dim2", 1), rank) + 1}
    return dispatch.apply(op, (x,), new), 0


def sum_to(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x = to_front(args[0], bdims[0])
    shape = tuple(attrs["shape"])
    lead = x.ndim - 1 - len(shape)
    axes = tuple(range(1, lead + 1)) + tuple(
        i + lead + 1 for i, s in enumerate(shape) if s == 1 and x.shape[i + lead + 1] != 1)
    if axes:
        x = _apply("sum", x, dims=axes, keepdim=True)
    return _apply("reshape", x, shape=(x.shape[0],) + shape), 0


def cat(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    rank = max(_logical_ndim(a, d) for a, d in zip(args, bdims))
    moved = tuple(with_batch(a, d, size) for a, d in zip(args, bdims))
    return dispatch.apply(op, moved, {**attrs, "dim": _norm(attrs["dim"], rank) + 1}), 0


def stack(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """stack(*xs, dim): every input batched at 0; the stacking dim (normalized by the op over rank + 1) moves by one."""
    moved = tuple(with_batch(a, d, size) for a, d in zip(args, bdims))
    return dispatch.apply(op, moved, {**attrs, "dim": attrs["dim"] + 1}), 0


def gather(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """gather(x, index, dim) / scatter_add(x, index, src, dim): every tensor batched at 0 (unbatched ones
    broadcast, which gather/scatter need: they index element by element)."""
    rank = _logical_ndim(args[0], bdims[0])
    moved = tuple(with_batch(a, d, size) if _is_tensor(a) else a for a, d in zip(args, bdims))
    if op.name == "scatter_add" and bdims[0] is None:
        moved = (_apply("clone", moved[0]),) + moved[1:]  # an expanded view must not be the scattered-into base
    return dispatch.apply(op, moved, {**attrs, "dim": _norm(attrs["dim"], rank) + 1}), 0


def _advanced_first(index: tuple) -> bool:
    """True when the index's advanced entries (tensors and ints next to them) form one group that NumPy keeps
    in place: then a batch slice prepended to the index keeps the batch dim first. In a getitem record's index
    structure every tuple is a tensor's slot (``(TENSOR_SLOT, k)``, ember/ops/movement.py): Python sequences
    in an index become tensors there."""
    slots = [i for i, item in enumerate(index) if isinstance(item, (tuple, int))]
    tensors = [i for i, item in enumerate(index) if isinstance(item, tuple)]
    if not tensors:
        return True
    return slots == list(range(slots[0], slots[-1] + 1))


def _batched_index(args: tuple, bdims: tuple, index: tuple, size: int) -> tuple | None:
    """Index tensors some of which are batched: (index tensors with their batch dim first, ones padded so they
    broadcast, the advanced group's first position, whether it is one group), or None for index forms the rules
    leave to the loop (an Ellipsis, booleans)."""
    if Ellipsis in index or any(isinstance(item, bool) for item in index) or any(
            a.dtype.name == "bool" for a in args):
        return None
    rank = max(_logical_ndim(a, d) for a, d in zip(args, bdims))
    tensors = tuple(pad_rank(to_front(a, d), rank) if d is not None else a for a, d in zip(args, bdims))
    slots = [i for i, item in enumerate(index) if isinstance(item, (tuple, int))]
    return tensors, rank, slots[0], slots == list(range(slots[0], slots[-1] + 1))


def _sample_numbers(like: Any, size: int, rank: int) -> Any:
    """arange(size) shaped (size, 1, ..., 1) on ``like``'s device: the batch dim as an index tensor."""
    numbers = like._device.xp.arange(size).reshape((size,) + (1,) * rank)
    return dispatch.Tensor._make(numbers, like._device, False)


def getitem(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Indexing. Unbatched index tensors: a full slice for the batch dim in front of the index. Batched index
    tensors (an embedding lookup of per-sample ids): into a shared tensor, the batched indices as they are; into
    a batched tensor, the sample numbers as one more index in front. Other layouts take the loop."""
    index = attrs["index"]
    if all(d is None for d in bdims[1:]):
        if not _advanced_first(index):
            return loop(op, args, bdims, attrs, size)
        x = to_front(args[0], bdims[0])
        return dispatch.apply(op, (x,) + tuple(args[1:]), {**attrs, "index": (slice(None),) + tuple(index)}), 0
    found = _batched_index(args[1:], bdims[1:], index, size)
    if found is None:
        return loop(op, args, bdims, attrs, size)
    tensors, rank, start, one_group = found
    if bdims[0] is None:  # NumPy puts the broadcast index dims (the batch first) where the group is
        return dispatch.apply(op, (args[0],) + tensors, attrs), start if one_group else 0
    if not one_group:
        return loop(op, args, bdims, attrs, size)
    marker = next(item for item in index if isinstance(item, tuple))[0]
    x = to_front(args[0], bdims[0])
    new = {**attrs, "index": ((marker, len(tensors)),) + tuple(index)}
    out = dispatch.apply(op, (x,) + tensors + (_sample_numbers(x, size, rank),), new)
    if start:  # the sample numbers split the group from the slices before it: NumPy put (B, *index dims) first
        out = _apply("permute", out, dims=_group_after(start, rank, out.ndim))
    return out, 0


def _group_after(start: int, rank: int, ndim: int) -> tuple:
    """(B, *index dims(rank), *sliced dims(start), *rest) -> (B, *sliced, *index dims, *rest)."""
    return (0,) + tuple(range(1 + rank, 1 + rank + start)) + tuple(range(1, 1 + rank)) + tuple(
        range(1 + rank + start, ndim))


def _group_first(start: int, rank: int, ndim: int) -> tuple:
    """The inverse of :func:`_group_after`."""
    return (0,) + tuple(range(1 + start, 1 + start + rank)) + tuple(range(1, 1 + start)) + tuple(
        range(1 + rank + start, ndim))


def index_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """getitem's adjoint: a scatter-add of g into zeros of the indexed shape; with batched index tensors the
    sample numbers index the batch dim of a (B, *shape) result (per-sample embedding gradients)."""
    index = attrs["index"]
    if all(d is None for d in bdims[1:]):
        if not _advanced_first(index):
            return loop(op, args, bdims, attrs, size)
        g = to_front(args[0], bdims[0])
        new = {**attrs, "index": (slice(None),) + tuple(index), "shape": (g.shape[0],) + tuple(attrs["shape"])}
        return dispatch.apply(op, (g,) + tuple(args[1:]), new), 0
    found = _batched_index(args[1:], bdims[1:], index, size)
    if found is None or not found[3]:
        return loop(op, args, bdims, attrs, size)
    tensors, rank, start = found[0], found[1], found[2]
    g = with_batch(args[0], bdims[0], size)
    if start:  # g is laid out as getitem's result: put the index dims first, as the scatter with B expects
        g = _apply("permute", g, dims=_group_first(start, rank, g.ndim))
    marker = next(item for item in index if isinstance(item, tuple))[0]
    new = {**attrs, "index": ((marker, len(tensors)),) + tuple(index), "shape": (size,) + tuple(attrs["shape"])}
    return dispatch.apply(op, (g,) + tensors + (_sample_numbers(g, size, rank),), new), 0


def index_put(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """x[index] = value with unbatched index tensors and a value that broadcasts from the right."""
    index = attrs["index"]
    if any(d is not None for d in bdims[2:]) or not _advanced_first(index) or Ellipsis in index:
        return loop(op, args, bdims, attrs, size)
    x = with_batch(args[0], bdims[0], size)
    if bdims[0] is None:
        x = _apply("clone", x)
    value = args[1]
    if bdims[1] is not None:
        # the value broadcasts against the selection x[index], which has the batch dim first
        with dispatch.grad_mode.no_grad():
            picked = dispatch.apply(OPS["getitem"], (x,) + tuple(args[2:]),
                                    {"index": (slice(None),) + tuple(index)})
        value = pad_rank(to_front(value, bdims[1]), picked.ndim - 1)
    new = {**attrs, "index": (slice(None),) + tuple(index)}
    return dispatch.apply(op, (x, value) + tuple(args[2:]), new), 0


# ---- products ------------------------------------------------------------------------------------------
def matmul(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Batched matmul: vectors become matrices, batched operands get ones up to the common logical rank so
    their batch dim lines up, and the added unit dims are squeezed at the end. matmul's impl runs a stack
    against a shared matrix as one GEMM over all rows and both-batched outer products (per-sample weight
    gradients) with one native pass (ember/ops/linalg.py)."""
    (a, b), (da, db) = args, bdims
    ra, rb = _logical_ndim(a, da), _logical_ndim(b, db)
    if ra == 0 or rb == 0:
        raise RuntimeError(f"matmul: both arguments need at least 1 dimension, got {ra}D and {rb}D")
    if da is not None:
        a = to_front(a, da)
    if db is not None:
        b = to_front(b, db)
    if ra == 1:  # (k,) -> (1, k)
        a = _apply("reshape", a, shape=tuple(a.shape[:-1]) + (1,) + tuple(a.shape[-1:]))
    if rb == 1:  # (k,) -> (k, 1)
        b = _apply("reshape", b, shape=tuple(b.shape) + (1,))
    rank = max(ra, rb, 2)
    if da is not None:
        a = pad_rank(a, rank)
    if db is not None:
        b = pad_rank(b, rank)
    if db is None and b.ndim == 2 and not getattr(getattr(a._data, "flags", None), "c_contiguous", True):
        # shared matrix, strided batch: one copy into rows, then one GEMM (contiguous ones: matmul's impl does it)
        shape = tuple(a.shape)
        rows = dispatch.apply(op, (_apply("reshape", a, shape=(-1, shape[-1])), b), attrs)
        out = _apply("reshape", rows, shape=shape[:-1] + (b.shape[-1],))
    elif (db is not None or b.ndim > 2) and a.shape[-1] == 1 and b.shape[-2] == 1 and (
            a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]):
        # an outer product of a shared and a batched vector: einsum writes it directly (NumPy's stacked matmul
        # loops over samples)
        out = _apply("einsum", a, b, equation="...ik,...kj->...ij")
    else:
        out = dispatch.apply(op, (a, b), attrs)  # the batched operand has the most dims: its batch dim leads
    if rb == 1:
        out = _apply("reshape", out, shape=tuple(out.shape[:-1]))
    if ra == 1:
        out = _apply("reshape", out, shape=tuple(out.shape[:-2]) + tuple(out.shape[-1:]))
    return out, 0


def matmul_t(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """matmul with transposed operands (a graph op): batch first, transpose the last two dims, :func:`matmul`.
    Two batched matrices (linear's per-sample weight gradient) are already a stack the op multiplies: one call."""
    if bdims[0] is not None and bdims[1] is not None and args[0].ndim == 3 and args[1].ndim == 3:
        return dispatch.apply(op, (to_front(args[0], bdims[0]), to_front(args[1], bdims[1])), attrs), 0
    moved, new_dims = [], []
    for x, d, flag in zip(args, bdims, (attrs.get("transpose_a"), attrs.get("transpose_b"))):
        x = to_front(x, d) if d is not None else x
        if flag:
            x = move(x, x.ndim - 1, x.ndim - 2)
        moved.append(x)
        new_dims.append(None if d is None else 0)
    return matmul(OPS["matmul"], tuple(moved), tuple(new_dims), {}, size)


def linear(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """x @ w.T + b: one GEMM over the batch when the weights are shared; batched matmul when they are
    batched too (model ensembles)."""
    x, w = args[0], args[1]
    dx, dw = bdims[0], bdims[1]
    bias = args[2] if len(args) > 2 else None
    db = bdims[2] if len(args) > 2 else None
    if dw is None and db is None:
        return dispatch.apply(op, (to_front(x, dx),) + tuple(args[1:]), attrs), 0
    rank = _logical_ndim(x, dx)
    wt = move(with_batch(w, dw, size), 1, 2)  # (B, in, out)
    if dx is None:
        xb = _apply("expand", x, shape=(size,) + tuple(x.shape))
    else:
        xb = to_front(x, dx)
    lead = tuple(xb.shape[1:-1])
    rows = _apply("reshape", xb, shape=(size, -1, xb.shape[-1]))  # (B, M, in)
    out = _apply("matmul", rows, wt)  # (B, M, out)
    if bias is not None:
        bb = with_batch(bias, db, size)
        out = _apply("add", out, _apply("reshape", bb, shape=(size, 1, bb.shape[-1])))
    out = _apply("reshape", out, shape=(size,) + lead + (out.shape[-1],))
    del rank
    return out, 0


def einsum(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """A new letter for the batch dim on every batched operand and in front of the output."""
    equation = attrs["equation"].replace(" ", "")
    lhs, _, rhs = equation.partition("->")
    inputs = lhs.split(",")
    used = set(equation)
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in used)
    if "->" not in equation:  # implicit output: letters seen once, in order, after any ellipsis
        counts: dict = {}
        for c in lhs.replace(",", "").replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c, n in counts.items() if n == 1))
    terms = [letter + t if d is not None else t for t, d in zip(inputs, bdims)]
    moved = tuple(to_front(a, d) if d is not None else a for a, d in zip(args, bdims))
    return dispatch.apply(op, moved, {**attrs, "equation": ",".join(terms) + "->" + letter + rhs}), 0


# ---- convolution and pooling: the batch folded into N ------------------------------------------------
def _fold(x: Any, bdim: int | None, size: int, spatial: int) -> tuple:
    """A batched image tensor as (B*N, C, ...): returns it and the logical N (None for an unbatched-image
    input of logical rank spatial + 1)."""
    x = to_front(x, bdim)
    if x.ndim - 1 == spatial + 1:  # (C, H, W) per sample: the batch is N
        return x, None
    shape = tuple(x.shape)
    return _apply("reshape", x, shape=(shape[0] * shape[1],) + shape[2:]), shape[1]


def _unfold(out: Any, n: int | None, size: int) -> Any:
    if n is None:
        return out
    shape = tuple(out.shape)
    return _apply("reshape", out, shape=(size, n) + shape[1:])


def folded(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Image ops whose first input is batched and the rest unbatched (conv with shared weights, pooling):
    the vmap batch joins the image batch N. Anything else takes the loop."""
    if any(d is not None for d in bdims[1:]) or bdims[0] is None:
        return loop(op, args, bdims, attrs, size)
    x, n = _fold(args[0], bdims[0], size, 2)
    new = dict(attrs)
    if "input_shape" in new:
        shape = tuple(new["input_shape"])
        new["input_shape"] = (size * shape[0],) + shape[1:] if n is not None else (size,) + shape
    out = dispatch.apply(op, (x,) + tuple(args[1:]), new)
    if op.num_outputs == 1:
        return _unfold(out, n, size), 0
    return tuple(_unfold(o, n, size) for o in out), (0,) * op.num_outputs


def max_pool_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """max_pool2d_backward(g, indices): both batched (the indices come from the batched forward)."""
    if bdims[0] is None or bdims[1] is None:
        return loop(op, args, bdims, attrs, size)
    g, n = _fold(args[0], bdims[0], size, 2)
    idx, _ = _fold(args[1], bdims[1], size, 2)
    shape = tuple(attrs["input_shape"])
    new = {**attrs, "input_shape": (size * shape[0],) + shape[1:] if n is not None else (size,) + shape}
    return _unfold(dispatch.apply(op, (g, idx), new), n, size), 0


def layer_norm(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Normalizes the trailing dims: batch first works as is while the affine parameters are shared."""
    if any(d is not None for d in bdims[1:]):
        return loop(op, args, bdims, attrs, size)
    return dispatch.apply(op, (to_front(args[0], bdims[0]),) + tuple(args[1:]), attrs), (0,) * op.num_outputs


def _images(x: Any, bdim: int | None, size: int) -> Any:
    """A batched image tensor as (B, N, C, H, W) (a logical (C, H, W) sample gets N = 1)."""
    x = with_batch(x, bdim, size)
    if x.ndim == 4:
        x = _apply("reshape", x, shape=(x.shape[0], 1) + tuple(x.shape[1:]))
    return x


def _channels_by_sample(x: Any) -> Any:
    """(B, N, C, H, W) -> (N, B*C, H, W): each sample's channels become their own group."""
    b, n, c = x.shape[0], x.shape[1], x.shape[2]
    return _apply("reshape", move(x, 0, 1), shape=(n, b * c) + tuple(x.shape[3:]))


def conv_weight_grad(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Per-sample weight gradients in one call: samples become groups, (N, B*C, H, W) against (N, B*O, H', W')
    with ``groups * B``, giving (B*O, C/groups, kh, kw)."""
    x, g = _images(args[0], bdims[0], size), _images(args[1], bdims[1], size)
    o = tuple(attrs["weight_shape"])
    new = {**attrs, "weight_shape": (size * o[0],) + o[1:], "groups": attrs["groups"] * size}
    out = dispatch.apply(op, (_channels_by_sample(x), _channels_by_sample(g)), new)
    return _apply("reshape", out, shape=(size,) + o), 0


def layer_norm_backward(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """(g, x, mean, rstd, *weight) -> (gx, gw, gb): gx from the op on the whole batch (it is elementwise in the
    samples); gw and gb, which the op sums over all leading dims, summed per sample here instead."""
    if len(args) > 4 and bdims[4] is not None:
        return loop(op, args, bdims, attrs, size)
    g, x, mean, rstd = (with_batch(a, d, size) for a, d in zip(args[:4], bdims[:4]))
    gx = dispatch.apply(op, (g, x, mean, rstd) + tuple(args[4:]), attrs)[0]
    count = attrs["count"]
    lead = tuple(range(1, g.ndim - count))
    xhat = _apply("mul", _apply("sub", x, mean), rstd)
    gw = _apply("mul", g, xhat)
    gb = g
    if lead:
        gw, gb = _apply("sum", gw, dims=lead), _apply("sum", gb, dims=lead)
    dtype = (args[4] if len(args) > 4 else args[1]).dtype
    gw, gb = (t if t.dtype == dtype else dispatch.cast(t, dtype) for t in (gw, gb))
    return (gx, gw, gb), (0, 0, 0)


def searchsorted(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """A shared 1-D sequence: the values' batch goes straight through; batched sequences use the op's
    row-per-sequence form, one row per sample (and per leading index)."""
    seq, values = args
    ds, dv = bdims
    if ds is None and seq.ndim == 1:
        return dispatch.apply(op, (seq, to_front(values, dv)), attrs), 0
    seq = with_batch(seq, ds, size)
    values = with_batch(values, dv, size)
    if seq.ndim == 2:  # one sequence per sample: the values flattened into one row each
        shape = tuple(values.shape)
        flat = _apply("reshape", values, shape=(size, -1))
        return _apply("reshape", dispatch.apply(op, (seq, flat), attrs), shape=shape), 0
    return dispatch.apply(op, (seq, values), attrs), 0
