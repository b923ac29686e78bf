"""vmap's per-sample backward on NumPy arrays: the batched form of ``OpDef.array_vjp``.

``vmap(grad(f))`` records autograd nodes on batched tensors (ember/func/batched.py); their backward would
run each rule's ops at the vmap level, and each of those through its batching rule one level down: two
dispatches and two Tensor objects per op. When nothing needs the backward's own ops (the engine's array
mode: no ``create_graph``, profiler, autocast or tracing) and the batch one level down is plain CPU
float32/float64 NumPy arrays, a node runs its record's batched array rule instead (``OpDef.batch_array_vjp``,
``rule(ctx, g, gdim) -> [(array, bdim) | None per input]``), on the arrays with the batch first. Elementwise
records need no rule of their own: their ``array_vjp`` rules run on the batch-aligned arrays (the batch dim
first, batched operands padded with ones to the output's per-sample rank, as the ``elementwise`` batching
rule aligns them), and a result with the padded rank is batched.

A node whose rule cannot take its inputs (another level's tensors, devices, mixed dtypes, saved-tensor
hooks) raises :class:`NotArrayable` and runs ``vjp`` through the batching rules, as before.

Example:
    >>> import ember
    >>> from ember.func import grad, vmap
    >>> w = ember.ones(3)
    >>> vmap(grad(lambda w, x: (w * x).relu().sum()), in_dims=(None, 0))(w, ember.tensor([[1., 2, 3]])).tolist()
    [[1.0, 2.0, 3.0]]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.autograd.node import NotArrayable, SavedTensor
from ember.ops.batching import ELEMENTWISE_CATEGORIES
from ember.ops.registry import OPS

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class BatchArrayCtx:
    """What a batched array rule reads: the saved inputs and output(s) as arrays with the batch first
    (``bdims[i]`` 0) or unbatched (None; Python numbers stay numbers), the attrs, the per-sample input
    shapes, which inputs need a gradient, and the batch size."""

    __slots__ = ("node", "level", "dtype", "size", "attrs", "input_meta", "needs", "bdims", "_inputs", "rank")

    def __init__(self, node: Any, level: Any, dtype: Any) -> None:
        self.node = node
        self.level = level
        self.dtype = dtype
        self.size = level.size
        self.attrs = node.attrs
        self.input_meta = node.input_meta
        self.needs = node.needs_input_grad
        self.bdims: tuple = ()
        self._inputs: tuple | None = None
        self.rank: int | None = None  # set by the elementwise rule: batched arrays padded to this per-sample rank

    def _array(self, saved: Any, position: str) -> tuple:
        """(array, bdim) of one saved value: a tensor of this level's batch, or an unbatched plain array."""
        data = saved.array(self.node.op.name, position)
        bdim = None
        if type(data) is not np.ndarray:
            if getattr(data, "level", None) is not self.level:  # another level's value, a graph value
                raise NotArrayable
            bdim, data = data.bdim, data.value._data
            if type(data) is not np.ndarray:  # a device array, a value of an enclosing transform
                raise NotArrayable
            if bdim:
                data = np.moveaxis(data, bdim, 0)
                bdim = 0
            if bdim is not None and self.rank is not None:  # elementwise: ones after the batch dim up to the rank
                missing = self.rank - (data.ndim - 1)
                if missing > 0:
                    data = data.reshape(data.shape[:1] + (1,) * missing + data.shape[1:])
        if data.dtype != self.dtype and data.dtype.kind in "fcV":  # mixed dtypes: the ops' rules promote
            raise NotArrayable
        return data, bdim

    @property
    def inputs(self) -> tuple:
        inputs = self._inputs
        if inputs is None:
            values, bdims = [], []
            for i, s in enumerate(self.node.saved or ()):
                d = None
                if s.__class__ is SavedTensor:
                    s, d = self._array(s, f"input {i}")
                values.append(s)
                bdims.append(d)
            inputs = self._inputs = tuple(values)
            self.bdims = tuple(bdims)
        return inputs

    @property
    def out(self) -> Any:
        saved = self.node.saved_out
        if saved.__class__ is tuple:
            return tuple(self._array(s, f"output {i}")[0] if s.__class__ is SavedTensor else s
                         for i, s in enumerate(saved))
        if saved.__class__ is not SavedTensor:
            raise NotArrayable
        return self._array(saved, "output")[0]


def elementwise(ctx: BatchArrayCtx, g: Any, gdim: int | None) -> list:
    """An elementwise record's ``array_vjp`` rules on the batch-aligned arrays: a result with one dim more
    than the output's per-sample rank carries the batch (unbatched operands have at most that rank)."""
    rank = g.ndim - (gdim is not None)
    ctx.rank = rank
    ctx.inputs  # noqa: B018 (aligns the saved inputs now, so every rule sees the same arrays)
    vjp = ctx.node.op.array_vjp
    if vjp.__class__ is tuple:
        results = [rule(ctx, g) if need and rule is not None else None for rule, need in zip(vjp, ctx.needs)]
    else:
        results = list(vjp(ctx, g))
    out = []
    for r in results:
        if r is None:
            out.append(None)
            continue
        r = np.asarray(r)
        out.append((r, 0 if r.ndim == rank + 1 else None))
    return out


def sum_to_batched(a: Any, shape: tuple) -> Any:
    """A batch-first gradient ``(B, ...)`` summed to ``(B, *shape)``: the adjoint of broadcasting per sample."""
    extra = a.ndim - 1 - len(shape)
    if extra > 0:
        a = a.sum(axis=tuple(range(1, 1 + extra)))
    axes = tuple(i + 1 for i, s in enumerate(shape) if s == 1 and a.shape[i + 1] != 1)
    if axes:
        a = a.sum(axis=axes, keepdims=True)
    return a


def input_grads(level: Any, node: Any, g: Any, gdim: int | None, grads: list) -> list | None:
    """``node``'s input gradients as ``(array, bdim)`` pairs (None where an input gets none), from its
    batched array rule with the cotangent ``g`` (one level down: batched at ``gdim``, or None); None when
    the node does not qualify (then its ``vjp`` runs through the batching rules)."""
    op = node.op
    rule = op.batch_array_vjp
    if rule is None:
        if op.array_vjp is None or op.category not in ELEMENTWISE_CATEGORIES or node.num_outputs != 1:
            return None
        rule = elementwise
    if node.saved is None and op.save != "none":
        return None  # freed: the ember-op rule raises PyTorch's error
    if any(g is not None for g in grads[1:]) and op.nondiff_outputs != tuple(range(1, len(grads))):
        return None  # a multi-output record whose other outputs carry gradients
    if type(g) is not np.ndarray or g.dtype not in _FLOATS:
        return None
    if gdim:
        g = np.moveaxis(g, gdim, 0)
        gdim = 0
    ctx = BatchArrayCtx(node, level, g.dtype)
    try:
        results = rule(ctx, g, gdim)
    except NotArrayable:
        return None
    needs, shapes, size = ctx.needs, ctx.input_meta, ctx.size
    out: list = []
    for i, r in enumerate(results):
        if r is None or not needs[i]:
            out.append(None)
            continue
        a, bdim = r
        shape = tuple(shapes[i])
        if bdim is None:
            if a.shape != shape:
                a = OPS["sum_to"].impl(np, a, shape)
        elif a.shape[1:] != shape or a.shape[0] != size:
            a = sum_to_batched(a, shape)
            if a.shape != (size,) + shape:  # a rule that lost the batch: let the ember-op rules answer
                return None
        out.append((a if type(a) is np.ndarray else np.asarray(a), bdim))
    return out
