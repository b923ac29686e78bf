"""``torch.utils._pytree``: nested containers flattened to leaves and rebuilt, with a registry of node types.

Libraries import this private PyTorch module directly: ema_pytorch's ``EMAPytree`` (imported by
denoising-diffusion-pytorch at package import), Hugging Face ``transformers`` (registers ``ModelOutput``),
``accelerate``. The rules are PyTorch's (torch 2.13):

- nodes are tuple, list, dict (keys in insertion order), OrderedDict, defaultdict, deque, namedtuples, struct
  sequences (``torch.return_types``) and types given to ``register_pytree_node``; everything else is a leaf,
  ``None`` and subclasses of dict that were not registered included;
- ``is_leaf(x)`` stops the walk at ``x``; ``tree_map(fn, tree, *rests)`` maps several trees of one structure;
- ``TreeSpec(type, context, children_specs)`` prints as PyTorch's (``TreeSpec(list, None, [*, *])``).

``ember.func``'s transforms keep their own, smaller walker (``ember.func.pytree``).

Example:
    >>> from ember.utils import _pytree as pytree
    >>> leaves, spec = pytree.tree_flatten({"w": (1, 2), "b": [3]})
    >>> leaves, spec.num_leaves
    ([1, 2, 3], 3)
    >>> pytree.tree_unflatten([x * 10 for x in leaves], spec)
    {'w': (10, 20), 'b': [30]}
"""
from __future__ import annotations

import dataclasses
import warnings
from collections import OrderedDict, defaultdict, deque, namedtuple
from typing import Any, Callable, Iterable, NamedTuple

__all__ = ["PyTree", "Context", "TreeSpec", "LeafSpec", "NodeDef", "SUPPORTED_NODES", "register_pytree_node",
           "register_dataclass", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_structure", "tree_iter",
           "tree_map", "tree_map_", "tree_map_only", "tree_map_only_", "tree_all", "tree_any", "tree_all_only",
           "tree_any_only", "tree_is_leaf", "treespec_pprint", "is_namedtuple", "is_namedtuple_class",
           "is_namedtuple_instance", "is_structseq", "is_structseq_class", "is_structseq_instance",
           "SequenceKey", "MappingKey", "GetAttrKey", "KeyEntry", "KeyPath", "keystr", "tree_flatten_with_path",
           "tree_leaves_with_path", "tree_map_with_path"]

PyTree = Any
Context = Any
FlattenFunc = Callable[[PyTree], "tuple[list, Context]"]
UnflattenFunc = Callable[[Iterable, Context], PyTree]


class NodeDef(NamedTuple):
    """How one node type is taken apart (``flatten_fn``: children and context) and rebuilt (``unflatten_fn``)."""

    type: type
    flatten_fn: FlattenFunc
    unflatten_fn: UnflattenFunc
    flatten_with_keys_fn: Any = None


SUPPORTED_NODES: dict[type, NodeDef] = {}


def register_pytree_node(cls: type, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc, *,
                         serialized_type_name: str | None = None, to_dumpable_context: Any = None,
                         from_dumpable_context: Any = None, flatten_with_keys_fn: Any = None) -> None:
    """Make ``cls`` a node: ``flatten_fn(x) -> (children, context)``, ``unflatten_fn(children, context) -> x``.

    Registering a type twice raises ValueError, as PyTorch. (Serialization names are accepted and unused: ember
    does not write tree specs to JSON.)
    """
    if cls in SUPPORTED_NODES:
        raise ValueError(f"{cls} is already registered as pytree node.")
    SUPPORTED_NODES[cls] = NodeDef(cls, flatten_fn, unflatten_fn, flatten_with_keys_fn)


