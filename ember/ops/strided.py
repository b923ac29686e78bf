"""``as_strided``: a view of a tensor's memory with any sizes, element strides and storage offset, and
``Tensor.storage_offset``, as in PyTorch.

ember's storage is the memory of a view's root tensor (``x._base``, or ``x`` itself); the record keeps the
offset from ``x``'s first element and ``x``'s strides, so its gradient reaches exactly the elements of ``x`` at
the positions the view reads (through ``x``'s own autograd history). Overlapping views are read-only, as ``Tensor.unfold``'s overlapping windows are (writing one element
through two positions has no defined result).

Example:
    >>> x = ember.arange(6.0)
    >>> x.as_strided((2, 3), (1, 1))
    tensor([[0., 1., 2.],
            [1., 2., 3.]])
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember.interpreters import SymbolicValue
from ember.ops import batching, dispatch, views
from ember.ops.registry import OpDef, Spec, register
from ember.ops.movement import INDEX_BACKWARD
from ember.ops.views import _FLAT, plain_steps, reshape, view_positions

_EXACT_OVERLAP_LIMIT = 1 << 20  # above this many elements, a view the stride test cannot settle is read-only


def _positions(size: tuple, stride: tuple, offset: int) -> np.ndarray:
    """The memory position (in elements) each element of the view reads."""
    positions = np.full(size, offset, dtype=np.int64)
    for dim, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[dim] = n
        positions = positions + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    return positions


def _strides_separate(size: tuple, stride: tuple) -> bool:
    """True when, sorted by stride, each stride passes the extent of the smaller dims: then no two elements
    share a position (the common case: contiguous, transposed, sliced or windowed without overlap)."""
    extent = 0
    for s, n in sorted((s, n) for n, s in zip(size, stride) if n > 1):
        if s <= extent:
            return False
        extent += s * (n - 1)
    return True


def _overlaps(size: tuple, stride: tuple) -> bool:
    """Whether two elements of the view share a memory position. The stride test settles most views at no
    cost; the rest are checked exactly when small, and taken as overlapping (read-only, never wrong) when large."""
    if math.prod(size) <= 1 or _strides_separate(size, stride):
        return False
    if math.prod(size) <= _EXACT_OVERLAP_LIMIT:
        flat = _positions(size, stride, 0).reshape(-1)
        return np.unique(flat).size != flat.size
    return True


def _as_strided_impl(xp: Any, x: Any, size: tuple, stride: tuple, offset: int, in_stride: tuple = ()) -> Any:
    """``offset`` counts from ``x``'s first element (it may be negative: storage before ``x``)."""
    itemsize = x.dtype.itemsize
    if xp is np:
        owner = x
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        start = x.__array_interface__["data"][0] - owner.__array_interface__["data"][0]
        byte_strides = tuple(s * itemsize for s in stride)
        try:
            out = np.ndarray(size, x.dtype, buffer=owner, offset=start + offset * itemsize, strides=byte_strides)
        except (TypeError, ValueError):  # an owner that is not one contiguous buffer (NumPy's own strided views)
            if offset < 0:
                raise
            tricks = np.lib.stride_tricks
            first = tricks.as_strided(x, shape=(offset + 1,), strides=(itemsize,))[offset:]  # x's memory + offset
            out = tricks.as_strided(first, shape=size, strides=byte_strides)
        if (_overlaps(size, stride) or not x.flags.writeable) and out.flags.writeable:
            out.flags.writeable = False
        return out
    tricks = getattr(getattr(xp, "lib", None), "stride_tricks", None)
    if tricks is not None and offset >= 0:  # CuPy: a view of the device memory
        flat = x.reshape(-1)
        return tricks.as_strided(flat[offset:] if offset else flat, size, tuple(s * itemsize for s in stride))
    # a backend without strided views (the stand-in device): the elements gathered into new memory
    index = _input_indices(tuple(x.shape), in_stride or _c_strides(x.shape), size, stride, offset)[0]
    return xp.take(x.reshape(-1), xp.asarray(index)).reshape(size)


def _c_strides(shape: Sequence[int]) -> tuple:
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def _input_indices(shape: tuple, in_stride: tuple, size: tuple, stride: tuple, offset: int) -> tuple:
    """For each element of the view: the flat index of the input element at the same memory position, and
    whether there is one (a view may read storage outside the input)."""
    wanted = _positions(size, stride, offset).reshape(-1)
    have = _positions(shape, in_stride, 0).reshape(-1)
    order = np.argsort(have, kind="stable")
    ordered = have[order]
    at = np.clip(np.searchsorted(ordered, wanted), 0, max(ordered.size - 1, 0))
    found = ordered[at] == wanted if ordered.size else np.zeros(wanted.shape, dtype=bool)
    return np.where(found, order[at] if ordered.size else 0, 0), found


def _as_strided_vjp(ctx: Any, g: Any) -> tuple:
    """``g``'s elements summed onto the input elements at the memory positions the view read, worked out from
    the input's strides at record time (so views of transposed or sliced tensors get exact gradients)."""
    from ember.creation import tensor

    shape, a = tuple(ctx.input_meta[0]), ctx.attrs
    index, found = _input_indices(shape, tuple(a["in_stride"]), tuple(a["size"]), tuple(a["stride"]), a["offset"])
    flat = reshape(g, -1)
    if not found.all():  # storage outside the input: those elements' gradients belong to no input element
        flat = flat * tensor(found.astype(np.float64), dtype=g.dtype, device=g.device)
    size = int(np.prod(shape, dtype=np.int64))
    out = dispatch.apply(INDEX_BACKWARD, (flat, tensor(index, device=g.device)), {"index": _FLAT, "shape": (size,)})
    return (reshape(out, shape),)


