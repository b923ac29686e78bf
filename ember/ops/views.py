"""View-style helpers built on the movement primitives (PyTorch names): view/reshape, transpose,
squeeze/unsqueeze, flatten/unflatten, expand, narrow, split/chunk, stack, repeat, movedim, and
device transfer.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ember import dtypes
from ember.autograd.node import torch_named
from ember.autograd.torch_edges import record_inputs
from ember.ops import dispatch
from ember.ops.movement import (CAT, CLONE, CONTIGUOUS, EXPAND, FLIP, GATHER, INDEX_BACKWARD, PERMUTE, RESHAPE,
    SCATTER_ADD, STACK, TENSOR_SLOT, TRIL, TRIU, getitem, getitem_with, index_put, index_range, infer_shape,
    take_by_index)
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops import batching, layout, unsigned_ops, value_check
from ember.onnx import emitters as to_onnx
from ember.ops.reductions import normalize_dims, sum as _sum_all
from ember.dtypes import promote_types
from ember.ops.elementwise import _broadcast_shapes, sum_to, where
from ember import _numpy_names

register(OpDef(
    name="to_device", batch="elementwise", category="movement", save="none",
    impl=lambda xp, x, device, source: __import__("ember.device", fromlist=["to_device"]).to_device(device)
    .backend.asarray(x),
    vjp=lambda ctx, g: (g.to(ctx.attrs["source"]),), onnx=to_onnx.identity,
    shape_rule=lambda x, device, source: Spec(x.shape, x.dtype, __import__("ember.device", fromlist=["to_device"])
                                              .to_device(device)),
))


def _shape_arg(shape: Sequence[Any]) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _sizes_or_keyword(sizes: tuple, named: Any, op: str, keyword: str) -> tuple:
    """The sizes of ``x.reshape(2, 3)`` / ``x.reshape((2, 3))`` or of PyTorch's keyword form
    ``x.reshape(shape=(2, 3))`` (DiT's unpatchify writes that); both at once is refused, as PyTorch does."""
    if named is None:
        return sizes
    if sizes:
        raise TypeError(f"{op}() received an invalid combination of arguments: sizes given both positionally "
                        f"{tuple(sizes)} and as {keyword}={named!r}; pass one of them")
    return (named,)


def _plain_target(shape: Sequence[Any], numel: int) -> tuple | None:
    """``shape`` resolved against ``numel`` elements when it is plain Python ints (at most one -1) that fit, else
    None: the common call, checked without ``infer_shape``'s conversions (which also write the errors)."""
    known = 1
    infer = -1
    for i, s in enumerate(shape):
        if s.__class__ is not int:
            return None
        if s < 0:
            if s != -1 or infer >= 0:
                return None
            infer = i
        else:
            known *= s
    if infer < 0:
        return tuple(shape) if known == numel else None
    if known == 0 or numel % known:
        return None
    shape = list(shape)
    shape[infer] = numel // known
    return tuple(shape)


def reshape(input: Any, *sizes: Any, shape: Any = None) -> Any:
    shape = sizes if shape is None else _sizes_or_keyword(sizes, shape, "reshape", "shape")
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    data = input._data
    target = _plain_target(shape, data.size)
    if target is None:
        target = infer_shape(_shape_arg(shape), input.numel(), "reshape", tuple(input.shape))
    if target == data.shape:
        return dispatch.apply(RESHAPE, (input,), {"shape": target}) if input._requires_grad else _alias(input)
    return dispatch.apply(RESHAPE, (input,), {"shape": target})


def _alias(input: Any) -> Any:
    """Same data, same history: what reshape to the same shape gives."""
    return dispatch.apply(RESHAPE, (input,), {"shape": tuple(input.shape)})


def view(input: Any, *shape: Any, dtype: Any = None, size: Any = None) -> Any:
    """``reshape`` that never copies: where the strides cannot express the new shape it raises, as
    PyTorch's ``view`` does (a silent copy would cut in-place changes off from the original).
    ``view(dtype)`` reinterprets the bits instead (see ``view_dtype``).

    Example:
        >>> ember.zeros(2, 3).t().view(6)  # doctest: +SKIP
        RuntimeError: view size is not compatible with input tensor's size and stride ...
    """
    shape = _sizes_or_keyword(shape, size, "view", "size")
    if dtype is not None and not shape:
        return view_dtype(input, dtype)
    if len(shape) == 1 and isinstance(shape[0], dtypes.dtype):
        return view_dtype(input, shape[0])
    out = reshape(input, *shape)
    if dispatch.is_symbolic(input):
        return out
    # Only views are checked: a fresh result's layout is NumPy's choice (a reduction of a transposed array
    # may come back column-major where torch's is contiguous), and code that works in PyTorch must not fail here.
    if (input._base is not None and out._data.size
            and dispatch._owner(out._data) is not dispatch._owner(input._data)):
        raise RuntimeError(
            f"view: view size {list(out.shape)} is not compatible with input tensor's size {list(input.shape)} and "
            f"stride {list(input.stride())} (at least one dimension spans across two contiguous subspaces). "
            "Use .reshape(...) instead (it copies when it must), or .contiguous().view(...)."
        )
    return out


def view_dtype(input: Any, dtype: Any) -> Any:
    """The same memory read as another dtype (``x.view(ember.int32)`` on float32 gives the IEEE bits), as
    PyTorch's ``Tensor.view(dtype)``: same element size keeps the shape; another size rescales the last dimension,
    which must be contiguous. Not differentiable (the result does not require grad); writes show in both.

    Example:
        >>> ember.tensor([1.0]).view(ember.int32)  # doctest: +SKIP
        tensor([1065353216], dtype=ember.int32)
    """
    target = dtypes.to_dtype(dtype)
    if dispatch.is_symbolic(input):
        raise NotImplementedError("view(dtype): reinterpreting bits is not supported inside a traced graph; "
                                  "do it outside ember.compile or use .to(dtype) to convert values")
    data = input._data
    old_size, new_size = data.dtype.itemsize, np.dtype(target.np).itemsize
    if old_size != new_size:
        names = f"{input.dtype} as {target}"
        if data.ndim == 0:
            raise RuntimeError(f"view(dtype): self.dim() cannot be 0 to view {names} (different element sizes)")
        step = data.strides[-1] // old_size if data.shape[-1] > 1 else 1
        if step != 1:
            raise RuntimeError(f"view(dtype): self.stride(-1) must be 1 to view {names} (different element sizes), "
                               f"but got {step}; call .contiguous() first")
        if (data.shape[-1] * old_size) % new_size:
            raise RuntimeError(f"view(dtype): self.size(-1) must be divisible by {new_size // old_size} to view {names} "
                               f"(different element sizes), but got {data.shape[-1]}")
        if new_size > old_size:  # the view must start and step on whole elements of the new size
            ratio = new_size // old_size
            root = input if input._base is None else input._base
            known = root.__dict__.get("_storage_root")  # as ember/ops/strided.py's storage_offset
            root = root if known is None else known
            offset = 0
            if isinstance(data, np.ndarray) and isinstance(root._data, np.ndarray):
                offset = (data.__array_interface__["data"][0] - root._data.__array_interface__["data"][0]) // old_size
            if offset % ratio:
                raise RuntimeError(f"view(dtype): self.storage_offset() must be divisible by {ratio} to view {names} "
                                   f"(different element sizes), but got {offset}")
            for k in range(data.ndim - 1):
                if data.shape[k] > 1 and (data.strides[k] // old_size) % ratio:
                    raise RuntimeError(f"view(dtype): self.stride({k}) must be divisible by {ratio} to view {names} "
                                       f"(different element sizes), but got {data.strides[k] // old_size}")
    out = input.detach()  # shares the version counter (and the storage): writes through either show in the other
    out._data = data.view(target.np)
    return out


def view_as(input: Any, other: Any) -> Any:
    return view(input, tuple(other.shape))


def reshape_as(input: Any, other: Any) -> Any:
    return reshape(input, tuple(other.shape))


def permute(input: Any, *order: Any, dims: Any = None) -> Any:
    dims = order if dims is None else _sizes_or_keyword(order, dims, "permute", "dims")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    n = input._data.ndim
    if len(dims) == n and all(d.__class__ is int and 0 <= d < n for d in dims) and len(set(dims)) == n:
        return dispatch.apply(PERMUTE, (input,), {"dims": tuple(dims)})  # plain ints already normalized
    dims = _shape_arg(dims)
    if len(dims) != input.ndim:
        raise RuntimeError(f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} dims "
                           f"(shape {tuple(input.shape)})")
    dims = tuple(input._dim(d, "permute") for d in dims)
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError(f"permute: dims {dims} must be a permutation of 0..{input.ndim - 1}")
    return dispatch.apply(PERMUTE, (input,), {"dims": dims})


def transpose(input: Any, dim0: int, dim1: int) -> Any:
    n = input._data.ndim
    if n == 0:
        input._dim(dim0, "transpose"), input._dim(dim1, "transpose")
        return _new_view(input, "TransposeBackward0")
    dims = list(range(n))
    a, b = input._dim(dim0, "transpose"), input._dim(dim1, "transpose")
    dims[a], dims[b] = dims[b], dims[a]
    out = dispatch.apply(PERMUTE, (input,), {"dims": tuple(dims)})
    return out if out.grad_fn is None else torch_named(out, "TransposeBackward0")


swapaxes = swapdims = transpose


def t(input: Any) -> Any:
    n = input._data.ndim
    if n > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {n}D; use .mT or "
                           "transpose(-2, -1)")
    if n < 2:
        return _new_view(input, "TBackward0")
    out = dispatch.apply(PERMUTE, (input,), {"dims": (1, 0)})  # transpose(0, 1) without its own name
    return out if out.grad_fn is None else torch_named(out, "TBackward0")