def _register_pytree_node(cls: type, flatten_fn: FlattenFunc, unflatten_fn: UnflattenFunc, *args: Any,
                          **kwargs: Any) -> None:
    """The deprecated spelling (transformers' older releases call it); PyTorch warns and registers."""
    warnings.warn("`torch.utils._pytree._register_pytree_node` is deprecated. Please use "
                  "`torch.utils._pytree.register_pytree_node` instead.", FutureWarning, stacklevel=2)
    for name in ("to_str_fn", "maybe_from_str_fn"):
        kwargs.pop(name, None)
    register_pytree_node(cls, flatten_fn, unflatten_fn, **kwargs)


def register_dataclass(cls: type, *, field_names: list[str] | None = None,
                       drop_field_names: list[str] | None = None, serialized_type_name: str | None = None) -> None:
    """A dataclass as a node: its (init) fields are the children, in declaration order."""
    names = field_names if field_names is not None else [
        f.name for f in dataclasses.fields(cls) if f.init and f.name not in (drop_field_names or [])]
    register_pytree_node(cls, lambda x: ([getattr(x, n) for n in names], list(names)),
                         lambda values, ctx: cls(**dict(zip(ctx, values))),
                         serialized_type_name=serialized_type_name,
                         flatten_with_keys_fn=lambda x: ([(GetAttrKey(n), getattr(x, n)) for n in names], list(names)))


# ---- the built-in node types -----------------------------------------------------------------------
def is_namedtuple_class(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def is_namedtuple_instance(obj: Any) -> bool:
    return is_namedtuple_class(type(obj))


def is_namedtuple(obj: Any) -> bool:
    """A namedtuple class or instance."""
    return is_namedtuple_class(obj if isinstance(obj, type) else type(obj))


def is_structseq_class(cls: Any) -> bool:
    """A struct sequence (``torch.return_types.max``, ``os.stat_result``): a direct tuple subclass with sequence
    fields."""
    return (isinstance(cls, type) and cls.__bases__ == (tuple,)
            and all(isinstance(getattr(cls, n, None), int) for n in ("n_fields", "n_sequence_fields", "n_unnamed_fields")))


def is_structseq_instance(obj: Any) -> bool:
    return is_structseq_class(type(obj))


def is_structseq(obj: Any) -> bool:
    return is_structseq_class(obj if isinstance(obj, type) else type(obj))


def _defaultdict_flatten(d: defaultdict) -> tuple[list, Context]:
    return list(d.values()), [d.default_factory, list(d.keys())]


def _defaultdict_unflatten(values: Iterable, context: Context) -> defaultdict:
    factory, keys = context
    return defaultdict(factory, zip(keys, values))


# ---- key paths: where a leaf sits (``tree_flatten_with_path``, ``keystr``) ----------------------------------
@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """The key of a list/tuple child: printed ``[0]``."""

    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"

    def get(self, sequence: Any) -> Any:
        return sequence[self.idx]


@dataclasses.dataclass(frozen=True)
class MappingKey:
    """The key of a dict child: printed ``['name']``."""

    key: Any

    def __str__(self) -> str:
        return f"[{self.key!r}]"

    def get(self, mapping: Any) -> Any:
        return mapping[self.key]


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """The key of an attribute child (namedtuple fields, dataclasses): printed ``.name``."""

    name: str

    def __str__(self) -> str:
        return f".{self.name}"

    def get(self, obj: Any) -> Any:
        return getattr(obj, self.name)


KeyEntry = Any
KeyPath = tuple


def keystr(kp: KeyPath) -> str:
    """A key path as text: ``keystr((MappingKey('a'), SequenceKey(0)))`` is ``"['a'][0]"``."""
    return "".join(str(k) for k in kp)


def _dict_flatten(d: dict) -> tuple[list, Context]:
    return list(d.values()), list(d.keys())


def _dict_unflatten(values: Iterable, context: Context) -> dict:
    return dict(zip(context, values))


def _dict_flatten_with_keys(d: dict) -> tuple[list, Context]:
    values, context = _dict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context, values)], context


