"""Gradients of sibling slices as one buffer (a lowering pass, before fusion).

The backward of ``q, k, v = qkv[..., :d], qkv[..., d:2d], qkv[..., 2d:]`` (every attention block with a packed
projection; ``split``/``chunk`` alike) is traced as one ``index_backward`` per slice, each a zero-filled array
of the full shape with its slice copied in, summed by two full additions: for W4's (16, 128, 768) three 6 MB
zero fills and copies and two 6 MB additions, ~4.6 of a 110 ms step at one thread, where eager fills one
buffer (``ember/autograd/index_grad.py``). Here a tree of ``add`` nodes whose leaves are ``index_backward``
nodes of basic indices into one shape and dtype, pairwise disjoint, becomes one node that writes each slice
into one buffer: ``empty`` when the slices cover it, ``zeros`` otherwise, and ``0 + g`` written into each slice
(``np.add(g, 0, out=slice)``: the old sum's bits, ``-0.0`` turned to ``0.0`` as ``0 + -0.0`` does). A slice's
gradient that a ``reshape`` (of the attention's head-major layout) made, and that nothing else reads, is read
through the reshape's input instead, when the slice of the buffer can take that shape as a view: the reshape's
copy goes too (the values are the same, copied once instead of twice).

Example:
    >>> import numpy as np, ember
    >>> from ember.graph.ir import Graph
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); a = g.add_input((2, 2), ember.float32); b = g.add_input((2, 1), ember.float32)
    >>> (ga,) = g.add_node(OPS["index_backward"], (a,), {"index": (slice(None), slice(0, 2)), "shape": (2, 3)})
    >>> (gb,) = g.add_node(OPS["index_backward"], (b,), {"index": (slice(None), slice(2, 3)), "shape": (2, 3)})
    >>> (total,) = g.add_node(OPS["add"], (ga, gb), {})
    >>> nodes = merge_index_grads(g.nodes, {total.id})
    >>> [n.op.name for n in nodes]
    ['index_grad_sum']
    >>> nodes[0].op.impl(np, np.ones((2, 2), np.float32), np.full((2, 1), 2, np.float32)).tolist()
    [[1.0, 1.0, 2.0], [1.0, 1.0, 2.0]]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.graph.ir import Node, Value
from ember.ops.registry import OpDef

# Shapes up to this many elements are checked for disjoint slices at build time (one int8 count per element).
_CHECK_ELEMENTS = 1 << 27
# Rows of the buffer filled per round in the covered case: a block that stays in L2 while it is copied and normalized.
_CHUNK_BYTES = 1 << 18


class IndexGradSum:
    """``kernel(xp, *values)``: the sum of ``values[k]`` placed at ``indices[k]`` into zeros of ``shape`` (the
    slices pairwise disjoint). ``sources[k]``: the shape the k-th value arrives in when it is a reshape's input
    read in place of the reshape (None: the value has its slice's shape, up to leading size-1 dims). ``layout``:
    ``(result shape, permuted shape, inverse permutation)`` when the sum is returned as ``reshape(permute(sum))``
    (GPT's ``qkv.reshape(B, T, 3, H, D).permute(2, 0, 3, 1, 4)``): the buffer is then made in the result's layout
    and the slices are written through the permuted view, so the reshape's copy disappears."""

    def __init__(self, indices: list, shape: tuple, covered: bool, sources: list, layout: tuple | None = None) -> None:
        self.indices, self.shape, self.covered, self.sources = indices, tuple(shape), covered, sources
        self.layout = layout
        self.as_view: list = [None] * len(indices)  # per slice: whether the buffer's slice takes the source shape

    def __call__(self, xp: Any, *values: Any) -> Any:
        dtype = values[0].dtype
        shape = self.shape if self.layout is None else self.layout[0]
        full = xp.empty(shape, dtype) if self.covered else xp.zeros(shape, dtype)
        out = full if self.layout is None else xp.transpose(full.reshape(self.layout[1]), self.layout[2])
        zero = dtype.type(0)
        pairs = []
        for k, (index, value) in enumerate(zip(self.indices, values)):
            view = out[index]
            if self.sources[k] is not None:
                target = self._source_view(k, view)
                if target is None:  # (the slice cannot take the source's shape in place: NumPy's reshape copies)
                    value = value.reshape(view.shape)
                else:
                    view = target
            elif value.shape != view.shape:
                value = value.reshape(view.shape)
            pairs.append((view, value))
        if not self.covered:
            for view, value in pairs:
                xp.add(view, value, out=view)  # 0 + g into the zeros, as the old sum
            return full
        rows = out.shape[0] if out.ndim else 0
        if xp is np and out is full and rows > 1 and all(v.ndim and v.shape[0] == rows == g.shape[0] for v, g in pairs):
            # Copy each slice's rows, then add 0 to those rows of the buffer while they are in cache (-0.0 ->
            # 0.0, the old sum's bits): a strided copy is ~2x faster than np.add(g, 0, out=strided slice).
            step = max(1, _CHUNK_BYTES // max(1, out[0].nbytes))
            for r in range(0, rows, step):
                for view, value in pairs:
                    np.copyto(view[r:r + step], value[r:r + step])
                block = out[r:r + step]
                np.add(block, zero, out=block)
            return full
        for view, value in pairs:
            view[...] = value  # each element once (the slices cover the buffer, disjoint)
        xp.add(full, zero, out=full)  # 0 + g, as the old sum: -0.0 becomes 0.0
        return full

    def _source_view(self, k: int, view: Any) -> Any:
        """``view`` with the k-th source's shape, sharing its memory, or None when that needs a copy."""
        if self.as_view[k] is False:
            return None
        try:
            target = np.reshape(view, self.sources[k], copy=False)  # raises where NumPy would copy
        except (AttributeError, ValueError, TypeError):
            self.as_view[k] = False
            return None
        self.as_view[k] = True
        return target


def _basic(index: Any) -> bool:
    return isinstance(index, tuple) and all(
        isinstance(i, (slice, int)) and not isinstance(i, bool) or i is None or i is Ellipsis for i in index)


def _disjoint(indices: list, shape: tuple) -> tuple[bool, bool] | None:
    """(disjoint, covering) for basic ``indices`` into ``shape``; None when not checked (too big or an error)."""
    size = int(np.prod(shape)) if shape else 1
    if size > _CHECK_ELEMENTS:
        return None
    count = np.zeros(shape, np.int8)
    try:
        for index in indices:
            count[index] += 1
    except (IndexError, TypeError, ValueError):
        return None
    return bool((count <= 1).all()), bool((count == 1).all())


def merge_index_grads(nodes: Sequence[Node], keep: set) -> list[Node]:
    """``nodes`` with each tree of ``add``s over disjoint ``index_backward`` slices replaced by one
    ``index_grad_sum`` node at the place of its root (see the module notes); ``keep``: ids of values that must stay
    computed (fetches, state updates)."""
    readers: dict[int, int] = {}
    for node in nodes:
        for v in node.inputs:
            if isinstance(v, Value):
                readers[v.id] = readers.get(v.id, 0) + 1
    producer = {o.id: n for n in nodes for o in n.outputs}

    def private(v: Value) -> bool:  # read once (by the node at hand), not fetched or written back
        return readers.get(v.id, 0) == 1 and v.id not in keep

    def leaves(v: Value, inner: list) -> list | None:
        node = producer.get(v.id)
        if node is None or not private(v):
            return None
        if node.op.name == "index_backward" and len(node.inputs) == 1 and _basic(node.attrs.get("index")):
            inner.append(node)
            return [node]
        if node.op.name == "add" and not node.attrs and len(node.inputs) == 2 and all(
                isinstance(i, Value) for i in node.inputs):
            parts = [leaves(i, inner) for i in node.inputs]
            if None in parts:
                return None
            inner.append(node)
            return parts[0] + parts[1]
        return None

    replace: dict[int, Node] = {}
    dropped: set[int] = set()
    for node in reversed(nodes):  # roots first: an inner add is then taken into its root's node
        if node.op.name != "add" or node.attrs or len(node.inputs) != 2 or id(node) in dropped:
            continue
        out = node.outputs[0]
        inner: list = []
        parts = [leaves(i, inner) if isinstance(i, Value) else None for i in node.inputs]
        if None in parts:
            continue
        found = parts[0] + parts[1]
        shape, dtype = tuple(out.shape), out.dtype
        if any(tuple(n.outputs[0].shape) != shape or n.outputs[0].dtype != dtype or n.inputs[0].dtype != dtype
               for n in found):
            continue
        indices = [n.attrs["index"] for n in found]
        checked = _disjoint(indices, shape)
        if checked is None or not checked[0]:
            continue
        values, sources = [], []
        for n in found:
            g = n.inputs[0]
            made = producer.get(g.id)
            if made is not None and made.op.name == "reshape" and private(g) and isinstance(made.inputs[0], Value):
                inner.append(made)
                values.append(made.inputs[0])
                sources.append(tuple(made.inputs[0].shape))
            else:
                values.append(g)
                sources.append(None)
        layout, outputs = None, node.outputs
        permute = _only_reader(nodes, out, private)
        if permute is not None and permute.op.name == "permute" and private(permute.outputs[0]):
            reshape = _only_reader(nodes, permute.outputs[0], private)
            if reshape is not None and reshape.op.name == "reshape":
                dims = tuple(permute.attrs["dims"])
                inverse = tuple(sorted(range(len(dims)), key=dims.__getitem__))
                layout = (tuple(reshape.outputs[0].shape), tuple(permute.outputs[0].shape), inverse)
                outputs = reshape.outputs
                dropped.update((id(permute), id(reshape)))
                replace[id(reshape)] = None  # the merged node takes the reshape's place (after its other inputs)
        kernel = IndexGradSum(indices, shape, checked[1], sources, layout)
        op = OpDef(name="index_grad_sum", category="nn", impl=kernel,
                   doc=f"{len(found)} disjoint slices' gradients into one {'empty' if checked[1] else 'zeroed'} buffer")
        merged = Node(op, tuple(values), {"_slices": len(found)}, outputs)
        if layout is None:
            replace[id(node)] = merged
        else:
            dropped.add(id(node))
            replace[id(reshape)] = merged
        dropped.update(id(n) for n in inner)
    if not replace:
        return list(nodes)
    return [replace[id(n)] if id(n) in replace else n for n in nodes if id(n) not in dropped or id(n) in replace]


def _only_reader(nodes: Sequence[Node], value: Value, private: Any) -> Node | None:
    """The one node reading ``value`` (None when it is read more than once, fetched or written back)."""
    if not private(value):
        return None
    return next((n for n in nodes if any(i is value for i in n.inputs)), None)
