"""PyTorch's memory layouts for new tensors: the strides a copy, a ``*_like`` factory, a ``to()`` conversion or
``empty_strided`` gets, and arrays laid out with them.

ember's tensors are NumPy/CuPy arrays, so a tensor's strides are its array's. NumPy lays out a copy row-major
(``copy()``) or in its input's order (``astype``, ufuncs with ``order='K'``), and keeps any stride on a size-1
dimension; PyTorch's rules differ in the cases real programs print (``x.t().clone().stride()`` is ``(1, 3)`` in
torch, ``(2, 1)`` in NumPy's copy). The rules, from ATen (checked call by call against torch 2.13 in
``tests/tensor/test_strides_layout_vs_torch.py``):

* ``clone()``, ``to(dtype)``, ``to(copy=True)``, ``empty_like``/``zeros_like``/... under ``preserve_format`` (the
  default): a non-overlapping and dense input's strides exactly; otherwise :func:`infer_dense_strides` (the
  input's dimension order, dense; a broadcast dimension keeps its place).
* ``empty_strided(size, stride)``: exactly ``stride``, over storage of the size those strides need.

A zero-size array has no strides in NumPy (all 0): ember reports PyTorch's row-major strides for it.

Example:
    >>> import ember
    >>> ember.zeros(2, 3).t().clone().stride()
    (1, 3)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

def contiguous_strides(shape: Sequence[int]) -> tuple:
    """Row-major element strides as PyTorch computes them (a size-0 or size-1 dimension counts as 1)."""
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(strides))


def element_strides(array: Any) -> tuple:
    """``array``'s strides in elements, as ``Tensor.stride()`` reports them (row-major for a zero-size array,
    whose strides NumPy does not keep)."""
    if array.size == 0:
        return contiguous_strides(array.shape)
    itemsize = array.itemsize
    return tuple(s // itemsize for s in array.strides)


def is_non_overlapping_and_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the elements fill a block of memory without gaps or overlap, in some dimension order (ATen's rule:
    dimensions of size 0 or 1 do not count)."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    order = sorted((s, n) for n, s in zip(shape, strides) if n >= 2)
    expected = 1
    for s, n in order:
        if s != expected:
            return False
        expected *= n
    return True


def infer_dense_strides(shape: Sequence[int], strides: Sequence[int]) -> tuple:
    """Dense strides that keep the order of ``strides`` (ATen's ``infer_dense_strides``): dimensions sorted by
    stride, fastest first, by an insertion sort that leaves broadcast (stride-0) pairs in place and puts the
    smaller of two equal-stride dimensions first."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))  # fastest first: row-major unless the strides say otherwise

    def should_swap(d0: int, d1: int) -> int:
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return -1 if s0 < s1 else 1
        return 1 if shape[d0] > shape[d1] else 0

    _insertion_sort(perm, should_swap)
    out = [0] * ndim
    step = 1
    for d in perm:
        out[d] = step
        if shape[d] > 1:
            step *= shape[d]
    return tuple(out)


def _insertion_sort(perm: list, should_swap: Any) -> None:
    """ATen's insertion sort with ambiguous comparisons (0: keep the order, stop nothing)."""
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[d0], perm[d1])
            if comparison > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif comparison < 0:
                break


def preserve_strides(shape: Sequence[int], strides: Sequence[int]) -> tuple:
    """The strides ``clone()``, ``to()`` and the ``*_like`` factories give under ``preserve_format``."""
    if is_non_overlapping_and_dense(shape, strides):
        return tuple(strides)
    return infer_dense_strides(shape, strides)


def plainly_contiguous(array: Any) -> bool:
    """Row-major with no size-1 dimension (the common case, where every rule above gives row-major strides and
    NumPy's copy already has them): a test cheap enough for the copy paths."""
    return array.flags.c_contiguous and 1 not in array.shape