def _seq_flatten_with_keys(flatten_fn: FlattenFunc) -> Callable[[Any], tuple[list, Context]]:
    def with_keys(x: Any) -> tuple[list, Context]:
        values, context = flatten_fn(x)
        return [(SequenceKey(i), v) for i, v in enumerate(values)], context
    return with_keys


def _list_flatten(x: list) -> tuple[list, Context]:
    return list(x), None


def _tuple_flatten(x: tuple) -> tuple[list, Context]:
    return list(x), None


def _deque_flatten(d: deque) -> tuple[list, Context]:
    return list(d), d.maxlen


def _defaultdict_flatten_with_keys(d: defaultdict) -> tuple[list, Context]:
    values, context = _defaultdict_flatten(d)
    return [(MappingKey(k), v) for k, v in zip(context[1], values)], context


register_pytree_node(tuple, _tuple_flatten, lambda values, ctx: tuple(values),
                     flatten_with_keys_fn=_seq_flatten_with_keys(_tuple_flatten))
register_pytree_node(list, _list_flatten, lambda values, ctx: list(values),
                     flatten_with_keys_fn=_seq_flatten_with_keys(_list_flatten))
register_pytree_node(dict, _dict_flatten, _dict_unflatten, flatten_with_keys_fn=_dict_flatten_with_keys)
register_pytree_node(OrderedDict, _dict_flatten, lambda values, ctx: OrderedDict(zip(ctx, values)),
                     flatten_with_keys_fn=_dict_flatten_with_keys)
register_pytree_node(defaultdict, _defaultdict_flatten, _defaultdict_unflatten,
                     flatten_with_keys_fn=_defaultdict_flatten_with_keys)
register_pytree_node(deque, _deque_flatten, lambda values, ctx: deque(values, maxlen=ctx),
                     flatten_with_keys_fn=_seq_flatten_with_keys(_deque_flatten))


def _namedtuple_flatten_with_keys(x: Any) -> tuple[list, Context]:
    return [(GetAttrKey(f), v) for f, v in zip(type(x)._fields, x)], type(x)


# namedtuples are nodes under the spec type ``namedtuple``, with their class as the context
_NAMEDTUPLE = NodeDef(namedtuple, lambda x: (list(x), type(x)), lambda values, ctx: ctx(*values),  # type: ignore[arg-type]
                      _namedtuple_flatten_with_keys)


def _is_return_type(cls: type) -> bool:
    """``torch.return_types.max`` and friends: PyTorch registers each as its own node (other struct sequences,
    such as ``os.stat_result``, are leaves)."""
    return (isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "n_sequence_fields")
            and str(getattr(cls, "__module__", "")).endswith("return_types"))


def _return_type_def(cls: type) -> NodeDef:
    return NodeDef(cls, lambda x: (list(x), None), lambda values, ctx: cls(list(values)))


def _node_def(node: Any) -> NodeDef | None:
    kind = type(node)
    found = SUPPORTED_NODES.get(kind)
    if found is not None:
        return found
    if is_namedtuple_class(kind):
        return _NAMEDTUPLE
    if _is_return_type(kind):
        return _return_type_def(kind)
    return None