def squeeze(input: Any, dim: Any = None, *, axis: Any = None) -> Any:
    if axis is not None:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("squeeze", dim, axis, None)
    shape = tuple(input.shape)
    if dim is None:
        target = tuple(s for s in shape if s != 1)
    else:
        dims = normalize_dims(dim, input.ndim, "squeeze") or ()
        target = tuple(s for i, s in enumerate(shape) if not (i in dims and s == 1))
    out = reshape(input, target)
    if out.grad_fn is None or out is input:
        return out
    return torch_named(out, "SqueezeBackward0" if dim is None else "SqueezeBackward1")


def unsqueeze(input: Any, dim: int = _numpy_names.REQUIRED, *, axis: Any = None) -> Any:
    if axis is not None or dim is _numpy_names.REQUIRED:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("unsqueeze", dim, axis, _numpy_names.REQUIRED)
    shape = input._data.shape
    n = len(shape) + 1
    if not -n <= dim < n:
        raise IndexError(f"unsqueeze: Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    dim %= n
    shape = shape[:dim] + (1,) + shape[dim:]
    out = dispatch.apply(RESHAPE, (input,), {"shape": shape})
    return out if out.grad_fn is None else torch_named(out, "UnsqueezeBackward0")


def flatten(input: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    if getattr(input, "is_quantized", False):  # ember.ao's quantized tensor keeps its quantizer
        return input.flatten(start_dim, end_dim)
    if input.ndim == 0:
        return reshape(input, (1,))
    start, end = input._dim(start_dim, "flatten"), input._dim(end_dim, "flatten")
    if start == end:  # torch returns the tensor itself (a 1-d x.flatten() is x: out=/in-place shape changes reach x)
        return input
    shape = input._data.shape
    size = 1
    for s in shape[start:end + 1]:
        size *= s
    target = shape[:start] + (size,) + shape[end + 1:]
    if start >= end:  # nothing merged (or start after end): reshape's own handling
        return reshape(input, target)
    return dispatch.apply(RESHAPE, (input,), {"shape": target})  # (its element count is the input's)


def unflatten(input: Any, dim: int, sizes: Sequence[int]) -> Any:
    d = input._dim(dim, "unflatten")
    shape = tuple(input.shape)
    inner = infer_shape(sizes, shape[d], "unflatten", shape)
    return reshape(input, shape[:d] + inner + shape[d + 1:])


def expand(input: Any, *sizes: Any, size: Any = None) -> Any:
    sizes = _shape_arg(_sizes_or_keyword(sizes, size, "expand", "size"))
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


def _new_view(input: Any, node_name: str) -> Any:
    """A new view of all of ``input`` (torch's no-op views: ``x.t()`` of a vector, ``x.expand(x.shape)``): a
    different object whose in-place metadata changes, ``requires_grad_`` and hooks stay its own, with a grad_fn."""
    out = dispatch.apply(PERMUTE, (input,), {"dims": tuple(range(input._data.ndim))})
    return out if out.grad_fn is None else torch_named(out, node_name)


# The public forms (Tensor.expand, torch.broadcast_to, ...) never return ``input`` itself; ember's own code calls the
# ones above, whose same-shape fast path returns ``input`` (no node, no view to make).
def expand_public(input: Any, *sizes: Any, size: Any = None) -> Any:
    out = expand(input, *sizes, size=size)
    return _new_view(input, "ExpandBackward0") if out is input else out


def expand_as_public(input: Any, other: Any) -> Any:
    out = expand(input, tuple(other.shape))
    return _new_view(input, "ExpandBackward0") if out is input else out


def broadcast_to_public(input: Any, shape: Sequence[int]) -> Any:
    out = expand(input, tuple(shape))
    return _new_view(input, "ExpandBackward0") if out is input else out


def sum_to_size(input: Any, *size: Any) -> Any:
    size = _shape_arg(size)
    if size == () and input.ndim == 0:  # torch's sum_to: an empty size is a full sum (int8 -> int64, a new tensor)
        return _sum_all(input)
    out = sum_to(input, size)
    if out is not input and not (out.dtype.is_floating_point or out.dtype.is_complex) and out.dtype is not dtypes.int64:
        out = out.to(dtypes.int64)  # torch's sum: bool and integers widen to int64 (NumPy's uint8 sum is uint64)
    return out


# ---- memory formats: the order of a tensor's dimensions in memory, fastest first --------------------------------
_CHANNELS_LAST = {"channels_last": (4, (1, 3, 2, 0)), "channels_last_3d": (5, (1, 4, 3, 2, 0))}


def format_name(memory_format: Any) -> str | None:
    """``torch.channels_last`` (an object with a ``name``) or its name; None for the default."""
    return None if memory_format is None else getattr(memory_format, "name", str(memory_format).split(".")[-1])


def is_contiguous(input: Any, memory_format: Any = None) -> bool:
    """Whether ``input`` is laid out densely in ``memory_format``'s order (row-major by default, NHWC for
    ``channels_last``); dimensions of size 1 may have any stride, as in PyTorch."""
    name = format_name(memory_format)
    shape = tuple(input.shape)
    if name in (None, "contiguous_format", "preserve_format"):
        order = tuple(range(len(shape) - 1, -1, -1))
    elif name in _CHANNELS_LAST:
        rank, order = _CHANNELS_LAST[name]
        if len(shape) != rank:
            return False
    else:
        raise RuntimeError(f"is_contiguous: unknown memory format {memory_format!r}; use torch.contiguous_format, "
                           "torch.channels_last or torch.channels_last_3d")
    if 0 in shape and name in (None, "contiguous_format", "preserve_format"):
        return True  # PyTorch: an empty tensor is (row-major) contiguous whatever its strides
    data = input._data
    strides = tuple(st // data.itemsize for st in data.strides)
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def suggest_memory_format(input: Any) -> str | None:
    """PyTorch's ``Tensor.suggest_memory_format()``: ``"channels_last"`` / ``"channels_last_3d"`` when the strides
    look so by c10's rule (:func:`strides_like`: the dims ordered C, W, H, N from fastest, ambiguous size-1 cases
    row-major), else None. The layout PyTorch's CPU convolution, pooling, group norm and resampling kernels give
    their result: a ``(1, C, H, W)`` tensor permuted from ``(1, 1, HW, C)`` is channels-last by
    ``is_contiguous(memory_format=)`` but not by this rule (its batch stride is ``C``), so torch's ``conv2d``
    returns it row-major, and a seeded ``dropout`` after it draws its mask in that order."""
    if input.ndim not in (4, 5) or dispatch.is_symbolic(input) or input._data.flags.c_contiguous:
        return None
    name = "channels_last" if input.ndim == 4 else "channels_last_3d"
    return name if strides_like(input, name) else None


def channels_last_format(input: Any) -> str | None:
    """``"channels_last"`` / ``"channels_last_3d"`` when ``input`` is contiguous in that format (size-1 dims ignored)
    and not also row-major, else None: the test PyTorch's CPU ``batch_norm`` makes for its result's layout (unlike
    :func:`suggest_memory_format`, a permuted ``(1, C, H, W)`` counts)."""
    if input.ndim not in (4, 5) or dispatch.is_symbolic(input) or input._data.flags.c_contiguous:
        return None
    name = "channels_last" if input.ndim == 4 else "channels_last_3d"
    return name if is_contiguous(input, name) else None


def contiguous(input: Any, memory_format: Any = None) -> Any:
    """A tensor with the same values laid out in ``memory_format`` (the input itself when it already is):
    ``x.contiguous(memory_format=torch.channels_last)`` keeps the NCHW shape with NHWC memory, as PyTorch."""
    name = format_name(memory_format)
    if name in _CHANNELS_LAST:
        rank, order = _CHANNELS_LAST[name]
        if input.ndim != rank:
            raise RuntimeError(f"required rank {rank} tensor to use {name} format, got a tensor of shape "
                               f"{tuple(input.shape)}")
        if is_contiguous(input, name):
            return input
        to_memory = tuple(reversed(order))  # NCHW -> NHWC (slowest first)
        back = tuple(to_memory.index(d) for d in range(rank))
        return contiguous(input.permute(to_memory)).permute(back)
    if name not in (None, "contiguous_format", "preserve_format"):
        raise RuntimeError(f"contiguous: unknown memory format {memory_format!r}")
    if input._data.flags.c_contiguous:
        return input
    if name == "preserve_format":  # torch's error, raised only where a copy is needed
        raise RuntimeError("preserve memory format is unsupported by the contiguous operator; use "
                           "torch.contiguous_format or torch.channels_last")
    return dispatch.apply(CONTIGUOUS, (input,))


def format_strides(shape: Sequence[int], name: str | None) -> tuple:
    """PyTorch's strides for a fresh tensor of ``shape`` in memory format ``name`` (``empty(..., memory_format=)``):
    row-major ones, or c10's ``get_channels_last_strides_2d/3d``, which give a size-1 channel dim stride 1 (an
    ``N1HW`` tensor: ``(H*W, 1, W, 1)``) and do not treat zero sizes as one."""
    if name not in _CHANNELS_LAST:
        return layout.contiguous_strides(shape)
    out = [0] * len(shape)
    step = 1
    for d in _CHANNELS_LAST[name][1]:
        out[d] = step
        step *= int(shape[d])
    return tuple(out)


def strides_like(input: Any, name: str) -> bool:
    """c10's ``is_channels_last_strides_2d/3d``: whether the strides look channels-last (ambiguous size-1 cases
    count as row-major); what ``Tensor.to(memory_format=)`` asks before it returns the tensor itself."""
    rank, order = _CHANNELS_LAST[name]
    shape, data = tuple(input.shape), input._data
    if len(shape) != rank or type(data) is not np.ndarray:
        return False
    strides = tuple(st // data.itemsize for st in data.strides)
    if strides[1] == 0:
        return False
    low = 0
    for d in order:
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * (shape[d] if shape[d] > 1 else 1)
    return True


def to_format(input: Any, memory_format: Any, owned: bool = False) -> Any:
    """PyTorch's ``empty_like(input, memory_format=...).copy_(input)``: the values in a tensor with the format's
    own strides (:func:`format_strides`, size-1 dims included). ``owned``: ``input`` is a fresh result no one
    else holds, which may be returned restrided instead of copied."""
    name = format_name(memory_format)
    out = contiguous(input, name)
    if out is input and not owned:
        out = dispatch.apply(CLONE, (input,))
    data = out._data
    if type(data) is np.ndarray and data.size:
        wanted = format_strides(data.shape, name)
        if layout.element_strides(data) != wanted:
            out._data = layout.with_strides(np, data, wanted)  # (only size-1 dims differ: a view of the same memory)
    return out


def to_alias_ok(input: Any, memory_format: Any) -> bool:
    """Whether ``input.to(memory_format=...)`` returns ``input`` itself (aten's ``to_will_alias``: the format is
    preserve, or the one ``suggest_memory_format`` reads from the strides)."""
    name = format_name(memory_format)
    if name in (None, "preserve_format"):
        return True
    suggested = next((n for n in _CHANNELS_LAST if strides_like(input, n)), "contiguous_format")
    return suggested == name


def narrow(input: Any, dim: int, start: int, length: int) -> Any:
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor; reshape it to 1-D first")
    d = input._dim(dim, "narrow")
    size = input.shape[d]
    if isinstance(start, dispatch.Tensor):
        start = int(start.item())
    if not -size <= start <= size:
        raise IndexError(f"narrow: start out of range (expected to be in range of [{-size}, {size}], but got {start}) "
                         f"for dim {d} of a tensor of shape {tuple(input.shape)}")
    start = start % size if start < 0 else start
    if length < 0:
        raise RuntimeError(f"narrow: length must be non-negative, got {length}")
    if start + length > size:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}) of dim {d} "
                           f"of a tensor of shape {tuple(input.shape)}; the largest length from {start} is "
                           f"{size - start}")
    index = (slice(None),) * d + (slice(start, start + length),)
    return getitem(input, index)


def select(input: Any, dim: int, index: int) -> Any:
    d = input._dim(dim, "select")
    size = input.shape[d]
    if isinstance(index, int) and not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension "
                         f"{d}")
    return getitem(input, (slice(None),) * d + (index,))


