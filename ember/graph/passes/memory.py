"""Memory planning for the CPU executor.

Two things, both safe by construction:

* inside a fused kernel, temporaries live in scratch buffers kept across runs, and a temporary
  takes over the buffer of one that is dead (see :class:`~ember.graph.passes.fuse.FusedKernel`);
* *in place where safe*: when a fused kernel computes a state's new value (``w - lr * g``), reads
  the state's old value, and nothing after that step reads the old value (no later step of the
  kernel, no later node, no fetch), the step writes straight into the state's buffer, so the
  end-of-run copy disappears. Only elementwise ufunc steps of the state's shape and dtype qualify
  (NumPy ufuncs handle exact aliasing of an input and the output). A Numba-compiled kernel
  qualifies for any non-reduction output: it loads every input element before it stores any, and
  stores the new value through the state's own argument (see
  :class:`~ember.graph.passes.fuse_numba.NumbaKernel`).

A value that may be a view of the state (made from it by a movement, cast or other op that can
return its input's memory) must have no reader at or after the updating kernel, nor be fetched.

* *fills where last read* (:func:`plan_fills`): a state whose new value is a constant (``w.grad.zero_()``
  traced into a step: one number broadcast) is filled by the fused kernel that reads it last, element by
  element right after the loop has read it, instead of by a pass of its own after the run (W1's 400 KB
  gradient: ~15 us of a ~330 us step, its lines already in cache when the update reads them). Same rules as
  an in-place update (the kernel is the state's last reader; no view of it is read from there on; not
  fetched; written once), on float states with a finite constant.

Example:
    >>> plan_buffers([], set(), __import__("numpy"))
    {'inplace_updates': 0}
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.graph.ir import Node, Value
from ember.graph.passes.fuse import FusedKernel
from ember.graph.passes.fuse_numba import NumbaKernel

# Ops of these categories always return fresh arrays; any other op may return a view of its input.
# "nn" ops (linear, conv2d, batch_norm and their backward ops...) compute new arrays: without them here,
# the output of every layer reading a weight counted as a possible view of that weight, and no weight
# read by a later layer's backward was ever updated in place (tests/graph/test_memory_plan_fresh_ops.py
# checks every such op's outputs against its inputs).
_FRESH = ("unary", "binary", "ternary", "reduction", "linalg", "fused", "nn")
# ...except these, which NumPy answers with a view for some arguments (einsum "ii->i" or "ij->ji",
# .real/.imag of a complex array).
_MAY_ALIAS = frozenset({"einsum", "real", "imag"})


def returns_fresh(op: Any) -> bool:
    """Whether ``op`` always returns new memory (never its input's, nor a view of it)."""
    return op.category in _FRESH and not op.view and op.name not in _MAY_ALIAS


def _views_read_late(nodes: Sequence[Node], state: Value, k: int, last_read: dict, keep: set) -> bool:
    """Whether a value that may alias ``state``'s buffer is read by node ``k`` or later, or fetched."""
    aliases = {state.id}
    for node in nodes[:k]:
        if returns_fresh(node.op):
            continue
        if any(isinstance(i, Value) and i.id in aliases for i in node.inputs):
            for out in node.outputs:
                if last_read.get(out.id, -1) >= k or out.id in keep:
                    return True
                aliases.add(out.id)
    return False


def plan_buffers(nodes: Sequence[Node], keep: set, xp: Any, updates: Sequence[tuple] = ()) -> dict:
    last_read: dict[int, int] = {}
    for k, node in enumerate(nodes):
        for i in node.inputs:
            if isinstance(i, Value):
                last_read[i.id] = k
    state_of_update: dict[int, Any] = {}
    writes_per_state: dict[int, int] = {}
    for state, new in updates:
        writes_per_state[state.id] = writes_per_state.get(state.id, 0) + 1
        state_of_update.setdefault(new.id, []).append(state)
    count = 0
    for k, node in enumerate(nodes):
        kernel = node.op.impl
        if node.op.category != "fused" or not isinstance(kernel, (FusedKernel, NumbaKernel)):
            continue
        numba = isinstance(kernel, NumbaKernel)
        step_of = {s[0]: j for j, s in enumerate(kernel.steps)}
        for out, name in zip(node.outputs, kernel.outputs):
            states = state_of_update.get(out.id, [])
            if len(states) != 1:
                continue
            state = states[0]
            if state.id in keep or writes_per_state[state.id] != 1 or last_read.get(state.id) != k \
                    or state not in node.inputs or state.shape != out.shape or state.dtype != out.dtype:
                continue
            j = step_of.get(name)
            if j is None or (kernel.steps[j][1] in ("sum", "mean") if numba else not kernel.writes_in_place(j)):
                continue
            src = f"in{node.inputs.index(state)}"
            if src in kernel.outputs or node.inputs.index(state) in kernel.out_into.values():
                continue
            if not numba and any(src in s[2] for s in kernel.steps[j + 1:]):
                continue  # a later step still reads the old value
            if _views_read_late(nodes, state, k, last_read, keep):
                continue
            kernel.out_into[name] = node.inputs.index(state)
            node.attrs.setdefault("inplace", ())
            node.attrs["inplace"] += (state.label(),)
            count += 1
    return {"inplace_updates": count}


def plan_fills(nodes: Sequence[Node], keep: set, updates: Sequence[tuple]) -> set:
    """Ids of the states that the fused kernel reading them last fills with their constant new value
    (``kernel.fill_after``: input index -> the constant, a 0-d array of the state's dtype). The executor then
    writes nothing for them after the run (it still counts the write in their version)."""
    last_read: dict[int, int] = {}
    for k, node in enumerate(nodes):
        for i in node.inputs:
            if isinstance(i, Value):
                last_read[i.id] = k
    writes_per_state: dict[int, int] = {}
    for state, _ in updates:
        writes_per_state[state.id] = writes_per_state.get(state.id, 0) + 1
    filled: set = set()
    for state, new in updates:
        data = new.data
        if new.kind != "const" or data is None or data.__class__ is not np.ndarray or any(data.strides) \
                or data.shape != state.shape or data.dtype != state.dtype or data.dtype.kind != "f" \
                or not np.isfinite(data.reshape(-1)[:1]).all() or state.id in keep or writes_per_state[state.id] != 1:
            continue
        k = last_read.get(state.id)
        if k is None:
            continue
        node = nodes[k]
        kernel = node.op.impl
        if node.op.category != "fused" or not isinstance(kernel, (FusedKernel, NumbaKernel)) or data.size < 2:
            continue
        q = node.inputs.index(state)
        if node.inputs.count(state) != 1 or q in kernel.out_into.values() or q in kernel.fill_after \
                or any(o.shape != state.shape for o in node.outputs) \
                or any(s[1] in ("sum", "mean") for s in kernel.steps):
            continue  # one elementwise loop over the state's own shape, the state read once and not updated there
        if _views_read_late(nodes, state, k, last_read, keep):
            continue
        kernel.fill_after[q] = data.reshape(-1)[:1].reshape(())
        node.attrs.setdefault("fills", ())
        node.attrs["fills"] += (state.label(),)
        filled.add(state.id)
    return filled