# ---- TreeSpec ---------------------------------------------------------------------------------------
class TreeSpec:
    """A tree's structure: the node's type, its context (dict keys, a namedtuple's class...) and the children's
    specs. A leaf is ``LeafSpec()`` (printed ``*``)."""

    def __init__(self, type: Any, context: Context, children_specs: list["TreeSpec"]) -> None:  # noqa: A002
        self.type = type
        self.context = context
        self._children = list(children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self._children)
        self.num_leaves = sum(c.num_leaves for c in self._children)
        self.num_children = len(self._children)

    @property
    def children_specs(self) -> list["TreeSpec"]:
        return self._children

    def children(self) -> list["TreeSpec"]:
        return list(self._children)

    def child(self, index: int) -> "TreeSpec":
        return self._children[index]

    def is_leaf(self) -> bool:
        return False

    def unflatten(self, leaves: Iterable[Any]) -> PyTree:
        return tree_unflatten(leaves, self)

    def flatten_up_to(self, tree: PyTree) -> list:
        """The subtrees of ``tree`` at this spec's leaves (``tree`` must have this structure above them)."""
        out: list = []
        _flatten_up_to(self, tree, out)
        return out

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, TreeSpec) or other.is_leaf() != self.is_leaf():
            return False
        return (self.type is other.type and self.context == other.context
                and self._children == other._children)

    def __hash__(self) -> int:
        return hash((self.type, self.num_nodes, self.num_leaves))

    def __repr__(self, indent: int = 0) -> str:
        # PyTorch's layout: the first child on the same line, each further child on a new line indented by 2
        inner = indent + 2
        parts = [c.__repr__(inner) for c in self._children]
        body = parts[0] if parts else ""
        if len(parts) > 1:
            body += "," + ",".join("\n" + " " * inner + p for p in parts[1:])
        name = getattr(self.type, "__name__", repr(self.type))
        return f"TreeSpec({name}, {self.context}, [{body}])"


class LeafSpec(TreeSpec):
    """The spec of a leaf."""

    def __init__(self) -> None:
        super().__init__(None, None, [])
        self.num_nodes = 1
        self.num_leaves = 1

    def is_leaf(self) -> bool:
        return True

    def __repr__(self, indent: int = 0) -> str:
        return "*"


_LEAF_SPEC = LeafSpec()


def _is_leaf(node: Any, is_leaf: Callable[[Any], bool] | None) -> bool:
    return (is_leaf is not None and is_leaf(node)) or _node_def(node) is None