def split(tensor: Any, split_size_or_sections: Any = None, dim: int = 0, *, split_size: Any = None) -> tuple:
    """``torch.split(tensor, split_size_or_sections, dim)``; ``Tensor.split`` names its argument ``split_size``."""
    if (split_size_or_sections is None) == (split_size is None):
        raise TypeError("split() missing required argument 'split_size_or_sections' (or, as Tensor.split names it, "
                        "'split_size'); give exactly one")
    if split_size_or_sections is None:
        split_size_or_sections = split_size
    d = tensor._dim(dim, "split")
    size = tensor._data.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise RuntimeError(f"split: split_size must be positive, got {step}")
        sections = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size:
            raise RuntimeError(f"split: sections {sections} don't add up to the size {size} of dimension {d}")
    if any(length < 0 for length in sections):
        raise RuntimeError(f"split: split sizes must be non-negative, got {sections}")
    out, start = [], 0
    lead = (slice(None),) * d
    for length in sections:  # narrow(tensor, d, start, length), whose checks the sections already pass
        out.append(getitem_with(tensor, lead + (slice(start, start + length),), ()))
        start += length
    return _multi_output_views(out, "Split" if isinstance(split_size_or_sections, int) else "SplitWithSizes")


def chunk(input: Any, chunks: int, dim: int = 0, *, axis: Any = None) -> tuple:
    if axis is not None:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("chunk", dim, axis, 0)
    if chunks <= 0:
        raise RuntimeError(f"chunk: expects `chunks` to be greater than 0, got: {chunks}")
    size = input._data.shape[input._dim(dim, "chunk")]
    step = -(-size // chunks) if chunks > 0 else size
    return split(input, max(step, 1), dim)


def unbind(input: Any, dim: int = 0, *, axis: Any = None) -> tuple:
    if axis is not None:  # NumPy's name, as torch's argument parser
        dim = _numpy_names.dim_only("unbind", dim, axis, 0)
    d = input._dim(dim, "unbind")
    return _multi_output_views([select(input, d, i) for i in range(input.shape[d])], "Unbind")


def not_a_tensor_sequence(tensors: Any, op: str) -> None:
    """PyTorch's refusal of one tensor where a sequence of tensors belongs (``torch.stack(t)``): iterating it
    would silently stack or concatenate its rows."""
    if type(tensors) in (list, tuple):  # the common case: one check
        return
    # an ember Tensor (or subclass), told by its class chain: ember.tensor imports this module
    if any(c.__name__ == "Tensor" and c.__module__ == "ember.tensor" for c in type(tensors).__mro__):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be tuple of Tensors, not "
                        f"{type(tensors).__name__}")