def storage_size(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements of storage a view of ``shape`` and ``strides`` needs (0 for an empty one)."""
    if 0 in shape:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def empty_strided(xp: Any, shape: Sequence[int], strides: Sequence[int], dtype: Any) -> Any:
    """An uninitialized array with exactly these element strides (NumPy), over storage of the size they need;
    another backend gets the same dimension order, dense."""
    shape, strides = tuple(int(n) for n in shape), tuple(int(s) for s in strides)
    if xp is not np:
        return _dense_in_order(xp, shape, infer_dense_strides(shape, strides), dtype)
    if 0 in shape:
        return np.empty(shape, dtype=dtype)
    buffer = np.empty(storage_size(shape, strides), dtype=dtype)
    return np.lib.stride_tricks.as_strided(buffer, shape, tuple(s * buffer.itemsize for s in strides))


def _dense_in_order(xp: Any, shape: tuple, strides: tuple, dtype: Any) -> Any:
    """A dense array whose dimensions lie in memory in the order of ``strides`` (slowest first)."""
    order = sorted(range(len(shape)), key=lambda d: (-strides[d], d))
    inverse = [0] * len(order)
    for k, d in enumerate(order):
        inverse[d] = k
    return xp.empty(tuple(shape[d] for d in order), dtype=dtype).transpose(inverse)


def with_strides(xp: Any, array: Any, strides: Sequence[int]) -> Any:
    """``array``'s values laid out with dense ``strides``: ``array`` itself when it has them, a view when only
    size-1 dimensions differ (their stride never moves in memory), else a copy."""
    strides = tuple(strides)
    if array.size == 0 or element_strides(array) == strides:
        return array
    if xp is not np:
        out = _dense_in_order(xp, tuple(array.shape), strides, array.dtype)
        out[...] = array
        return out
    shape = array.shape
    same_where_it_matters = all(n <= 1 or s * array.itemsize == have
                                for n, s, have in zip(shape, strides, array.strides))
    if same_where_it_matters:
        source = array
    else:
        source = _dense_in_order(np, tuple(shape), strides, array.dtype)
        source[...] = array
        if element_strides(source) == strides:  # (the usual case: no size-1 dimension to restride)
            return source
    view = np.lib.stride_tricks.as_strided(source, shape, tuple(s * array.itemsize for s in strides))
    if not array.flags.writeable and source is array:
        view.flags.writeable = False
    return view


def copy_with_strides(xp: Any, array: Any, strides: Sequence[int]) -> Any:
    """A copy of ``array`` laid out with dense ``strides``."""
    strides = tuple(strides)
    if xp is np and array.size:
        target = _dense_in_order(np, tuple(array.shape), strides, array.dtype)
        target[...] = array
        return with_strides(np, target, strides)
    return with_strides(xp, array.copy(), strides)


def clone_array(xp: Any, array: Any) -> Any:
    """``clone()``'s copy under ``preserve_format``: the input's strides when it is dense, else its order."""
    if xp is not np or type(array) is not np.ndarray or plainly_contiguous(array):
        return array.copy()
    return copy_with_strides(xp, array, preserve_strides(array.shape, element_strides(array)))


def row_major_result(tensor: Any) -> Any:
    """``tensor`` with its array laid out row-major in torch's sense (size-1 dimensions' strides too: a view when
    only those differ), as ATen's reductions write their results; NumPy keeps a permuted input's order."""
    data = tensor._data
    if type(data) is np.ndarray and data.ndim and data.size and element_strides(data) != contiguous_strides(data.shape):
        tensor._data = with_strides(np, data, contiguous_strides(data.shape))
    return tensor


def _channels_last_like(shape: tuple, strides: tuple) -> bool:
    """c10's ``is_channels_last_strides_2d/3d`` on a 4-d/5-d shape and element strides (ambiguous size-1 cases
    count as row-major)."""
    order = _FORMAT_ORDER.get(len(shape))
    if order is None or strides[1] == 0:
        return False
    low = 0
    for d in order:
        if shape[d] == 0 or strides[d] < low or (d == 0 and low == strides[1]):
            return False
        low = strides[d] * max(int(shape[d]), 1)
    return True


def suggested_strides(shape: tuple, operands: Sequence[tuple]) -> tuple:
    """Strides of a fresh result of ``shape`` laid out as ATen's ``cat``/constant ``pad`` lay theirs out: channels-last
    when every operand (``(shape, strides)``) suggests it by c10's rule (``suggest_memory_format``), else
    row-major (a transposed or permuted input gives a row-major result there)."""
    if len(shape) in _FORMAT_ORDER and operands and all(_channels_last_like(s, st) for s, st in operands):
        out, step = [0] * len(shape), 1
        for d in _FORMAT_ORDER[len(shape)]:
            out[d] = step
            step *= int(shape[d])
        return tuple(out)
    return contiguous_strides(shape)


def fresh_like_inputs(out: Any, inputs: Sequence[Any], unsqueeze: int | None = None) -> Any:
    """``out`` (a NumPy result built from ``inputs``) laid out by :func:`suggested_strides` of the inputs (each
    taken as ``unsqueeze(dim)`` first when given: torch's ``stack`` is ``cat`` of those); row-major inputs (the
    common case) return ``out`` untouched."""
    if type(out) is not np.ndarray or out.ndim < 2 or out.size == 0 or \
            all(type(x) is np.ndarray and x.flags.c_contiguous for x in inputs):
        return out
    described = []
    for x in inputs:
        shape, strides = tuple(x.shape), element_strides(x)
        if unsqueeze is not None:  # torch's unsqueeze: the new dim's stride is size * stride of the dim it precedes
            if not _channels_last_like(shape, strides) or unsqueeze == len(shape):  # (torch: last dim row-major)
                return with_strides(np, out, contiguous_strides(out.shape))
            d = unsqueeze
            new = 1 if d >= len(shape) else shape[d] * strides[d]
            shape, strides = shape[:d] + (1,) + shape[d:], strides[:d] + (new,) + strides[d:]
        described.append((shape, strides))
    if unsqueeze is not None:  # stack of channels-last maps (as torch 2.13 lays it out): their order, densely
        wanted = infer_dense_strides(tuple(out.shape), described[0][1])
    else:
        wanted = suggested_strides(tuple(out.shape), described)
    return out if element_strides(out) == wanted else with_strides(np, out, wanted)


def strides_of_permuted(shape: Sequence[int], physical_layout: Sequence[int]) -> tuple:
    """``empty_permuted``'s strides: ``physical_layout[0]`` is the slowest dimension in memory."""
    out = [0] * len(shape)
    step = 1
    for d in reversed(tuple(physical_layout)):
        out[d] = step
        step *= max(int(shape[d]), 1)
    return tuple(out)