def tree_is_leaf(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True when ``tree`` is a leaf (not a registered node, or ``is_leaf`` says so)."""
    return _is_leaf(tree, is_leaf)


def _flatten(node: Any, leaves: list, is_leaf: Callable[[Any], bool] | None) -> TreeSpec:
    if is_leaf is not None and is_leaf(node):
        leaves.append(node)
        return _LEAF_SPEC
    node_def = _node_def(node)
    if node_def is None:
        leaves.append(node)
        return _LEAF_SPEC
    children, context = node_def.flatten_fn(node)
    return TreeSpec(node_def.type, context, [_flatten(c, leaves, is_leaf) for c in children])


def tree_flatten(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list, TreeSpec]:
    """The leaves of ``tree`` left to right, and its structure."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def _unflatten_fn(spec: TreeSpec) -> UnflattenFunc:
    found = SUPPORTED_NODES.get(spec.type) or (_NAMEDTUPLE if spec.type is namedtuple else None)
    if found is not None:
        return found.unflatten_fn
    if _is_return_type(spec.type):
        return _return_type_def(spec.type).unflatten_fn
    raise ValueError(f"{spec.type} is not a registered pytree node type")


def _build(spec: TreeSpec, it: Any) -> Any:
    if spec.is_leaf():
        return next(it)
    return _unflatten_fn(spec)([_build(c, it) for c in spec.children_specs], spec.context)


def tree_unflatten(leaves: Iterable[Any], treespec: TreeSpec) -> PyTree:
    """Rebuild a tree of ``treespec``'s structure from ``leaves`` (exactly ``treespec.num_leaves`` of them)."""
    if not isinstance(treespec, TreeSpec):
        raise TypeError(f"tree_unflatten(leaves, treespec): Expected `treespec` to be instance of TreeSpec but got "
                        f"item of type {type(treespec)}.")
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ValueError(f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers to a "
                         f"pytree that holds {treespec.num_leaves} items ({treespec}).")
    return _build(treespec, iter(leaves))


def _flatten_up_to(spec: TreeSpec, tree: Any, out: list) -> None:
    if spec.is_leaf():
        out.append(tree)
        return
    node_def = _node_def(tree)
    if node_def is None or node_def.type is not spec.type:
        raise ValueError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    children, context = node_def.flatten_fn(tree)
    if len(children) != spec.num_children:
        raise ValueError(f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}.")
    if context != spec.context:
        raise ValueError(f"Node context mismatch for node type {spec.type}; expected {spec.context!r}, "
                         f"but got {context!r}.")
    for c, child_spec in zip(children, spec.children_specs):
        _flatten_up_to(child_spec, c, out)


def _flatten_with_path(node: Any, path: tuple, out: list, is_leaf: Callable[[Any], bool] | None) -> TreeSpec:
    if _is_leaf(node, is_leaf):
        out.append((path, node))
        return _LEAF_SPEC
    node_def = _node_def(node)
    if node_def.flatten_with_keys_fn is None:
        raise ValueError(f"Did not find a flatten_with_keys_fn for type: {node_def.type}. Please pass a "
                         f"flatten_with_keys_fn argument to register_pytree_node.")
    keyed, context = node_def.flatten_with_keys_fn(node)
    return TreeSpec(node_def.type, context,
                    [_flatten_with_path(child, path + (key,), out, is_leaf) for key, child in keyed])


def tree_flatten_with_path(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None
                           ) -> tuple[list[tuple[KeyPath, Any]], TreeSpec]:
    """Like ``tree_flatten``, each leaf with its key path: ``[((MappingKey('a'), SequenceKey(0)), leaf), ...]``."""
    out: list = []
    return out, _flatten_with_path(tree, (), out, is_leaf)


def tree_leaves_with_path(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf)[0]


def tree_map_with_path(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
                       is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """``func(key_path, leaf, *other_leaves)`` for each leaf; the results in ``tree``'s structure."""
    pairs, spec = tree_flatten_with_path(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(kp, x, *xs) for (kp, x), *xs in zip(pairs, *others)], spec)


def tree_leaves(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> Iterable[Any]:
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
             is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """``func`` applied to each leaf (with the matching leaves of ``rests``, which share ``tree``'s structure)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func: Callable[..., Any], tree: PyTree, *rests: PyTree,
              is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """``func`` called on each leaf for its effect (``x.zero_()``); returns ``tree`` itself."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [spec.flatten_up_to(r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _only(type_or_types: Any, func: Callable[[Any], Any]) -> Callable[[Any], Any]:
    types = tuple(type_or_types) if isinstance(type_or_types, (tuple, list)) else type_or_types
    return lambda x: func(x) if isinstance(x, types) else x


def tree_map_only(type_or_types: Any, func: Callable[[Any], Any], tree: PyTree,
                  is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    """``func`` applied to the leaves that are instances of ``type_or_types``; the others are kept."""
    return tree_map(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_map_only_(type_or_types: Any, func: Callable[[Any], Any], tree: PyTree,
                   is_leaf: Callable[[Any], bool] | None = None) -> PyTree:
    return tree_map_(_only(type_or_types, func), tree, is_leaf=is_leaf)


def tree_all(pred: Callable[[Any], bool], tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree: PyTree, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return any(map(pred, tree_leaves(tree, is_leaf)))


def tree_all_only(type_or_types: Any, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Callable[[Any], bool] | None = None) -> bool:
    types = tuple(type_or_types) if isinstance(type_or_types, (tuple, list)) else type_or_types
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, types))


def tree_any_only(type_or_types: Any, pred: Callable[[Any], bool], tree: PyTree,
                  is_leaf: Callable[[Any], bool] | None = None) -> bool:
    types = tuple(type_or_types) if isinstance(type_or_types, (tuple, list)) else type_or_types
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, types))


def treespec_pprint(treespec: TreeSpec) -> str:
    """The structure with ``*`` for each leaf: ``([*, *], {'a': *})``."""
    return str(tree_unflatten([_Star()] * treespec.num_leaves, treespec))


class _Star:
    def __repr__(self) -> str:
        return "*"