def cat(tensors: Sequence[Any], dim: int = 0) -> Any:
    not_a_tensor_sequence(tensors, "cat")
    tensors = [t for t in tensors]
    if not tensors:
        raise RuntimeError("cat: expected a non-empty list of tensors")
    # PyTorch skips legacy 1-D empty tensors; keep that for code written against it.
    nonempty = [t for t in tensors if t._data.shape != (0,)] or tensors[:1]
    ref = nonempty[0]
    d = ref._dim(dim, "cat")
    target = ref.dtype
    ref_shape = ref._data.shape
    for t in nonempty[1:]:
        shape = t._data.shape
        if len(shape) != len(ref_shape):
            raise RuntimeError(f"cat: tensors must have the same number of dimensions: got {ref.ndim} and {t.ndim}")
        for i in range(len(ref_shape)):
            if i != d and shape[i] != ref_shape[i]:
                raise RuntimeError(f"cat: sizes of tensors must match except in dimension {d}. Expected size "
                                   f"{ref_shape[i]} but got size {shape[i]} in dimension {i}")
        if t.dtype is not target:
            target = promote_types(target, t.dtype)
    nonempty = [dispatch.cast(t, target) for t in nonempty]
    if len(nonempty) == 1:
        return nonempty[0] * 1 if nonempty[0]._requires_grad else nonempty[0].clone()
    return dispatch.apply(CAT, tuple(nonempty), {"dim": d})


