"""``torch.fx.Node``: one call site of a traced program (placeholder, get_attr, call_function,
call_method, call_module, output) with its arguments and the nodes that use it.

Example:
    >>> import ember.fx as fx
    >>> g = fx.Graph()
    >>> x = g.placeholder("x")
    >>> y = g.call_method("relu", (x,))
    >>> _ = g.output(y)
    >>> y.op, y.target, y.args, list(x.users)
    ('call_method', 'relu', (x,), [relu])
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from ember.fx._namespaces import public_namespaces

if TYPE_CHECKING:
    from ember.fx.graph import Graph

OPCODES = ("placeholder", "get_attr", "call_function", "call_method", "call_module", "output")

# torch.fx.node's type aliases, which custom tracers use in their annotations (evaluated at definition time).
Target = Union[Callable[..., Any], str]
BaseArgumentTypes = Union[str, int, float, bool, complex, slice, type(Ellipsis), type(None)]
Argument = Optional[Union[tuple, list, dict, slice, range, "Node", BaseArgumentTypes]]


def map_aggregate(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every leaf of nested tuples, lists, dicts and slices."""
    if isinstance(value, tuple):
        mapped = tuple(map_aggregate(v, fn) for v in value)
        return type(value)(*mapped) if hasattr(value, "_fields") else mapped
    if isinstance(value, list):
        return [map_aggregate(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: map_aggregate(v, fn) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(map_aggregate(value.start, fn), map_aggregate(value.stop, fn), map_aggregate(value.step, fn))
    return fn(value)


def map_arg(value: Any, fn: Callable[["Node"], Any]) -> Any:
    """Apply ``fn`` to every Node inside ``value`` (torch.fx.node.map_arg)."""
    return map_aggregate(value, lambda v: fn(v) if isinstance(v, Node) else v)


class Node:
    """A node of an fx Graph. ``args``/``kwargs`` may hold other nodes; setting them keeps ``users`` right."""

    def __init__(self, graph: "Graph", name: str, op: str, target: Any, args: tuple, kwargs: dict,
                 type_expr: Any = None) -> None:
        if op not in OPCODES:
            raise ValueError(f"fx.Node: unknown opcode {op!r}; expected one of {', '.join(OPCODES)}")
        self.graph = graph
        self.name = name
        self.op = op
        self.target = target
        self.type = type_expr
        self.users: dict[Node, None] = {}
        self.meta: dict = {}
        self._input_nodes: dict[Node, None] = {}
        self._args: tuple = ()
        self._kwargs: dict = {}
        self._erased = False
        self._update_args_kwargs(tuple(args), dict(kwargs))

    # ---- arguments and uses -------------------------------------------------------------------
    @property
    def args(self) -> tuple:
        return self._args

    @args.setter
    def args(self, value: tuple) -> None:
        self._update_args_kwargs(tuple(value), self._kwargs)

    @property
    def kwargs(self) -> dict:
        return self._kwargs

    @kwargs.setter
    def kwargs(self, value: dict) -> None:
        self._update_args_kwargs(self._args, dict(value))

    @property
    def all_input_nodes(self) -> list["Node"]:
        return list(self._input_nodes)

    def _update_args_kwargs(self, args: tuple, kwargs: dict) -> None:
        for old in self._input_nodes:
            old.users.pop(self, None)
        self._args, self._kwargs = args, kwargs
        self._input_nodes = {}
        map_arg((args, kwargs), lambda n: self._input_nodes.setdefault(n, None))
        for new in self._input_nodes:
            new.users.setdefault(self, None)

    def update_arg(self, index: int, value: Any) -> None:
        args = list(self._args)
        args[index] = value
        self.args = tuple(args)

    def update_kwarg(self, key: str, value: Any) -> None:
        self.kwargs = {**self._kwargs, key: value}

    def replace_all_uses_with(self, replace_with: "Node", delete_user_cb: Callable[["Node"], bool] = lambda u: True,
                              *, propagate_meta: bool = False) -> list["Node"]:
        """Make every user of this node use ``replace_with`` instead; returns the users changed."""
        if propagate_meta:
            for key, value in self.meta.items():
                replace_with.meta.setdefault(key, value)
        changed = []
        for user in list(self.users):
            if not delete_user_cb(user):
                continue
            user.replace_input_with(self, replace_with)
            changed.append(user)
        return changed

    def replace_input_with(self, old: "Node", new: "Node") -> None:
        """Use ``new`` wherever this node's arguments hold ``old``."""
        swap = lambda n: new if n is old else n  # noqa: E731
        self._update_args_kwargs(map_arg(self._args, swap), map_arg(self._kwargs, swap))

    # ---- order in the graph -------------------------------------------------------------------
    @property
    def next(self) -> "Node":
        return self.graph._neighbour(self, 1)

    @property
    def prev(self) -> "Node":
        return self.graph._neighbour(self, -1)

    def prepend(self, node: "Node") -> None:
        """Move ``node`` right before this one."""
        self.graph._move(node, self, before=True)

    def append(self, node: "Node") -> None:
        """Move ``node`` right after this one."""
        self.graph._move(node, self, before=False)

    # ---- printing -----------------------------------------------------------------------------
    def format_node(self) -> str:
        """One line of ``print(graph)``, as torch.fx writes it."""
        if self.op == "output":
            return f"return {_format_arg(self.args[0], bare=True)}"
        head = f"%{self.name} : [num_users={len(self.users)}] = {self.op}[target={_target_text(self.target)}]"
        if self.op == "placeholder":
            return head + (f"(default={self.args[0]!r})" if self.args else "")
        if self.op == "get_attr":
            return head
        return f"{head}(args = {_format_arg(self.args)}, kwargs = {_format_arg(self.kwargs)})"

    def __repr__(self) -> str:
        return self.name


def public_name(fn: Any) -> str | None:
    """``ember.cat`` / ``ember.nn.functional.relu`` when ``fn`` is that public function (``ember.ops.aten.mm.default``
    for an ATen overload, make_fx's targets), else None."""
    path = getattr(type(fn), "_public_path", None)
    if path is not None:
        path = fn._public_path
        if isinstance(path, str) and path.startswith("ember.ops.") and all(p.isidentifier() for p in path.split(".")):
            obj = public_namespaces()[0][1]
            for part in path.split(".")[1:]:
                obj = getattr(obj, part, None)
            if obj is fn:  # the path resolves to this very object: safe to paste into generated code
                return path
        return None
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str) or not name.isidentifier():
        return None
    for prefix, namespace in public_namespaces()[:2]:
        if getattr(namespace, name, None) is fn:
            return f"{prefix}.{name}"
    return None


def _target_text(target: Any) -> str:
    if isinstance(target, str):
        return target
    public = public_name(target)
    if public is not None:
        return public
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    module = "operator" if module == "_operator" else module
    return f"{module}.{name}" if module else name


def _format_arg(value: Any, bare: bool = False) -> str:
    if isinstance(value, Node):
        return value.name if bare else f"%{value.name}"
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        inner = ", ".join(_format_arg(v, bare) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_format_arg(v, bare) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_format_arg(v, bare)}" for k, v in value.items()) + "}"
    return repr(value)
