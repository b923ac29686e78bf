"""Nested containers (tuples, lists, dicts, namedtuples) flattened to leaves and rebuilt: what
``ember.func``'s transforms accept as inputs and outputs (PyTorch's ``torch.utils._pytree``, in small).

Example:
    >>> from ember.func.pytree import tree_flatten, tree_unflatten
    >>> leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
    >>> leaves, tree_unflatten([x * 10 for x in leaves], spec)
    ([1, 2, 3], {'a': (10, 20), 'b': [30]})
"""
from __future__ import annotations

from typing import Any, Callable


class TreeSpec:
    """The structure of a flattened tree: a container kind, its keys, and the children's specs (None: a leaf)."""

    __slots__ = ("kind", "context", "children", "num_leaves")

    def __init__(self, kind: Any, context: Any, children: list) -> None:
        self.kind = kind
        self.context = context
        self.children = children
        self.num_leaves = 1 if kind is None else sum(c.num_leaves for c in children)

    def is_leaf(self) -> bool:
        return self.kind is None

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, TreeSpec) and self.kind == other.kind and self.context == other.context
                and self.children == other.children)

    def __repr__(self) -> str:
        if self.kind is None:
            return "*"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind is dict:
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.context, self.children)) + "}"
        if self.kind is list:
            return f"[{inner}]"
        if self.kind is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        return f"{self.kind.__name__}({inner})"


LEAF = TreeSpec(None, None, [])


def _is_namedtuple(value: Any) -> bool:
    """A namedtuple or a ``torch.return_types`` struct sequence: a node that keeps its type."""
    return isinstance(value, tuple) and _is_namedtuple_kind(type(value))


# The walkers below are module-level functions that take their output list as an argument: a nested function
# that calls itself is a reference cycle (function -> closure cell -> function) which keeps the leaves it
# captured (batched tensors and their arrays) alive until the cyclic garbage collector runs.
def _flatten_into(node: Any, leaves: list) -> TreeSpec:
    kind = type(node)
    if kind is tuple or kind is list:  # the common containers first (transforms flatten on every call)
        return TreeSpec(kind, None, [_flatten_into(v, leaves) for v in node])
    if kind is not dict and not isinstance(node, (dict, tuple, list)):  # a leaf (a tensor, a number, None)
        leaves.append(node)
        return LEAF
    if isinstance(node, dict):
        keys = list(node.keys())
        children = []
        for k in keys:
            v = node[k]
            if isinstance(v, (dict, tuple, list)):
                children.append(_flatten_into(v, leaves))
            else:  # a leaf (the parameters of functional_call): no call
                leaves.append(v)
                children.append(LEAF)
        return TreeSpec(dict, keys, children)
    if _is_namedtuple(node):
        return TreeSpec(type(node), None, [_flatten_into(v, leaves) for v in node])
    if isinstance(node, (tuple, list)):
        kind = type(node) if type(node) in (tuple, list) else (tuple if isinstance(node, tuple) else list)
        return TreeSpec(kind, None, [_flatten_into(v, leaves) for v in node])
    leaves.append(node)
    return LEAF


def tree_flatten(tree: Any) -> tuple[list, TreeSpec]:
    """The leaves of ``tree`` in order, and its structure."""
    leaves: list = []
    spec = _flatten_into(tree, leaves)
    return leaves, spec


def _build(s: TreeSpec, it: Any) -> Any:
    if s.kind is None:
        return next(it)
    children = [_build(c, it) for c in s.children]
    if s.kind is dict:
        return dict(zip(s.context, children))
    if s.kind in (tuple, list):
        return s.kind(children)
    if hasattr(s.kind, "n_sequence_fields"):  # a return type (struct sequence): built from one sequence
        return s.kind(children)
    return s.kind(*children)  # a namedtuple


def tree_unflatten(leaves: list, spec: TreeSpec) -> Any:
    """Rebuild a tree of ``spec``'s structure from ``leaves``."""
    return _build(spec, iter(leaves))


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    leaves, spec = tree_flatten(tree)
    return tree_unflatten([fn(x) for x in leaves], spec)


def _broadcast_into(p: Any, s: TreeSpec, out: list) -> bool:
    if not isinstance(p, (tuple, list, dict)):
        out.extend([p] * s.num_leaves)
        return True
    if s.kind is None:
        return False
    if isinstance(p, dict):
        if s.kind is not dict or set(p.keys()) != set(s.context):
            return False
        return all(_broadcast_into(p[k], c, out) for k, c in zip(s.context, s.children))
    if s.kind is dict or len(p) != len(s.children):
        return False
    if isinstance(p, list) != (s.kind is list) and not _is_namedtuple_kind(s.kind):
        return False
    return all(_broadcast_into(pp, c, out) for pp, c in zip(p, s.children))


def broadcast_prefix(prefix: Any, spec: TreeSpec) -> list | None:
    """``prefix`` (a tree whose leaves stand for whole subtrees of ``spec``, like vmap's in_dims) expanded to
    one entry per leaf of ``spec``; None when the structures do not match."""
    out: list = []
    return out if _broadcast_into(prefix, spec, out) else None


def _is_namedtuple_kind(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, tuple) and (hasattr(kind, "_fields")
                                                                    or hasattr(kind, "n_sequence_fields"))
