"""One run of identical scalar kernels whose inputs hold the same values (a lowering pass, after fusion).

A traced training step with Adam keeps a step count per parameter (``state['step']``, a separate 0-d state
each), so its fused graph computes the bias corrections (``1 - beta1 ** step``, ``sqrt(1 - beta2 ** step)``,
``lr / ...``) in one scalar kernel per parameter: four a W2 step, ~50 a GPT step, each ~13 us of NumPy calls
on 0-d arrays. The counts are equal in every ordinary step (a parameter that skipped a step holds another), so
this pass groups fused kernels of the same source over 0-d graph states into one node that compares the
states' bytes each run and runs the kernel once per distinct input, copying the results for the rest
(``-0.0`` and ``0.0``, or two NaN payloads, count as different: each such input runs its own kernel). The
eager optimizer does the same per parameter group (``ember/optim/compiled_update.py``).

Grouped: fused kernels of one source, and (given the executor's node callables) any pure op of one record,
attributes and literal inputs, whose inputs and outputs are all 0-d: since torch's one-rounding Adam, the step
count's ``add+to_dtype``, a host ``pow`` per correction and the ``sub+div`` reading it. A member joins its group's
first member when every input it reads exists there (a graph state, or the output of an earlier node or group), so
groups chain over rounds; a group never joins another. Each member keeps its own output values, so the rest of
the graph is unchanged. Runs before memory planning: a grouped step count is written back by the executor's copy
rather than in place (one 0-d copy).

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

from typing import Any, Callable, Sequence

from ember.graph.ir import Node, Value
from ember.graph.passes.scalar_chains import ScalarChainKernel, merge_scalar_chains, run_per_distinct_inputs
from ember.ops.registry import OpDef


def _key(node: Node, general: bool) -> tuple | None:
    """What makes two nodes the same computation, or None when the node cannot join a group: a fused kernel
    (its source and dtypes), or with ``general`` any pure op (the record, its attributes and literal inputs);
    every input and output 0-d."""
    op = node.op
    if op.random or op.side_effect or op.category in ("control", "state") or not node.inputs:
        return None
    if isinstance(op.impl, (SharedScalarKernel, ScalarChainKernel)):  # a group is never a member: its doc names
        return None  # only its lead's kernels
    if any(o.shape != () for o in node.outputs):
        return None
    literals = []
    for k, v in enumerate(node.inputs):
        if isinstance(v, Value):
            if v.shape != ():
                return None
        elif isinstance(v, (int, float, bool)) or v is None:
            literals.append((k, type(v).__name__, repr(v)))
        else:
            return None
    if op.category == "fused":
        what: tuple = ("fused", op.doc)
    elif general:
        try:
            attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))
        except TypeError:
            return None
        what = ("op", id(op), attrs)
    else:
        return None
    dtypes = tuple(v.dtype for v in node.inputs if isinstance(v, Value))
    return what + (tuple(literals), dtypes, tuple(o.dtype for o in node.outputs))


def node_key(node: Node) -> tuple | None:
    """What makes two nodes the same scalar computation (any pure op or fused kernel), or None."""
    return _key(node, True)


class SharedScalarKernel:
    """``kernel(xp, *inputs_of_member_0, *inputs_of_member_1, ...)``: every member's outputs, in order; the
    computation runs once per distinct set of input bytes. ``run(xp, *inputs)`` computes one member."""

    def __init__(self, run: Any, n_inputs: int, n_outputs: int, members: int) -> None:
        self.run, self.n_inputs, self.n_outputs, self.members = run, n_inputs, n_outputs, members

    def __call__(self, xp: Any, *arrays: Any) -> tuple:
        run, single = self.run, self.n_outputs == 1

        def one(ins: Sequence[Any]) -> tuple:
            out = run(xp, *ins)
            return (out,) if single else tuple(out)

        return run_per_distinct_inputs(arrays, self.n_inputs, self.members, one)


def _group_once(nodes: list[Node], callable_of: Callable[[Node], Any] | None) -> list[Node] | None:
    """One round of grouping (None: nothing grouped). A member joins its group's first member when every input
    it reads exists at that place (made by an earlier node, or by none)."""
    made_at = {o.id: k for k, n in enumerate(nodes) for o in n.outputs}
    position = {id(n): k for k, n in enumerate(nodes)}
    groups: dict[tuple, list[Node]] = {}
    for node in nodes:
        key = _key(node, callable_of is not None)
        if key is not None:
            groups.setdefault(key, []).append(node)
    first: dict[int, Node] = {}
    grouped: set[int] = set()
    for members in groups.values():
        lead = members[0]
        at = position[id(lead)]
        members = [m for m in members if all(made_at.get(v.id, -1) < at for v in m.inputs if isinstance(v, Value))]
        if len(members) < 2:
            continue
        values = [v for v in lead.inputs if isinstance(v, Value)]
        if lead.op.category == "fused":
            kernel = lead.op.impl
            run: Any = kernel
        else:
            call = callable_of(lead)  # type: ignore[misc]  # takes the Value inputs' arrays (literals bound)
            run = lambda xp, *ins, _call=call: _call(*ins)  # noqa: E731
        shared_kernel = SharedScalarKernel(run, len(values), len(lead.outputs), len(members))
        name = lead.attrs.get("ops", lead.op.name) if lead.op.category == "fused" else lead.op.name
        label = f"shared({name}) x{len(members)}"
        op = OpDef(name="fused", category="fused", impl=shared_kernel, doc=f"{label}\n{lead.op.doc}")
        shared = Node(op, tuple(v for m in members for v in m.inputs if isinstance(v, Value)), {"ops": label},
                      tuple(o for m in members for o in m.outputs))
        first[id(lead)] = shared
        grouped.update(id(m) for m in members)
    if not grouped:
        return None
    return [first[id(n)] if id(n) in first else n for n in nodes if id(n) not in grouped or id(n) in first]


def share_scalar_kernels(nodes: Sequence[Node], callable_of: Callable[[Node], Any] | None = None,
                         keep: set | None = None) -> list[Node]:
    """``nodes`` with each set of two or more identical scalar computations (see the module docstring) replaced
    by one shared node at the place of the group's first member. Fused kernels are grouped; with
    ``callable_of`` (the executor's node-to-callable), any pure op with 0-d inputs and outputs too (a host
    ``pow`` of each parameter's step count), and groups chain: a member may read an earlier group's outputs."""
    current = list(nodes)
    if callable_of is not None and keep is not None:  # whole chains first (ember/graph/passes/scalar_chains.py)
        current = merge_scalar_chains(current, callable_of, keep, node_key)
    for _ in range(8):  # each round can only group nodes whose inputs an earlier round grouped
        grouped = _group_once(current, callable_of)
        if grouped is None:
            break
        current = grouped
    return current
