"""View-style helpers built on the movement primitives (PyTorch names): view/reshape, transpose,
squeeze/unsqueeze, flatten/unflatten, expand, narrow, split/chunk, stack, repeat, movedim, and
device transfer.
"""
from __future__ import annotations

from typing import Any, Sequence

from ember.ops import dispatch
from ember.ops.movement import CAT, CONTIGUOUS, EXPAND, FLIP, PERMUTE, RESHAPE, TRIL, TRIU, getitem, infer_shape
from ember.ops.registry import OpDef, register
from ember.ops.reductions import normalize_dims

register(OpDef(
    name="to_device", category="movement", save="none",
    impl=lambda xp, x, device, source: __import__("ember.device", fromlist=["to_device"]).to_device(device)
    .backend.asarray(x),
    vjp=lambda ctx, g: (g.to(ctx.attrs["source"]),), onnx="Identity",
))


def _shape_arg(shape: Sequence[Any]) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def reshape(input: Any, *shape: Any) -> Any:
    target = infer_shape(_shape_arg(shape), input.numel(), "reshape", tuple(input.shape))
    if target == tuple(input.shape):
        return dispatch.apply(RESHAPE, (input,), {"shape": target}) if input._requires_grad else _alias(input)
    return dispatch.apply(RESHAPE, (input,), {"shape": target})


def _alias(input: Any) -> Any:
    """Same data, same history: what reshape to the same shape gives."""
    return dispatch.apply(RESHAPE, (input,), {"shape": tuple(input.shape)})


view = reshape


def view_as(input: Any, other: Any) -> Any:
    return reshape(input, tuple(other.shape))


def reshape_as(input: Any, other: Any) -> Any:
    return reshape(input, tuple(other.shape))


def permute(input: Any, *dims: Any) -> Any:
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} dims "
                           f"(shape {tuple(input.shape)})")
    dims = tuple(input._dim(d, "permute") for d in dims)
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute: dims {dims} must be a permutation of 0..{input.ndim - 1}")
    return dispatch.apply(PERMUTE, (input,), {"dims": dims})


def transpose(input: Any, dim0: int, dim1: int) -> Any:
    if input.ndim < 2 and input.ndim == 0:
        return input
    n = input.ndim
    dims = list(range(n))
    a, b = input._dim(dim0, "transpose"), input._dim(dim1, "transpose")
    dims[a], dims[b] = dims[b], dims[a]
    return dispatch.apply(PERMUTE, (input,), {"dims": tuple(dims)})


swapaxes = swapdims = transpose


def t(input: Any) -> Any:
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D; use .mT or "
                           "transpose(-2, -1)")
    return input if input.ndim < 2 else transpose(input, 0, 1)


def squeeze(input: Any, dim: Any = None) -> Any:
    shape = tuple(input.shape)
    if dim is None:
        target = tuple(s for s in shape if s != 1)
    else:
        dims = normalize_dims(dim, input.ndim, "squeeze") or ()
        target = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    return reshape(input, target)


def unsqueeze(input: Any, dim: int) -> Any:
    n = input.ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"unsqueeze: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    dim %= n
    shape = list(input.shape)
    shape.insert(dim, 1)
    return dispatch.apply(RESHAPE, (input,), {"shape": tuple(shape)})


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    if input.ndim == 0:
        return reshape(input, (1,))
    start, end = input._dim(start_dim, "flatten"), input._dim(end_dim, "flatten")
    shape = tuple(input.shape)
    size = 1
    for s in shape[start:end + 1]:
        size *= s
    return reshape(input, shape[:start] + (size,) + shape[end + 1:])


def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Any:
    d = input._dim(dim, "unflatten")
    shape = tuple(input.shape)
    inner = infer_shape(sizes, shape[d], "unflatten", shape)
    return reshape(input, shape[:d] + inner + shape[d + 1:])


def expand(input: Any, *sizes: Any) -> Any:
    sizes = _shape_arg(sizes)
    shape = tuple(input.shape)
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal to the "
                           f"number of dimensions in the tensor ({len(shape)})")
    lead = len(sizes) - len(shape)
    target = []
    for i, s in enumerate(sizes):
        current = shape[i - lead] if i >= lead else 1
        if s == -1:
            if i < lead:
                raise RuntimeError("expand: -1 is not allowed in a leading, non-existing dimension")
            s = current
        if current != 1 and current != s:
            raise RuntimeError(f"expand: the expanded size of the tensor ({s}) must match the existing size "
                               f"({current}) at non-singleton dimension {i}. Target sizes: {list(sizes)}. "
                               f"Tensor sizes: {list(shape)}")
        target.append(s)
    target = tuple(target)
    if target == shape:
        return input
    return dispatch.apply(EXPAND, (input,), {"shape": target})


def expand_as(input: Any, other: Any) -> Any:
    return expand(input, tuple(other.shape))


def broadcast_to(input: Any, shape: Sequence[int]) -> Any:
    return expand(input, tuple(shape))


def sum_to_size(input: Any, *size: Any) -> Any:
    from ember.ops.elementwise import sum_to

    return sum_to(input, _shape_arg(size))


def contiguous(input: Any) -> Any:
    if input._data.flags.c_contiguous:
        return input
    return dispatch.apply(CONTIGUOUS, (input,))


def narrow(input: Any, dim: int, start: int, length: int) -> Any:
    d = input._dim(dim, "narrow")
    index = (slice(None),) * d + (slice(start, start + length),)
    return getitem(input, index)


def select(input: Any, dim: int, index: int) -> Any:
    d = input._dim(dim, "select")
    return getitem(input, (slice(None),) * d + (index,))


