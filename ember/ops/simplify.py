"""Graph simplification rules that op records name in their ``simplify`` field.

A rule is ``rule(node, inputs) -> replacement | None``: a replacement is an input value (the node's
output *is* that value) or an ``(op, inputs, attrs)`` triple (the node becomes that op). Rules see
graph values (``ember.graph.ir.Value``: ``shape``, ``edtype``, ``node``) and Python literals; they
are duck-typed so the op modules that name them need not import the graph package. Identities of
binary ops (``x * 1``, ``x + 0``) need no rule: the simplify pass finds them by probing ``impl``.

Example:
    >>> from ember.ops.registry import OPS
    >>> OPS["reshape"].simplify is same_value
    True
"""
from __future__ import annotations

from typing import Any


def _is_value(v: Any) -> bool:
    return hasattr(v, "edtype") and hasattr(v, "node")


def same_value(node: Any, ins: tuple) -> Any:
    """A node whose output has its input's shape and dtype is that input (reshape to the same
    shape, a cast to the same dtype, a clone: values in a graph are never mutated)."""
    x, out = ins[0], node.outputs[0]
    if _is_value(x) and x.shape == out.shape and x.edtype is out.edtype:
        return x
    return None


def _swaps_last_two(dims: tuple) -> bool:
    n = len(dims)
    return n >= 2 and tuple(dims) == tuple(range(n - 2)) + (n - 1, n - 2)


def permute_rule(node: Any, ins: tuple) -> Any:
    """An identity permutation disappears; two permutes compose into one."""
    x = ins[0]
    dims = tuple(node.attrs["dims"])
    if dims == tuple(range(len(dims))):
        return x
    if _is_value(x) and x.node is not None and x.node.op is node.op:
        inner = tuple(x.node.attrs["dims"])
        composed = tuple(inner[d] for d in dims)
        src = x.node.inputs[0]
        if composed == tuple(range(len(composed))):
            return src
        return node.op, (src,), {"dims": composed}
    return None


def transposes_into_matmul(matmul_t: Any) -> Any:
    """A rule folding inputs made by a last-two-dims permute into ``matmul_t``'s transpose flags."""

    def rule(node: Any, ins: tuple) -> Any:
        flags = [node.attrs.get("transpose_a", False), node.attrs.get("transpose_b", False)]
        new = list(ins)
        changed = False
        for k in (0, 1):
            v = ins[k]
            if _is_value(v) and v.node is not None and v.node.op.name == "permute" \
                    and _swaps_last_two(v.node.attrs["dims"]):
                new[k] = v.node.inputs[0]
                flags[k] = not flags[k]
                changed = True
        if not changed:
            return None
        return matmul_t(), tuple(new), {"transpose_a": flags[0], "transpose_b": flags[1]}

    return rule