concat = concatenate = cat


def stack(tensors: Sequence[Any], dim: int = 0) -> Any:
    not_a_tensor_sequence(tensors, "stack")
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    shape = tensors[0]._data.shape
    for t in tensors[1:]:
        if t._data.shape != shape:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got {list(shape)} and "
                               f"{list(t.shape)}")
    n = tensors[0].ndim + 1
    if not -n <= dim < n:
        raise IndexError(f"stack: Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    if len(tensors) == 1:  # (cat's copy of its one input)
        out = cat([unsqueeze(tensors[0], dim)], dim % n)
        return out if out.grad_fn is None else torch_named(out, "StackBackward0")
    target = tensors[0].dtype
    for t in tensors[1:]:
        if t.dtype is not target:
            target = promote_types(target, t.dtype)
    return dispatch.apply(STACK, tuple([dispatch.cast(t, target) for t in tensors]), {"dim": dim % n})


def hstack(tensors: Sequence[Any]) -> Any:
    not_a_tensor_sequence(tensors, "hstack")
    tensors = list(tensors)
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Any]) -> Any:
    not_a_tensor_sequence(tensors, "vstack")
    return cat([t.reshape(1, -1) if t.ndim == 1 else t for t in tensors], 0)


def flip(input: Any, *dims: Any, **kwargs: Any) -> Any:
    """``flip(x, dims)`` or, as the method, ``x.flip(0, 1)``."""
    if "dims" in kwargs:
        dims = (kwargs.pop("dims"),)
    if kwargs:
        raise TypeError(f"flip: unexpected keyword arguments {sorted(kwargs)}")
    dims = tuple(d for part in dims for d in ((part,) if isinstance(part, int) else tuple(part)))
    if input.ndim == 0:  # flip(0) of a 0-d tensor: a copy of it
        for d in dims:
            input._dim(d, "flip")
        return input.clone()
    normalized = [input._dim(d, "flip") for d in dims]
    for d in normalized:
        if normalized.count(d) > 1:
            raise RuntimeError(f"flip: dim {d} appears multiple times in the list of dims {dims}")
    return dispatch.apply(FLIP, (input,), {"dims": tuple(input._dim(d, "flip") for d in dims)})


def repeat(input: Any, *sizes: Any, repeats: Any = None) -> Any:
    sizes = _shape_arg(_sizes_or_keyword(sizes, repeats, "repeat", "repeats"))
    if len(sizes) < input.ndim:
        raise RuntimeError("repeat: number of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in sizes):  # checked before the reshapes below, where -1 would be inferred
        lead = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
        raise RuntimeError(f"repeat: Trying to create tensor with negative dimension "
                           f"{min(s * r for s, r in zip(lead, sizes))}: {[s * r for s, r in zip(lead, sizes)]}; "
                           "every repeat count must be >= 0")
    shape = (1,) * (len(sizes) - input.ndim) + tuple(input.shape)
    x = reshape(input, shape)
    interleaved, expanded, final = [], [], []
    for s, r in zip(shape, sizes):
        interleaved += [1, s]
        expanded += [r, s]
        final.append(s * r)
    out = reshape(expand(reshape(x, interleaved), expanded), final)
    # PyTorch's repeat always returns new memory; the reshape above may still be a (stride-0) view of input
    out = dispatch.apply(CLONE if all(r == 1 for r in sizes) else CONTIGUOUS, (out,), {})
    return out if out.grad_fn is None else record_inputs(torch_named(out, "RepeatBackward0"), (input,))


def movedim(input: Any, source: Any, destination: Any) -> Any:
    source = [source] if isinstance(source, int) else list(source)
    destination = [destination] if isinstance(destination, int) else list(destination)
    n = input.ndim
    if len(source) != len(destination):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({source} dims) should contain the "
                           f"same number of dims as destination ({destination} dims)")
    source = [input._dim(s, "movedim") for s in source]
    destination = [input._dim(d, "movedim") for d in destination]
    for name, dims in (("source", source), ("destination", destination)):
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"movedim: repeated dim in `{name}` ({dims})")
    order = [i for i in range(n) if i not in source]
    for d, s in sorted(zip(destination, source)):
        order.insert(d, s)
    return permute(input, order)


moveaxis = movedim


def _check_matrix(op: str, input: Any) -> None:
    # NumPy's tril/triu broadcast a vector to a square matrix; torch refuses (and a graph's shape rule kept
    # the vector's shape, so compiled code reshaped a (4, 4) result as (4,)).
    if input.dim() < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got shape {list(input.shape)}")


def tril(input: Any, diagonal: int = 0) -> Any:
    _check_matrix("tril", input)
    return dispatch.apply(TRIL, (input,), {"diagonal": diagonal})


def triu(input: Any, diagonal: int = 0) -> Any:
    _check_matrix("triu", input)
    return dispatch.apply(TRIU, (input,), {"diagonal": diagonal})


def _integer_index(op: str, index: Any) -> None:
    if not isinstance(index, dispatch.Tensor) or index.dtype not in (dtypes.int64, dtypes.int32):
        got = index.dtype if isinstance(index, dispatch.Tensor) else type(index).__name__
        raise RuntimeError(f"{op}(): Expected dtype int32/int64 for index, got {got}; pass integer indices "
                           "(index.long())")


def on_one_element(fn: Any, op: str, input: Any, dim: int, index: Any, *rest: Any, **kwargs: Any) -> Any:
    """``fn`` on a 0-d ``input`` read as a one-element vector (torch's rule for index_select, scatter, index_reduce,
    ...: dim 0 or -1, index and tensor operands of one element), the result back as 0-d."""
    if dim not in (0, -1):
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
    one = [r.reshape(1) if isinstance(r, dispatch.Tensor) else r for r in rest]
    return fn(input.reshape(1), 0, index.reshape(-1), *one, **kwargs).reshape(())


def index_select(input: Any, dim: int, index: Any) -> Any:
    if input._data.ndim == 0 and isinstance(index, dispatch.Tensor) and index.numel() == 1:
        return on_one_element(index_select, "index_select", input, dim, index)
    d = input._dim(dim, "index_select")
    _integer_index("index_select", index)
    if index.ndim > 1:
        raise IndexError(f"index_select: index must be 0-D or 1-D, got shape {tuple(index.shape)}")
    size = input._data.shape[d]
    bounds = index_range(index)
    if bounds is not None:
        lo, hi = bounds
        if hi >= size or lo < 0:  # PyTorch refuses negative indices here (unlike x[index])
            raise IndexError(f"index_select: index {hi if hi >= size else lo} is out of range for dimension {d} "
                             f"with size {size} (input shape {tuple(input.shape)})")
    out = take_by_index(input, d, index if index._data.ndim == 1 else index.reshape(-1))
    return out if out.grad_fn is None else torch_named(out, "IndexSelectBackward0")


