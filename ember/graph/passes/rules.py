"""Algebraic simplification rules, attached to the op records as ``op.extra['simplify']``.

Identities of binary ops are not listed by hand: they are found by probing each record's own
``impl`` (``impl(x, 1) == x`` bitwise on a probe array means 1 is a right identity), so a new op
gets ``x op e -> x`` for free. Structural rules (transposes folded into matmul, identity
reshapes/casts/expands/permutes, clone) name their ops here, in one place.

Example:
    >>> from ember.ops.registry import OPS
    >>> import ember.graph.passes.rules as rules
    >>> sorted(rules.identities(OPS["mul"]))
    [('left', 1), ('right', 1)]
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ember.graph.ir import Node, Value
from ember.ops.registry import OPS

_PROBE = np.array([-2.5, -1.0, 0.5, 1.0, 3.0, 7.25])


@lru_cache(maxsize=None)
def _identities_cached(name: str) -> frozenset:
    op = OPS[name]
    found = set()
    for lit in (0, 1):
        for side in ("right", "left"):
            try:
                with np.errstate(all="ignore"):
                    out = op.impl(np, _PROBE, lit) if side == "right" else op.impl(np, lit, _PROBE)
                if np.asarray(out).dtype == _PROBE.dtype and np.array_equal(out, _PROBE):
                    found.add((side, lit))
            except Exception:  # noqa: BLE001 - an op that rejects the probe simply has no identity
                pass
    return frozenset(found)


def identities(op: Any) -> set:
    return set(_identities_cached(op.name))


def _scalar_of(v: Any) -> Any:
    """The single value of a literal or an all-equal small constant, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return v
    if isinstance(v, Value) and v.kind == "const" and v.size <= 4096 and v.size > 0:
        flat = np.asarray(v.data).reshape(-1)
        if flat.dtype.kind in "fiu" and np.all(flat == flat[0]):
            return flat[0].item()
    return None


def binary_identity(node: Node, ins: tuple) -> Any:
    ids = _identities_cached(node.op.name)
    if not ids:
        return None
    out = node.outputs[0]
    a, b = ins
    for side, keep, other in (("right", a, b), ("left", b, a)):
        value = _scalar_of(other)
        if value is None or (side, value) not in ids:
            continue
        if isinstance(keep, Value) and keep.shape == out.shape and keep.edtype is out.edtype:
            return keep
    return None


def _same_value_rule(attr_check: Any) -> Any:
    def rule(node: Node, ins: tuple) -> Any:
        x = ins[0]
        out = node.outputs[0]
        if isinstance(x, Value) and x.shape == out.shape and x.edtype is out.edtype and attr_check(node, x):
            return x
        return None

    return rule


def _swaps_last_two(dims: tuple) -> bool:
    n = len(dims)
    return n >= 2 and tuple(dims) == tuple(range(n - 2)) + (n - 1, n - 2)


def permute_rule(node: Node, ins: tuple) -> Any:
    x = ins[0]
    dims = tuple(node.attrs["dims"])
    if dims == tuple(range(len(dims))):
        return x
    if isinstance(x, Value) and x.node is not None and x.node.op.name == "permute":
        inner = tuple(x.node.attrs["dims"])
        composed = tuple(inner[d] for d in dims)
        src = x.node.inputs[0]
        if composed == tuple(range(len(composed))):
            return src
        return OPS["permute"], (src,), {"dims": composed}
    return None


def matmul_rule(node: Node, ins: tuple) -> Any:
    flags = [node.attrs.get("transpose_a", False), node.attrs.get("transpose_b", False)]
    new = list(ins)
    changed = False
    for k in (0, 1):
        v = ins[k]
        if isinstance(v, Value) and v.node is not None and v.node.op.name == "permute" \
                and _swaps_last_two(v.node.attrs["dims"]):
            new[k] = v.node.inputs[0]
            flags[k] = not flags[k]
            changed = True
    if not changed:
        return None
    return OPS["matmul_t"], tuple(new), {"transpose_a": flags[0], "transpose_b": flags[1]}


def install() -> None:
    for op in OPS.values():
        if op.category == "binary" and op.impl is not None:
            op.extra.setdefault("simplify", binary_identity)
    rules = {
        "reshape": _same_value_rule(lambda n, x: True),
        "expand": _same_value_rule(lambda n, x: True),
        "sum_to": _same_value_rule(lambda n, x: True),
        "to_dtype": _same_value_rule(lambda n, x: True),
        "contiguous": _same_value_rule(lambda n, x: True),
        "clone": _same_value_rule(lambda n, x: True),
        "permute": permute_rule,
        "matmul": matmul_rule,
        "matmul_t": matmul_rule,
    }
    for name, rule in rules.items():
        if name in OPS:
            OPS[name].extra.setdefault("simplify", rule)


install()