# ---- elementwise results: ATen's TensorIterator ---------------------------------------------------------------------
_FORMAT_ORDER = {4: (1, 3, 2, 0), 5: (1, 4, 3, 2, 0)}  # channels-last: fastest dimension first


def _dense_in(shape: tuple, strides: tuple, order: Sequence[int]) -> bool:
    """``is_contiguous`` in the memory order ``order`` (fastest first); size-1 dimensions take any stride."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def iterator_strides(shape: tuple, operands: Sequence[tuple]) -> tuple:
    """The strides TensorIterator gives an elementwise result of ``shape`` from ``operands`` (``(shape, strides)``
    in argument order; a Python number is ``((), ())``): when every operand has the result's shape, row-major if all
    are row-major, channels-last if all are, their common strides if all are dense alike; otherwise the dimensions
    sorted by the first operand whose strides decide (broadcast dimensions never do), dense in that order."""
    ndim = len(shape)
    if all(s == shape for s, _ in operands):
        row_major = tuple(range(ndim - 1, -1, -1))
        if all(_dense_in(shape, st, row_major) for _, st in operands):
            return contiguous_strides(shape)
        order = _FORMAT_ORDER.get(ndim)
        if order is not None and all(_dense_in(shape, st, order) for _, st in operands):
            out, step = [0] * ndim, 1
            for d in order:
                out[d] = step
                step *= shape[d]
            return tuple(out)
        first = operands[0][1]
        if all(st == first for _, st in operands) and is_non_overlapping_and_dense(shape, first):
            return tuple(first)
    aligned = [_broadcast_strides(shape, s, st) for s, st in operands]

    def should_swap(d0: int, d1: int) -> int:
        for st in aligned:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = list(range(ndim - 1, -1, -1))
    _insertion_sort(perm, should_swap)
    if perm == list(range(ndim - 1, -1, -1)):
        return contiguous_strides(shape)
    out, step = [0] * ndim, 1
    for d in perm:
        out[d] = step
        step *= shape[d]
    return tuple(out)


def _broadcast_strides(shape: tuple, own_shape: tuple, own_strides: tuple) -> tuple:
    """An operand's strides over the result's dimensions: 0 where it is broadcast (or absent)."""
    lead = len(shape) - len(own_shape)
    return tuple(0 if d < lead or (own_shape[d - lead] == 1 and shape[d] != 1) else own_strides[d - lead]
                 for d in range(len(shape)))


def _same_element_strides(a: Any, b: Any) -> bool:
    if a.itemsize == b.itemsize:
        return a.strides == b.strides
    ia, ib = a.itemsize, b.itemsize
    return all(sa * ib == sb * ia for sa, sb in zip(a.strides, b.strides))


def elementwise_result(xp: Any, out: Any, operands: Sequence[Any]) -> Any:
    """``out`` (an elementwise op's NumPy result) laid out as torch lays out that op's result: unchanged when it
    already is (NumPy follows its operands' order too, but breaks ties and size-1 strides its own way), a view when
    only size-1 strides differ, else a copy. ``operands``: the arrays and Python numbers in argument order.
    Called only when the first tensor operand is not row-major (row-major inputs give row-major results in both).
    Other namespaces than NumPy's (the meta device's one-element shells, CuPy, the stand-in) keep their result."""
    if xp is not np or type(out) is not np.ndarray or out.ndim < 2 or out.size == 0:
        return out
    for first in operands:
        if type(first) is np.ndarray and first.ndim:
            break
    else:
        return out
    shape = out.shape
    if first.shape == shape and 1 not in shape and 0 not in first.strides:
        # The first tensor operand spans the result without broadcasting: its strides decide every pair of
        # dimensions in torch's sort, so the result is dense in its dimension order, which is NumPy's empty_like
        # (order K). NumPy's own result already is, unless another operand disagreed (NumPy then goes row-major).
        if _same_element_strides(first, out):
            return out
        target = np.empty_like(first, dtype=out.dtype)
        target[...] = out
        return target
    described = []
    for a in operands:
        if isinstance(a, np.ndarray):
            if a.ndim > out.ndim:  # not an elementwise result of this operand: leave it
                return out
            described.append((a.shape, element_strides(a)))
        else:
            described.append(((), ()))
    return with_strides(np, out, iterator_strides(out.shape, described))