def gather(input: Any, dim: int, index: Any) -> Any:
    _integer_index("gather", index)
    return dispatch.apply(GATHER, (input, index), {"dim": input._dim(dim, "gather")})


def _scatter_shapes(op: str, input: Any, dim: int, index: Any, src: Any) -> None:
    """PyTorch's rule: index has self's rank, and is no larger than self apart from ``dim`` nor than src."""
    d = input._dim(dim, op)
    ishape, sshape = tuple(index.shape), tuple(input.shape)
    srcshape = tuple(src.shape) if isinstance(src, dispatch.Tensor) else None
    if index.ndim != input.ndim and index.numel():
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as self tensor "
                           f"(index {list(ishape)}, self {list(sshape)})")
    if index.numel() and (any(i > s for k, (i, s) in enumerate(zip(ishape, sshape)) if k != d) or (
            srcshape is not None and len(srcshape) == len(ishape) and any(i > s for i, s in zip(ishape, srcshape)))):
        raise RuntimeError(f"{op}(): Expected index {list(ishape)} to be no larger than self {list(sshape)} apart "
                           f"from dimension {d} and to be no larger size than src {list(srcshape or ())}")


def scatter_add(input: Any, dim: int, index: Any, src: Any) -> Any:
    if input._data.ndim == 0 and isinstance(index, dispatch.Tensor) and index.numel() == 1:
        return on_one_element(scatter_add, "scatter_add", input, dim, index, src)
    _integer_index("scatter_add", index)
    _scatter_shapes("scatter_add", input, dim, index, src)
    if src.dtype is not input.dtype:
        raise RuntimeError(f"scatter_add(): Expected self.dtype to be equal to src.dtype, got {input.dtype} and "
                           f"{src.dtype}; convert src with .to({input.dtype})")
    return dispatch.apply(SCATTER_ADD, (input, index, src), {"dim": input._dim(dim, "scatter_add")})


def scatter(input: Any, dim: int, index: Any, src: Any = None, value: Any = None, *, reduce: str | None = None) -> Any:
    """Out-of-place scatter: positions named by ``index`` take ``src`` (or ``value``); ``reduce='add'`` or
    ``'multiply'`` combines them with what is there instead (PyTorch's legacy ``reduce=``, no gradient for
    multiply). The result keeps input's dtype."""
    from ember import creation

    if input._data.ndim == 0 and isinstance(index, dispatch.Tensor) and index.numel() == 1:
        return on_one_element(scatter, "scatter", input, dim, index, src, value=value, reduce=reduce)
    d = input._dim(dim, "scatter")
    _integer_index("scatter", index)
    _scatter_shapes("scatter", input, dim, index, src)
    if isinstance(src, dispatch.Tensor) and src.dtype is not input.dtype:
        raise RuntimeError(f"scatter(): Expected self.dtype to be equal to src.dtype, got {input.dtype} and "
                           f"{src.dtype}; convert src with .to({input.dtype})")
    if src is None:
        src = creation.full(tuple(index.shape), value, dtype=input.dtype, device=input.device)
    if not isinstance(src, dispatch.Tensor):
        src = creation.full(tuple(index.shape), src, dtype=input.dtype, device=input.device)
    if reduce is not None:
        if reduce == "add":
            return scatter_add(input, d, index, src)
        if reduce != "multiply":
            raise RuntimeError(f"scatter: reduce argument must be either 'add' or 'multiply', got {reduce!r}")
        xp = input._device.xp
        if index.numel() and bool(((index._data < 0) | (index._data >= input.shape[d])).any()):
            raise RuntimeError(f"scatter(): index out of bounds for dimension {d} with size {input.shape[d]}")
        data = input._data.copy()
        grids = list(xp.indices(index._data.shape, sparse=True))
        grids[d] = index._data
        xp.multiply.at(data, tuple(grids), src._data[tuple(slice(0, n) for n in index._data.shape)])
        return dispatch.Tensor._make(data, input._device, False)
    kind = input._data.dtype.kind
    counting = dtypes.float32 if kind == "b" else input.dtype  # bool + bool would saturate at True
    hit = scatter_add(creation.zeros(tuple(input.shape), dtype=counting, device=input.device), d, index,
                      creation.ones(tuple(index.shape), dtype=counting, device=input.device))
    # -0.0 + v is v for every v (0.0 + -0.0 would lose the sign of a scattered -0)
    base = creation.full(tuple(input.shape), -0.0 if kind in "fcV" else 0, dtype=counting, device=input.device)
    placed = scatter_add(base, d, index, src if kind != "b" else src.to(counting))
    # positions written twice (undefined order in PyTorch) get the mean; integers keep their dtype
    if kind in "fcV":
        average = placed / where(hit > 0, hit, 1).to(input.dtype)
    else:
        average = (placed // where(hit > 0, hit, 1)).to(input.dtype)
    return where(hit > 0, average, input)


def masked_fill(input: Any, mask: Any, value: Any, *, _inplace: bool = False) -> Any:
    value_check.require_number(value, "masked_fill")
    if not _inplace and isinstance(mask, dispatch.Tensor) and isinstance(input, dispatch.Tensor):
        # out of place, torch broadcasts input against a larger mask (masked_fill_ must keep input's shape)
        shape = _broadcast_shapes(tuple(input.shape), tuple(mask.shape))
        if shape != tuple(input.shape):
            input = expand(input, shape)
    if input.dtype in dtypes.FLOAT8_DTYPES:  # torch 2.13 has no CPU kernel for it
        raise NotImplementedError(f'"masked_fill" not implemented for \'F{input.dtype.name[1:]}\' (as in PyTorch); '
                                  "use torch.where(mask, value, x) or fill in float32 and convert")
    if isinstance(mask, dispatch.Tensor) and mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_fill: only boolean masks are supported, but got a mask with dtype {mask.dtype}; "
                           "pass a comparison (x > 0) or mask.bool()")
    if isinstance(value, dispatch.Tensor) and value.ndim > 0:
        raise RuntimeError(f"masked_fill: only supports a 0-dimensional value tensor, but got a tensor with "
                           f"{value.ndim} dimension(s) (shape {tuple(value.shape)}); for values per position use "
                           "torch.where(mask, value, input) or masked_scatter")
    if isinstance(value, dispatch.Tensor) and value.ndim == 0 and not value._requires_grad:
        value = value.item()
    if not isinstance(value, dispatch.Tensor) and isinstance(input, dispatch.Tensor):
        # the result keeps input's dtype, as torch's masked_fill (an int tensor filled with 2.5 holds 2), with
        # PyTorch's overflow check (300 into int8 raises; -2 into uint8 is 254)
        value = dtypes.checked_scalar(dtypes.python_scalar(value), input.dtype, "masked_fill")
        value = input.dtype.np.type(value).item() if input.dtype.np is not None else value
    if isinstance(mask, dispatch.Tensor):
        pairs = zip(reversed(tuple(mask.shape)), reversed(tuple(input.shape)))
        if mask.ndim > input.ndim or not all(m == s or m == 1 for m, s in pairs):
            raise RuntimeError(f"masked_fill: the mask of shape {tuple(mask.shape)} must broadcast to the input's "
                               f"shape {tuple(input.shape)}")
    unsigned_ops.refuse("masked_fill", input)
    out = where(mask, value, input)
    if type(out._data) is np.ndarray and not out._data.flags.c_contiguous:
        out = contiguous(out)  # torch: self.clone(MemoryFormat::Contiguous).masked_fill_(): row-major, whatever input's
    return out if out.grad_fn is None else record_inputs(torch_named(out, "MaskedFillBackward0"), (input,))