def _as_strided_batch(op: OpDef, args: tuple, bdims: tuple, attrs: dict, size: int) -> tuple:
    """Under vmap each sample's strides and offset count in that sample's own (contiguous) memory, as with
    torch.func's rule for samples laid out one after another."""
    x = views.contiguous(batching.to_front(args[0], bdims[0]))
    per_sample = math.prod(x.shape[1:])
    batched = {"size": (size,) + tuple(attrs["size"]), "stride": (per_sample,) + tuple(attrs["stride"]),
               "offset": attrs["offset"], "in_stride": _c_strides(x.shape)}
    return dispatch.apply(op, (x,), batched), 0


def _as_strided_onnx(b: Any, n: Any) -> str:
    """ONNX: Gather of the static flat positions the view reads (sizes are known when exporting)."""
    shape = tuple(int(d) for d in n.in_specs[0].shape)
    a = n.attrs
    index, found = _input_indices(shape, tuple(a["in_stride"]), tuple(a["size"]), tuple(a["stride"]), a["offset"])
    if not found.all():
        raise NotImplementedError("ONNX export of as_strided: the view reads memory outside its input tensor; "
                                  "take the view of the whole tensor instead")
    flat = b.node("Reshape", [n.inputs[0], b.ints([-1])])
    return b.node("Gather", [flat, b.const(index.reshape(tuple(a["size"])).astype(np.int64))], axis=0)


AS_STRIDED = register(OpDef(
    name="as_strided", batch=_as_strided_batch, category="movement", impl=_as_strided_impl, save="none",
    shape_rule=lambda x, size, stride, offset, in_stride=(): Spec(tuple(size), x.dtype, x.device),
    vjp=_as_strided_vjp, view=True, onnx=_as_strided_onnx,
))


def _root(x: Any) -> Any:
    """The tensor whose memory is ``x``'s storage: its autograd base, or what a ``detach()``/``.data``/``view(dtype)``
    alias was taken from (those are not views for autograd, but share the storage: ``x[1].detach()`` starts 4
    elements into a (3, 4) ``x``'s storage, and ``as_strided`` on it reads from there)."""
    root = x if x._base is None else x._base
    known = root.__dict__.get("_storage_root")
    return root if known is None else known


def storage_offset(x: Any) -> int:
    """Where ``x`` starts in its storage (its root tensor's memory), in elements.

    Example:
        >>> ember.arange(6.0)[2:].storage_offset()
        2
    """
    root = _root(x)
    if root is x or not hasattr(x._data, "__array_interface__"):
        return 0
    delta = x._data.__array_interface__["data"][0] - root._data.__array_interface__["data"][0]
    return delta // x._data.itemsize


def _ints(name: str, values: Any) -> tuple:
    if isinstance(values, int):
        values = (values,)
    try:
        return tuple(int(v) for v in values)
    except TypeError as error:
        raise TypeError(f"as_strided: {name} must be a sequence of ints, got {values!r}") from error


def as_strided(input: Any, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Any:
    """A view of ``input``'s storage: element ``i`` of the result is at ``storage_offset + sum(i_d * stride_d)``.

    Example:
        >>> ember.as_strided(ember.arange(9.0), (2, 2), (3, 1), 1)
        tensor([[1., 2.],
                [4., 5.]])
    """
    size, stride = _ints("size", size), _ints("stride", stride)
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: mismatch in length of strides and shape: size {list(size)} has "
                           f"{len(size)} dims, stride {list(stride)} has {len(stride)}")
    if any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: sizes and strides must be non-negative, got size {list(size)} and "
                           f"stride {list(stride)}")
    symbolic = isinstance(input._data, SymbolicValue)
    if symbolic and input._base is not None:  # a traced view: its storage is its root's, taken as contiguous
        input, start = _traced_root(input)
        base = 0  # the record reads the root itself
    else:
        start = base = 0 if symbolic else storage_offset_of(input)  # a traced tensor is its own storage
    offset = start if storage_offset is None else int(storage_offset)
    if offset < 0:
        raise RuntimeError(f"as_strided: storage offset must be non-negative, got {offset}")
    root = input if symbolic else _root(input)
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    capacity = root.numel() * root.element_size() // input.element_size()  # view(dtype) counts in its own units
    if needed > capacity:
        raise RuntimeError(f"as_strided: sizes {list(size)}, strides {list(stride)}, storage offset {offset} and "
                           f"itemsize {input.element_size()} require a storage of {needed} elements, but the tensor's "
                           f"storage has {capacity}; choose sizes/strides inside it")
    return dispatch.apply(AS_STRIDED, (input,), {"size": size, "stride": stride, "offset": offset - base,
                                                 "in_stride": _c_strides(input.shape) if symbolic else
                                                 tuple(input.stride())})


storage_offset_of = storage_offset


def _traced_root(view: Any) -> tuple:
    """A traced view's root and where the view starts in it (graphs hold no memory layout: the view ops'
    positions in the root, replayed on its shape, say where)."""
    steps = view._view_fn[0]
    if steps is None:
        raise RuntimeError(f"as_strided: inside a traced graph (ONNX export, no_grad), where the view of shape "
                           f"{tuple(view.shape)} starts in its base of shape {tuple(view._base.shape)} is not known; call "
                           "as_strided on the base with an explicit storage_offset, or on a copy (.clone())")
    positions = view_positions(tuple(view._base.shape), plain_steps(steps))
    return view._base, int(positions.flat[0]) if positions.size else 0
