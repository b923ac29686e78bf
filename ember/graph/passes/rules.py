"""The simplify pass's rule for binary ops: identities found by probing each record's own ``impl``.

Identities are not listed by hand: ``impl(x, 1) == x`` bitwise on a probe array means 1 is a right
identity, so a new binary op gets ``x op e -> x`` for free. Structural rules (transposes folded
into matmul, identity reshapes/casts/permutes, clone) sit on their op records' ``simplify`` field
(:mod:`ember.ops.simplify`).

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

from ember.graph.ir import Node, Value, host_array
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
        flat = host_array(v).reshape(-1)
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