def roll(input: Any, shifts: Any, dims: Any = None) -> Any:
    if dims is None:
        return roll(flatten(input), shifts, 0).reshape(tuple(input.shape))
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dimensions must align, got {len(shifts)} shifts {shifts} and "
                           f"{len(dims)} dims {dims}")
    out = input
    for s, d in zip(shifts, dims):
        size = out.shape[d]
        if size == 0:
            continue
        s %= size
        if s:
            out = cat([narrow(out, d, size - s, s), narrow(out, d, 0, size - s)], d)
    if out is input:  # every shift a multiple of its size: still a new tensor, as torch (never input itself)
        out = input.clone()
    return out if out.grad_fn is None else torch_named(out, "RollBackward0")


def _multi_output_views(outs: list, name: str) -> tuple:
    """Mark the views of a multi-view function: PyTorch forbids in-place changes of them (with grad)."""
    if dispatch.grad_mode.STATE.enabled:
        node_name = name + "Backward0"  # torch's one node of all the pieces: SplitBackward0, ...
        for i, out in enumerate(outs):
            if out._base is not None and out._view_fn[1] is None:
                out._view_fn = (out._view_fn[0], ("multi", name, i))
            if out.grad_fn is not None:
                torch_named(out, node_name)
    return tuple(outs)


