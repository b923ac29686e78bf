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

# Signed zeros, infinities and NaN included: ``x + 0`` is not an identity (-0.0 + 0 is +0.0), ``x - 0`` and
# ``x + -0.0`` are. Integer results are probed separately (``x + 0`` is one there).
_PROBE = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0, 7.25, np.inf, -np.inf, np.nan])
_INT_PROBE = np.array([-7, -1, 0, 1, 3, 100], dtype=np.int64)
_LITERALS = {"0": 0, "-0": -0.0, "1": 1}


def _same_bits(out: Any, probe: np.ndarray) -> bool:
    out = np.asarray(out)
    return (out.dtype == probe.dtype and np.array_equal(out, probe, equal_nan=probe.dtype.kind == "f")
            and np.array_equal(np.signbit(out), np.signbit(probe)))


@lru_cache(maxsize=None)
def _identities_cached(name: str, integer: bool = False) -> frozenset:
    op = OPS[name]
    probe = _INT_PROBE if integer else _PROBE
    found = set()
    for key, lit in _LITERALS.items():
        if integer and key == "-0":
            continue
        for side in ("right", "left"):
            try:
                with np.errstate(all="ignore"):
                    out = op.impl(np, probe, lit) if side == "right" else op.impl(np, lit, probe)
                if _same_bits(out, probe):
                    found.add((side, key))
            except Exception:  # noqa: BLE001 - an op that rejects the probe simply has no identity
                pass
    return frozenset(found)


def identities(op: Any) -> set:
    return {(side, _LITERALS[key]) for side, key in _identities_cached(op.name)}


def _scalar_of(v: Any) -> Any:
    """The literal key ("0", "-0", "1") of a literal or an all-equal small constant, else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        value = v
    elif isinstance(v, Value) and v.kind == "const" and v.size <= 4096 and v.size > 0:
        flat = host_array(v).reshape(-1)
        if flat.dtype.kind not in "fiu" or not np.all(flat == flat[0]):
            return None
        if flat.dtype.kind == "f" and flat[0] == 0 and np.any(np.signbit(flat) != np.signbit(flat[0])):
            return None  # a mix of +0 and -0
        value = flat[0].item()
    else:
        return None
    if value == 0:
        return "-0" if isinstance(value, float) and np.signbit(value) else "0"
    return "1" if value == 1 else None


def binary_identity(node: Node, ins: tuple) -> Any:
    out = node.outputs[0]
    ids = _identities_cached(node.op.name, out.dtype.kind in "iub")
    if not ids:
        return None
    a, b = ins
    for side, keep, other in (("right", a, b), ("left", b, a)):
        value = _scalar_of(other)
        if value is None or (side, value) not in ids:
            continue
        if isinstance(keep, Value) and keep.shape == out.shape and keep.edtype is out.edtype:
            return keep
    return None
