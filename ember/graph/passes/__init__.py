"""Graph passes. Each takes a :class:`~ember.graph.ir.Graph` and returns a new one (sharing Values),
so a user can print the graph after each and see what it did:

* ``simplify`` - algebraic rules kept on the op records (``op.simplify``): x*1, x+0, x-0,
  x/1, x**1, identity reshapes/casts/expands, permute-of-permute, transposes folded into matmul;
* ``cse`` - common-subexpression elimination (same op, inputs and attributes; never random nodes:
  two dropout calls are two masks);
* ``fold`` - constant folding (nodes whose inputs are all constants run once at compile time; never
  random nodes, which must sample anew each run);
* ``dce`` - dead-code elimination (nodes no output or state update needs);
* ``fuse`` and ``memory`` are lowering passes applied when an executor is built
  (:func:`ember.graph.passes.fuse.fuse_nodes`, :func:`ember.graph.passes.memory.plan_buffers`; between
  them, with fusion, :func:`ember.graph.passes.share_scalar.share_scalar_kernels` runs identical scalar
  kernels over equal states once: Adam's bias corrections once per step, not per parameter);
  :func:`fuse` here shows fusion's effect as a graph.

Example:
    >>> import ember
    >>> from ember.graph.ir import Graph
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); x = g.add_input((3,), ember.float32)
    >>> (a,) = g.add_node(OPS["mul"], (x, 1.0), {}); (b,) = g.add_node(OPS["exp"], (a,), {})
    >>> g.outputs = [b]
    >>> len(run_passes(g, ["simplify", "dce"]).nodes)
    1
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.graph.ir import Graph, Node, Value, device_xp
from ember.graph.passes.rules import binary_identity

GRAPH_PASSES = ("simplify", "cse", "fold", "dce")
LOWERING_PASSES = ("fuse", "memory")
ALL_PASSES = GRAPH_PASSES + LOWERING_PASSES


def rebuild(graph: Graph, nodes: list[Node], subst: dict[int, Any]) -> Graph:
    """A new graph with ``nodes`` whose inputs (and the outputs/updates) go through ``subst``."""

    def sub(v: Any) -> Any:
        while isinstance(v, Value) and v.id in subst:
            v = subst[v.id]
        return v

    g = graph.copy_structure()
    g.nodes = []
    for node in nodes:
        inputs = tuple(sub(i) for i in node.inputs)
        if any(a is not b for a, b in zip(inputs, node.inputs)):
            node = Node(node.op, inputs, node.attrs, node.outputs)
            for out in node.outputs:
                out.node = node
        g.nodes.append(node)
    g.outputs = [sub(v) for v in graph.outputs]
    g.updates = [(s, sub(v)) for s, v in graph.updates]
    g.consts = list(graph.consts) + [v for v in subst.values() if isinstance(v, Value) and v.kind == "const"
                                     and v not in graph.consts]
    g.builder = graph.builder
    return g


def _live_roots(graph: Graph) -> list[Value]:
    return list(graph.outputs) + [v for _, v in graph.updates]


def dce(graph: Graph) -> Graph:
    """Drop nodes that neither an output, a state update nor a side effect (assign) needs."""
    live: set[int] = {v.id for v in _live_roots(graph)}
    keep = []
    for node in reversed(graph.nodes):
        if node.op.side_effect or any(o.id in live for o in node.outputs):
            keep.append(node)
            live.update(i.id for i in node.inputs if isinstance(i, Value))
    keep.reverse()
    g = rebuild(graph, keep, {})
    used = live
    g.consts = [v for v in g.consts if v.id in used]
    return g


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, slice):
        return ("slice", value.start, value.stop, value.step)
    if isinstance(value, float) and value != value:
        return ("nan",)
    hash(value)
    return (type(value).__name__, value)


def cse(graph: Graph) -> Graph:
    """Merge nodes computing the same op on the same inputs with the same attributes."""
    seen: dict[Any, Node] = {}
    subst: dict[int, Any] = {}
    nodes = []
    for node in graph.nodes:
        if node.op.side_effect or node.op.random or node.op.category == "fused":
            nodes.append(node)
            continue
        try:
            key = (node.op.name, tuple(("v", subst.get(i.id, i).id) if isinstance(i, Value) else _freeze(i)
                                       for i in node.inputs), _freeze(node.attrs))
        except TypeError:
            nodes.append(node)
            continue
        first = seen.get(key)
        if first is None:
            seen[key] = node
            nodes.append(node)
        else:
            for a, b in zip(node.outputs, first.outputs):
                subst[a.id] = b
    return rebuild(graph, nodes, subst)


FOLD_LIMIT = 1 << 22  # elements: larger constants stay as computations (memory over speed)


def fold(graph: Graph) -> Graph:
    """Evaluate at compile time every node whose inputs are all constants (or literals)."""
    subst: dict[int, Any] = {}
    consts = {v.id: v for v in graph.consts}
    nodes = []
    for node in graph.nodes:
        ins = [subst.get(i.id, i) if isinstance(i, Value) else i for i in node.inputs]
        foldable = (not node.op.side_effect and not node.op.random
                    and node.op.category not in ("fused", "control", "state")
                    and all((not isinstance(i, Value)) or i.id in consts for i in ins)
                    and any(isinstance(i, Value) for i in ins)
                    and all(o.size <= FOLD_LIMIT for o in node.outputs))
        if not foldable:
            nodes.append(node)
            continue
        arrays = [consts[i.id].data if isinstance(i, Value) else i for i in ins]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        xp = device_xp(node, np)  # constants live on the graph's device: fold there
        with np.errstate(all="ignore"):
            result = node.op.impl(xp, *arrays, **attrs)
        results = result if len(node.outputs) > 1 else (result,)
        for out, r in zip(node.outputs, results):
            r = xp.asarray(r)
            if r.dtype != out.dtype:
                r = r.astype(out.dtype)
            c = Value(graph, out.shape, out.edtype, out.device, "const")
            c.data = r
            consts[c.id] = c
            subst[out.id] = c
    return rebuild(graph, nodes, subst)


def simplify(graph: Graph) -> Graph:
    """Apply each op record's ``simplify`` rule, ``rule(node, inputs) -> replacement | None`` (binary
    ops without one: identities probed from ``impl``, see :mod:`ember.graph.passes.rules`).

    A replacement is a Value (the node's output is that value) or a ``(op, inputs, attrs)`` triple
    (the node becomes that op).
    """
    subst: dict[int, Any] = {}
    nodes = []
    for node in graph.nodes:
        rule = node.op.simplify or (binary_identity if node.op.category == "binary" else None)
        ins = tuple(subst.get(i.id, i) if isinstance(i, Value) else i for i in node.inputs)
        out = rule(node, ins) if rule is not None and len(node.outputs) == 1 else None
        if out is None:
            nodes.append(node)
        elif isinstance(out, Value):
            subst[node.outputs[0].id] = out
        else:
            op, new_inputs, attrs = out
            new = Node(op, new_inputs, attrs, node.outputs)
            node.outputs[0].node = new
            nodes.append(new)
    return rebuild(graph, nodes, subst)


def fuse(graph: Graph) -> Graph:
    """The graph with elementwise groups replaced by fused nodes (what the executor will run)."""
    from ember.graph.passes.fuse import fuse_nodes

    keep = {v.id for v in _live_roots(graph)}
    g = graph.copy_structure()
    g.nodes = fuse_nodes(graph.nodes, keep, np)
    return g


PASSES: dict[str, Callable[[Graph], Graph]] = {"simplify": simplify, "cse": cse, "fold": fold, "dce": dce}


def run_passes(graph: Graph, passes: Sequence[str], history: list | None = None) -> Graph:
    """Apply the graph-level passes named in ``passes`` (in the canonical order), recording each."""
    unknown = [p for p in passes if p not in ALL_PASSES]
    if unknown:
        raise ValueError(f"unknown graph pass(es) {unknown}; choose from {list(ALL_PASSES)}")
    for name in ("simplify", "cse", "fold", "simplify", "dce"):
        if name in passes:
            graph = PASSES[name](graph)
            if history is not None:
                history.append((name, graph))
    return graph