# ---- diagonal: a view, as in PyTorch -----------------------------------------------------------------
def _diagonal_impl(xp: Any, x: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    out = xp.diagonal(x, offset, dim1, dim2)
    flags = out.flags
    if not getattr(flags, "writeable", True) and getattr(x.flags, "writeable", True):
        flags.writeable = True  # NumPy hands out a read-only diagonal of a writable array: same memory
    return out


def _diagonal_rule(x: Spec, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Spec:
    rows, cols = x.shape[dim1], x.shape[dim2]
    length = max(0, min(rows - max(-offset, 0), cols - max(offset, 0)))
    rest = tuple(n for k, n in enumerate(x.shape) if k not in (dim1, dim2))
    return Spec(rest + (length,), x.dtype, x.device)


DIAGONAL = register(OpDef(
    name="diagonal", batch=batching.diagonal, category="movement", impl=_diagonal_impl, save="none", shape_rule=_diagonal_rule,
    vjp=lambda ctx, g: (scatter_view_grad(g, ctx.input_meta[0], (("diagonal", _plain_attrs(ctx.attrs)),)),),
    view=True, onnx=to_onnx.diagonal,
))


def _strided_view(xp: Any, x: Any, shape: tuple, strides: tuple, writeable: bool) -> Any:
    """A view of ``x``'s memory with byte ``strides`` (``Tensor.unfold``'s windows), or None where the
    backend has no strided views (the stand-in device). On NumPy the view's ``base`` is the array owning
    the memory, so ember tracks it as a view; overlapping windows are read-only (writing one element
    through two windows has no defined result)."""
    if xp is np:
        owner = x
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        try:
            offset = x.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
            out = np.ndarray(shape, x.dtype, buffer=owner, offset=offset, strides=strides)
        except (TypeError, ValueError, BufferError):  # an owner without a plain buffer (rare): NumPy's helper
            out = np.lib.stride_tricks.as_strided(x, shape, strides)
        if (not writeable or not x.flags.writeable) and out.flags.writeable:  # expanded input: read-only too
            out.flags.writeable = False
        return out
    tricks = getattr(getattr(xp, "lib", None), "stride_tricks", None)
    return None if tricks is None else tricks.as_strided(x, shape, strides)  # CuPy


def _unfold_geometry(shape: tuple, dimension: int, size: int, step: int) -> tuple:
    length = shape[dimension] if shape else 1
    count = (length - size) // step + 1
    return count, tuple(shape[:dimension]) + (count,) + tuple(shape[dimension + 1:]) + (size,)


def _unfold_impl(xp: Any, x: Any, dimension: int, size: int, step: int) -> Any:
    if x.ndim == 0:  # PyTorch: a 0-d tensor unfolds to shape (size,)
        return x.reshape(1)[:size]
    count, shape = _unfold_geometry(x.shape, dimension, size, step)
    st = x.strides
    strides = st[:dimension] + (st[dimension] * step,) + st[dimension + 1:] + (st[dimension],)
    out = _strided_view(xp, x, shape, strides, writeable=step >= size or count <= 1)
    if out is None:  # no strided views on this backend: the windows gathered into new memory
        picks = (np.arange(count)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
        taken = xp.take(x, xp.asarray(picks), axis=dimension)
        out = xp.moveaxis(taken.reshape(x.shape[:dimension] + (count, size) + x.shape[dimension + 1:]),
                          dimension + 1, -1)
    return out


def _unfold_rule(x: Spec, dimension: int, size: int, step: int) -> Spec:
    if not x.shape:
        return Spec((size,), x.dtype, x.device)
    return Spec(_unfold_geometry(tuple(x.shape), dimension, size, step)[1], x.dtype, x.device)


def _unfold_batch(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    x = batching.to_front(args[0], bdims[0])
    return dispatch.apply(op, (x,), {**attrs, "dimension": attrs["dimension"] + 1}), 0


UNFOLD = register(OpDef(
    name="unfold", batch=_unfold_batch, category="movement", impl=_unfold_impl, save="none", shape_rule=_unfold_rule,
    vjp=lambda ctx, g: (scatter_view_grad(g, ctx.input_meta[0], (("unfold", _plain_attrs(ctx.attrs)),)),),
    view=True, onnx=to_onnx.unfold,
))


def unfold(input: Any, dimension: int, size: int, step: int) -> Any:
    """``Tensor.unfold``: windows of ``size`` every ``step`` along ``dimension``, as a new last dim; a view of
    ``input`` (writes to it show in the windows; windows that overlap are read-only), as in PyTorch.

    Example:
        >>> ember.arange(5.0).unfold(0, 2, 2)
        tensor([[0., 1.],
                [2., 3.]])
    """
    dim = dimension % max(input.ndim, 1) if -max(input.ndim, 1) <= dimension < max(input.ndim, 1) else None
    if dim is None:
        raise IndexError(f"unfold: dimension {dimension} is out of range for a tensor of {input.ndim} dimension(s)")
    length = input.shape[dim] if input.ndim else 1
    if size > length:
        raise RuntimeError(f"unfold: maximum size for tensor at dimension {dim} is {length} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"unfold: step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"unfold: size is {size} but must be >= 0")
    return dispatch.apply(UNFOLD, (input,), {"dimension": dim, "size": int(size), "step": int(step)})


def diagonal(input: Any, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The diagonal over dims (dim1, dim2), appended as the last dim; a view (writes reach ``input``).

    Example:
        >>> ember.diagonal(ember.eye(3) * 2)
        tensor([2., 2., 2.])
    """
    if input.ndim < 2:
        raise RuntimeError(f"diagonal: expected a tensor with at least 2 dims, got shape {tuple(input.shape)}")
    d1, d2 = input._dim(dim1, "diagonal"), input._dim(dim2, "diagonal")
    if d1 == d2:
        raise RuntimeError(f"diagonal: dim1 and dim2 cannot be the same dimension ({dim1})")
    attrs = {"offset": int(offset), "dim1": d1, "dim2": d2}
    out = dispatch.apply(DIAGONAL, (input,), attrs)
    if dispatch.is_symbolic(input) and not getattr(input._data, "replays_views", False):  # vmap: the view op
        # a graph records the diagonal record itself (ONNX: Gather of static positions); still a view for
        # in-place writes: the graph carries them back into ``input``
        input._data.interpreter.mark_view(out, input, "diagonal", attrs)
    return out


# ---- view replay: how in-place changes of views reach their base (PyTorch's CopySlices) --------------------
def _plain_attrs(attrs: dict) -> tuple:
    return tuple(sorted(attrs.items()))


def plain_steps(steps: tuple) -> tuple:
    """A view's ``_view_fn`` chain ((OpDef, attrs), ...) as plain, serializable ((name, attrs items), ...)."""
    return tuple((op.name, _plain_attrs(attrs)) for op, attrs in steps)


def _replay(xp: Any, base: Any, steps: tuple) -> Any:
    out = base
    for name, attrs in steps:
        out = OPS[name].impl(xp, out, **dict(attrs))
    return out


def view_positions(shape: tuple, steps: tuple) -> np.ndarray:
    """For each element of the view ``steps`` make of a base of ``shape``: its flat (C-order) index there.

    Example:
        >>> view_positions((2, 3), (("permute", (("dims", (1, 0)),)),)).tolist()
        [[0, 3], [1, 4], [2, 5]]
    """
    size = 1
    for n in shape:
        size *= n
    return np.ascontiguousarray(_replay(np, np.arange(size, dtype=np.int64).reshape(shape), steps))


def _positions_tensor(shape: tuple, steps: tuple, like: Any) -> Any:
    from ember.creation import tensor

    return tensor(view_positions(tuple(shape), steps), device=like.device)


_FLAT = ((TENSOR_SLOT, 0),)


def scatter_view_grad(g: Any, shape: tuple, steps: tuple) -> Any:
    """The adjoint of a view: ``g``'s elements summed back where the view reads them in a base of ``shape``.

    Built from index ops, so it is differentiable again (second order through views).
    """
    positions = _positions_tensor(shape, steps, g)
    size = int(np.prod(shape, dtype=np.int64))
    flat = dispatch.apply(INDEX_BACKWARD, (g, positions), {"index": _FLAT, "shape": (size,)})
    return reshape(flat, tuple(shape))


@dataclass(eq=False)
class _TorchNamedOp(OpDef):
    """An op record whose backward node carries PyTorch's own name (``CopySlices``, ``AsStridedBackward0``)."""

    torch_name: str = ""

    @property
    def backward_name(self) -> str:
        return self.torch_name


def _copy_slices_impl(xp: Any, base: Any, value: Any, steps: tuple) -> Any:
    out = xp.array(base, copy=True)  # an array even for a 0-d base that came back as a NumPy scalar
    _replay(xp, out, steps)[...] = value
    return out


def _copy_slices_vjp(ctx: Any, g: Any) -> tuple:
    """One function: both gradients read the overwritten positions. The base's is g with them zeroed,
    the value's is g at them (the engine sums a broadcast value back to its shape)."""
    shape = tuple(ctx.input_meta[0])
    positions = _positions_tensor(shape, ctx.attrs["steps"], g)
    flat = reshape(g, -1)
    grad_base = reshape(index_put(flat, _FLAT, [positions], 0.0), shape) if ctx.needs[0] else None
    return grad_base, (getitem_with(flat, _FLAT, [positions]) if ctx.needs[1] else None)


# base' = base with the view's elements replaced by value; recorded (not run) by in-place ops on views.
COPY_SLICES = register(_TorchNamedOp(
    name="copy_slices", batch="loop", category="movement", impl=_copy_slices_impl, vjp=_copy_slices_vjp, save="none",
    shape_rule=lambda base, value, steps: base, torch_name="torch::autograd::CopySlices",
))

# A view re-derived from its base after the base (or another view) changed in place.
VIEW_REPLAY = register(_TorchNamedOp(
    name="view_replay", batch="loop", category="movement", impl=lambda xp, base, steps: _replay(xp, base, steps), save="none",
    vjp=lambda ctx, g: (scatter_view_grad(g, ctx.input_meta[0], ctx.attrs["steps"]),),
    torch_name="AsStridedBackward0",
))
