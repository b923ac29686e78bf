"""One run of identical scalar kernels whose inputs hold the same values (a lowering pass, after fusion).

A traced training step with Adam keeps a step count per parameter (``state['step']``, a separate 0-d state
each), so its fused graph computes the bias corrections (``1 - beta1 ** step``, ``sqrt(1 - beta2 ** step)``,
``lr / ...``) in one scalar kernel per parameter: four a W2 step, ~50 a GPT step, each ~13 us of NumPy calls
on 0-d arrays. The counts are equal in every ordinary step (a parameter that skipped a step holds another), so
this pass groups fused kernels of the same source over 0-d graph states into one node that compares the
states' bytes each run and runs the kernel once per distinct input, copying the results for the rest
(``-0.0`` and ``0.0``, or two NaN payloads, count as different: each such input runs its own kernel). The
eager optimizer does the same per parameter group (``ember/optim/compiled_update.py``).

Only kernels whose inputs are all 0-d states or graph inputs (no node makes them, so the group can run where
its first member ran) and whose outputs are all 0-d are grouped; each group's members keep their own output
values, so the rest of the graph is unchanged. Runs before memory planning: a grouped step count is written
back by the executor's copy rather than in place (one 0-d copy).

Example:
    >>> import numpy as np, ember
    >>> from ember.graph.ir import Graph
    >>> from ember.graph.passes.fuse import fuse_nodes
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); a = g.add_input((), ember.float64); b = g.add_input((), ember.float64)
    >>> outs = [g.add_node(OPS["exp"], (g.add_node(OPS["add"], (s, 1.0), {})[0],), {})[0] for s in (a, b)]
    >>> nodes = share_scalar_kernels(fuse_nodes(g.nodes, {o.id for o in outs}, np))
    >>> [n.attrs["ops"] for n in nodes]
    ['shared(add+exp) x2']
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.graph.ir import Node
from ember.ops.registry import OpDef


def _key(node: Node) -> tuple | None:
    """What makes two fused nodes the same computation (their kernel's source and the dtypes it runs on),
    or None when the node cannot join a group."""
    if node.op.category != "fused" or not node.inputs:
        return None
    for v in node.inputs:
        # a Value made by no node: a graph input, state or constant (available before any node runs)
        if getattr(v, "node", 0) is not None or v.shape != ():
            return None
    if any(o.shape != () for o in node.outputs):
        return None
    return (node.op.doc, tuple(v.dtype for v in node.inputs), tuple(o.dtype for o in node.outputs))


class SharedScalarKernel:
    """``kernel(xp, *inputs_of_member_0, *inputs_of_member_1, ...)``: every member's outputs, in order; the
    kernel runs once per distinct set of input bytes."""

    def __init__(self, kernel: Any, n_inputs: int, n_outputs: int, members: int) -> None:
        self.kernel, self.n_inputs, self.n_outputs, self.members = kernel, n_inputs, n_outputs, members

    def __call__(self, xp: Any, *arrays: Any) -> tuple:
        k, kernel = self.n_inputs, self.kernel
        results: list = []
        seen: dict = {}  # input bytes -> that member's results
        for j in range(self.members):
            ins = arrays[j * k:(j + 1) * k]
            key = tuple(a.tobytes() for a in ins) if all(type(a) is np.ndarray for a in ins) else None
            done = seen.get(key) if key is not None else None
            if done is not None:  # copies: a later node may write into its input's buffer
                results.extend(r.copy() for r in done)
                continue
            out = kernel(xp, *ins)
            out = (out,) if self.n_outputs == 1 else tuple(out)
            if key is not None:
                seen[key] = out
            results.extend(out)
        return tuple(results)


def share_scalar_kernels(nodes: Sequence[Node]) -> list[Node]:
    """``nodes`` with each set of two or more identical scalar kernels over graph states (see the module
    docstring) replaced by one shared node at the place of the group's first member."""
    groups: dict[tuple, list[Node]] = {}
    for node in nodes:
        key = _key(node)
        if key is not None:
            groups.setdefault(key, []).append(node)
    first: dict[int, Node] = {}
    grouped: set[int] = set()
    for members in groups.values():
        if len(members) < 2:
            continue
        lead = members[0]
        kernel = SharedScalarKernel(lead.op.impl, len(lead.inputs), len(lead.outputs), len(members))
        label = f"shared({lead.attrs.get('ops', 'fused')}) x{len(members)}"
        op = OpDef(name="fused", category="fused", impl=kernel, doc=f"{label}\n{lead.op.doc}")
        shared = Node(op, tuple(v for m in members for v in m.inputs), {"ops": label},
                      tuple(o for m in members for o in m.outputs))
        first[id(lead)] = shared
        grouped.update(id(m) for m in members)
    if not grouped:
        return list(nodes)
    return [first[id(n)] if id(n) in first else n for n in nodes if id(n) not in grouped or id(n) in first]