def split(tensor: Any, split_size_or_sections: Any, dim: int = 0) -> tuple:
    d = tensor._dim(dim, "split")
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise RuntimeError(f"split: split_size must be positive, got {step}")
        sections = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size:
            raise RuntimeError(f"split: sections {sections} don't add up to the size {size} of dimension {d}")
    out, start = [], 0
    for length in sections:
        out.append(narrow(tensor, d, start, length))
        start += length
    return tuple(out)


def chunk(input: Any, chunks: int, dim: int = 0) -> tuple:
    size = input.shape[input._dim(dim, "chunk")]
    step = -(-size // chunks) if chunks > 0 else size
    return split(input, max(step, 1), dim)


def unbind(input: Any, dim: int = 0) -> tuple:
    d = input._dim(dim, "unbind")
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of tensors")
    # PyTorch skips legacy 1-D empty tensors; keep that for code written against it.
    nonempty = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = nonempty[0]
    d = ref._dim(dim, "cat")
    target = ref.dtype
    for t in nonempty[1:]:
        if t.ndim != ref.ndim:
            raise RuntimeError(f"cat: tensors must have the same number of dimensions: got {ref.ndim} and {t.ndim}")
        for i in range(ref.ndim):
            if i != d and t.shape[i] != ref.shape[i]:
                raise RuntimeError(f"cat: sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref.shape[i]} but got size {t.shape[i]} in dimension {i}")
        if t.dtype is not target:
            from ember.dtypes import promote_types

            target = promote_types(target, t.dtype)
    nonempty = [dispatch.cast(t, target) for t in nonempty]
    if len(nonempty) == 1:
        return nonempty[0] * 1 if nonempty[0]._requires_grad else nonempty[0].clone()
    return dispatch.apply(CAT, tuple(nonempty), {"dim": d})


concat = concatenate = cat


def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    shape = tuple(tensors[0].shape)
    for t in tensors[1:]:
        if tuple(t.shape) != shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got {list(shape)} and "
                               f"{list(t.shape)}")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return cat([unsqueeze(t, dim) for t in tensors], dim % n)


def hstack(tensors: Sequence[Any]) -> Any:
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Any]) -> Any:
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def flip(input: Any, dims: Any) -> Any:
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return dispatch.apply(FLIP, (input,), {"dims": tuple(input._dim(d, "flip") for d in dims)})


def repeat(input: Any, *sizes: Any) -> Any:
    sizes = _shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("repeat: number of repeat dims can not be smaller than number of dimensions of tensor")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    x = reshape(input, shape)
    interleaved, expanded, final = [], [], []
    for s, r in zip(shape, sizes):
        interleaved += [1, s]
        expanded += [r, s]
        final.append(s * r)
    return reshape(expand(reshape(x, interleaved), expanded), final)


def movedim(input: Any, source: Any, destination: Any) -> Any:
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    n = input.ndim
    source = [s % n for s in source]
    destination = [d % n for d in destination]
    order = [i for i in range(n) if i not in source]
    for d, s in sorted(zip(destination, source)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


def tril(input: Any, diagonal: int = 0) -> Any:
    return dispatch.apply(TRIL, (input,), {"diagonal": diagonal})


def triu(input: Any, diagonal: int = 0) -> Any:
    return dispatch.apply(TRIU, (input,), {"diagonal": diagonal})


def index_select(input: Any, dim: int, index: Any) -> Any:
    d = input._dim(dim, "index_select")
    if index.ndim > 1:
        raise IndexError(f"index_select: index must be 0-D or 1-D, got shape {tuple(index.shape)}")
    return getitem(input, (slice(None),) * d + (index.reshape(-1),))


def gather(input: Any, dim: int, index: Any) -> Any:
    from ember.ops.movement import GATHER

    return dispatch.apply(GATHER, (input, index), {"dim": input._dim(dim, "gather")})


def scatter_add(input: Any, dim: int, index: Any, src: Any) -> Any:
    from ember.ops.movement import SCATTER_ADD

    if src.dtype is not input.dtype:
        src = dispatch.cast(src, input.dtype)
    return dispatch.apply(SCATTER_ADD, (input, index, src), {"dim": input._dim(dim, "scatter_add")})


def scatter(input: Any, dim: int, index: Any, src: Any = None, value: Any = None) -> Any:
    """Out-of-place scatter: positions named by ``index`` take ``src`` (or ``value``)."""
    from ember.ops.elementwise import where
    from ember import creation

    d = input._dim(dim, "scatter")
    if src is None:
        src = creation.full(tuple(index.shape), value, dtype=input.dtype, device=input.device)
    if not isinstance(src, dispatch.Tensor):
        src = creation.full(tuple(index.shape), src, dtype=input.dtype, device=input.device)
    hit = scatter_add(creation.zeros(tuple(input.shape), dtype=input.dtype, device=input.device), d, index,
                      creation.ones(tuple(index.shape), dtype=input.dtype, device=input.device))
    placed = scatter_add(creation.zeros(tuple(input.shape), dtype=input.dtype, device=input.device), d, index, src)
    return where(hit > 0, placed / where(hit > 0, hit, 1).to(input.dtype), input)


def masked_fill(input: Any, mask: Any, value: Any) -> Any:
    from ember.ops.elementwise import where

    if isinstance(value, dispatch.Tensor) and value.ndim == 0 and not value._requires_grad:
        value = value.item()
    return where(mask, value, input)


def roll(input: Any, shifts: Any, dims: Any = None) -> Any:
    if dims is None:
        return roll(flatten(input), shifts, 0).reshape(tuple(input.shape))
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = input
    for s, d in zip(shifts, dims):
        size = out.shape[d]
        if size == 0:
            continue
        s %= size
        if s:
            out = cat([narrow(out, d, size - s, s), narrow(out, d, 0, size - s)], d)
    return out
