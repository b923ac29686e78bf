"""``torch.fx.Graph``: an ordered list of Nodes, edited in place, printed, checked (``lint``) and turned
into Python source for ``GraphModule`` (``python_code``).

Generated source never pastes a string it did not check: node names are made identifiers here, attribute
and method names must be identifiers (or digit strings, written ``getattr(obj, "0")``), and every function
or constant that is not a plain literal is bound into the code's globals under a name this module makes.

Example:
    >>> import operator, ember.fx as fx
    >>> g = fx.Graph()
    >>> x = g.placeholder("x")
    >>> _ = g.output(g.call_function(operator.add, (x, 1)))
    >>> print(g.python_code("self").src.strip())
    def forward(self, x):
        add = x + 1
        return add
"""
from __future__ import annotations

import builtins
import contextlib
import keyword
import math
import operator
import re
from typing import Any, Callable, Iterator

from ember.fx._namespaces import ember_package
from ember.fx.node import Node, map_arg, public_name
from ember.nn.modules.module import Module

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DIGITS = re.compile(r"^[0-9]+$")
_DASHED = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")  # module names such as RegNet's "block1-0"
_CODE_NAMES = set(keyword.kwlist) | {"self", "ember", "getattr", "slice"}  # what generated code refers to
_RESERVED = _CODE_NAMES | set(dir(builtins))

# operator functions written infix (or as a subscript) in generated code, as torch.fx writes them
_BINARY = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
           operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<", operator.rshift: ">>",
           operator.eq: "==", operator.ne: "!=", operator.lt: "<", operator.le: "<=", operator.gt: ">",
           operator.ge: ">="}
_UNARY = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


def is_identifier(name: Any) -> bool:
    return isinstance(name, str) and bool(_IDENTIFIER.match(name)) and not keyword.iskeyword(name)


def check_attribute_path(target: Any, what: str) -> list[str]:
    """A dotted attribute path whose parts are identifiers, digit strings (Sequential children) or names of
    letters, digits, '_' and '-' (torchvision's RegNet names blocks 'block1-0'); generated code reads the last
    kind with ``getattr(obj, 'name')``, so nothing else can reach the code."""
    if not isinstance(target, str) or not target:
        raise ValueError(f"fx: {what} target must be a dotted attribute name, got {target!r}")
    parts = target.split(".")
    for part in parts:
        if not (is_identifier(part) or _DIGITS.match(part) or _DASHED.match(part)):
            raise ValueError(f"fx: {what} target {target!r} has the part {part!r}, which is neither an identifier "
                             "nor a digit string; rename the attribute")
    return parts


def _attribute_expr(base: str, target: str, what: str) -> str:
    expr = base
    for part in check_attribute_path(target, what):
        expr = f"{expr}.{part}" if is_identifier(part) else f'getattr({expr}, "{part}")'
    return expr


class _Sentinel:
    """The ring's root: ``_next`` is the first node, ``_prev`` the last."""

    def __init__(self) -> None:
        self._next: Any = self
        self._prev: Any = self


class PythonCode:
    """What ``Graph.python_code`` returns: the source and the globals it needs."""

    def __init__(self, src: str, globals_: dict) -> None:
        self.src = src
        self.globals = globals_


class Graph:
    """torch.fx.Graph: nodes in program order. Iteration survives erasing the current node."""

    def __init__(self, owning_module: Any = None, tracer_cls: Any = None) -> None:
        self._root = _Sentinel()
        self._insert_before: Any = self._root
        self._names: set[str] = set()
        self._name_counts: dict[str, int] = {}
        self.owning_module = owning_module
        self._tracer_cls = tracer_cls

    # ---- the node list ------------------------------------------------------------------------
    @property
    def nodes(self) -> "_NodeList":
        return _NodeList(self)

    def _iter(self, reverse: bool = False) -> Iterator[Node]:
        step = "_prev" if reverse else "_next"
        node = getattr(self._root, step)
        while node is not self._root:
            if not node._erased:
                yield node
            node = getattr(node, step)

    def _neighbour(self, node: Node, step: int) -> Any:
        other = node._next if step > 0 else node._prev
        return None if other is self._root else other

    def _link_before(self, node: Node, anchor: Any) -> None:
        node._prev, node._next = anchor._prev, anchor
        anchor._prev._next = node
        anchor._prev = node

    def _unlink(self, node: Node) -> None:
        node._prev._next = node._next
        node._next._prev = node._prev

    def _move(self, node: Node, anchor: Node, before: bool) -> None:
        if node is anchor:
            return
        self._unlink(node)
        self._link_before(node, anchor if before else anchor._next)

    def find_nodes(self, *, op: str, target: Any = None) -> list[Node]:
        return [n for n in self._iter() if n.op == op and (target is None or n.target == target)]

    # ---- naming -------------------------------------------------------------------------------
    def _unique_name(self, candidate: str) -> str:
        reserved = _RESERVED  # builtins' names too, as torch.fx (a placeholder ``input`` is named ``input_1``)
        name = re.sub(r"[^A-Za-z0-9_]", "_", candidate or "node")
        if not name.strip("_"):
            name = "node"
        if name[0].isdigit():
            name = "_" + name
        if name.startswith("_fx_"):  # that prefix belongs to the globals generated code binds
            name = "fx" + name[3:]
        base = re.sub(r"_\d+$", "", name) or name
        if name not in self._names and name not in reserved:
            self._names.add(name)
            return name
        count = self._name_counts.get(base, 0)
        while True:
            count += 1
            name = f"{base}_{count}"
            if name not in self._names:
                self._name_counts[base] = count
                self._names.add(name)
                return name

    # ---- building -----------------------------------------------------------------------------
    def create_node(self, op: str, target: Any, args: tuple | None = None, kwargs: dict | None = None,
                    name: str | None = None, type_expr: Any = None) -> Node:
        if op in ("call_method",) and not is_identifier(target):
            raise ValueError(f"fx: call_method target must be a method name (an identifier), got {target!r}")
        if op in ("call_module", "get_attr"):
            check_attribute_path(target, op)
        if op == "call_function" and not callable(target):
            raise ValueError(f"fx: call_function target must be callable, got {target!r}")
        if op == "placeholder" and not is_identifier(target):
            raise ValueError(f"fx: placeholder target must be an argument name (an identifier), got {target!r}")
        candidate = name or _default_name(op, target)
        node = Node(self, self._unique_name(candidate), op, target, tuple(args or ()), dict(kwargs or {}), type_expr)
        self._link_before(node, self._insert_before)
        return node

    def placeholder(self, name: str, type_expr: Any = None, default_value: Any = None) -> Node:
        args = () if default_value is None else (default_value,)
        return self.create_node("placeholder", name, args, type_expr=type_expr)

    def get_attr(self, qualified_name: str, type_expr: Any = None) -> Node:
        return self.create_node("get_attr", qualified_name, type_expr=type_expr)

    def call_module(self, module_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        return self.create_node("call_module", module_name, args, kwargs, type_expr=type_expr)

    def call_method(self, method_name: str, args: tuple | None = None, kwargs: dict | None = None,
                    type_expr: Any = None) -> Node:
        return self.create_node("call_method", method_name, args, kwargs, type_expr=type_expr)

    def call_function(self, the_function: Callable, args: tuple | None = None, kwargs: dict | None = None,
                      type_expr: Any = None) -> Node:
        return self.create_node("call_function", the_function, args, kwargs, type_expr=type_expr)

    def output(self, result: Any, type_expr: Any = None) -> Node:
        return self.create_node("output", "output", (result,), type_expr=type_expr)

    def node_copy(self, node: Node, arg_transform: Callable[[Node], Any] = lambda n: n) -> Node:
        """A copy of ``node`` (from any graph) at the insertion point, its node arguments mapped."""
        args = map_arg(node.args, arg_transform)
        kwargs = map_arg(node.kwargs, arg_transform)
        copy = self.create_node(node.op, node.target, args, kwargs, node.name, node.type)
        copy.meta = dict(node.meta)
        return copy

    def graph_copy(self, graph: "Graph", value_remap: dict) -> Any:
        """Copy ``graph``'s nodes (but its output and the nodes ``value_remap`` already maps) here; returns
        what its output returned, remapped."""
        for node in graph.nodes:
            if node in value_remap:
                continue
            if node.op == "output":
                return map_arg(node.args[0], lambda n: value_remap[n])
            value_remap[node] = self.node_copy(node, lambda n: value_remap[n])
        return None

    @contextlib.contextmanager
    def inserting_before(self, node: Node | None = None) -> Iterator[None]:
        previous = self._insert_before
        self._insert_before = self._first_live() if node is None else node
        try:
            yield
        finally:
            self._insert_before = previous

    @contextlib.contextmanager
    def inserting_after(self, node: Node | None = None) -> Iterator[None]:
        previous = self._insert_before
        self._insert_before = self._root if node is None else node._next
        try:
            yield
        finally:
            self._insert_before = previous

    def _first_live(self) -> Any:
        return next(iter(self._iter()), self._root)

    def erase_node(self, to_erase: Node) -> None:
        if to_erase.graph is not self:
            raise RuntimeError(f"Node {to_erase} does not belong to this Graph")
        if to_erase._erased:
            return
        if to_erase.users:
            raise RuntimeError(f"Tried to erase Node {to_erase} but it still had {len(to_erase.users)} users in the "
                               f"graph: {to_erase.users}!")
        self._unlink(to_erase)  # its own _next stays: an iterator standing on it moves on
        to_erase._erased = True
        to_erase._update_args_kwargs((), {})
        self._names.discard(to_erase.name)

    def eliminate_dead_code(self) -> bool:
        """Erase nodes without users that have no side effect (everything but placeholders and output)."""
        changed = False
        for node in list(self._iter(reverse=True)):
            if node.op in ("placeholder", "output") or node.users:
                continue
            if node.op == "call_module" or (node.op == "call_function" and getattr(node.target, "_fx_side_effect", 0)):
                continue  # a module may have side effects (torch keeps impure calls too)
            self.erase_node(node)
            changed = True
        return changed

    # ---- checks and printing ------------------------------------------------------------------
    def lint(self) -> None:
        """Check the graph's invariants (torch.fx's ``lint``): raise ``RuntimeError`` naming the problem."""
        seen: set = set()
        names: set = set()
        for node in self._iter():
            if node.graph is not self:
                raise RuntimeError(f"Node '{node}' does not belong to this Graph!")
            if node.name in names:
                raise RuntimeError(f"Node redefined name {node.name}!")
            names.add(node.name)
            for arg in node.all_input_nodes:
                if arg.graph is not self or arg._erased:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' does not belong to this Graph, but was used "
                                       "as an argument! If you are copying nodes from another graph, make sure to use "
                                       "``arg_transform`` on node_copy() to remap values")
                if arg not in seen:
                    raise RuntimeError(f"Argument '{arg}' of Node '{node}' was used before it has been defined! "
                                       "Please check that Nodes in the graph are topologically ordered")
                if node not in arg.users:
                    raise RuntimeError(f"Node '{arg}' does not list its user '{node}'")
            seen.add(node)
            if self.owning_module is not None and node.op in ("get_attr", "call_module"):
                _check_target(self.owning_module, node)

    def print_tabular(self) -> None:
        """Print the nodes as a table (opcode, name, target, args, kwargs), as torch.fx does with tabulate."""
        rows = [[n.op, n.name, str(n.target), str(n.args), str(n.kwargs)] for n in self._iter()]
        print(format_table(["opcode", "name", "target", "args", "kwargs"], rows))

    def __str__(self) -> str:
        lines = ["graph():"] + [f"    {n.format_node()}" for n in self._iter()]
        return "\n".join(lines)

    __repr__ = __str__

    # ---- code -----------------------------------------------------------------------------------
    def python_code(self, root_module: str = "self") -> PythonCode:
        """The ``forward`` function's source and globals (see the module docstring for what is checked)."""
        if not is_identifier(root_module):
            raise ValueError(f"fx: root_module must be an identifier, got {root_module!r}")
        return _CodeWriter(self, root_module).write()


class _NodeList:
    """``graph.nodes``: iterable (forwards and ``reversed``), sized, indexable by position."""

    def __init__(self, graph: Graph) -> None:
        self._graph = graph

    def __iter__(self) -> Iterator[Node]:
        return self._graph._iter()

    def __reversed__(self) -> Iterator[Node]:
        return self._graph._iter(reverse=True)

    def __len__(self) -> int:
        return sum(1 for _ in self._graph._iter())

    def __getitem__(self, index: int) -> Node:
        return list(self._graph._iter())[index]

    def __repr__(self) -> str:
        return repr(list(self))


def _default_name(op: str, target: Any) -> str:
    if op in ("placeholder", "get_attr", "call_module", "call_method"):
        return str(target)
    if op == "output":
        return "output"
    return getattr(target, "__name__", None) or "fn"


def _check_target(module: Any, node: Node) -> None:
    obj = module
    for part in node.target.split("."):
        if not hasattr(obj, part):
            raise RuntimeError(f"Node {node} target {node.target} references nonexistent attribute {part} of {obj}")
        obj = getattr(obj, part)
    if node.op == "call_module" and not isinstance(obj, Module):
        raise RuntimeError(f"Node {node} target {node.target} {part} is not a Module")


def format_table(headers: list[str], rows: list[list[str]]) -> str:
    """tabulate's "simple" format: columns as wide as their widest cell, a dashed rule under the header."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


class _CodeWriter:
    def __init__(self, graph: Graph, root: str) -> None:
        self.graph = graph
        self.root = root
        self.globals: dict = {"ember": ember_package(), "getattr": getattr, "slice": slice}
        self.bound: dict[int, str] = {}

    def bind(self, value: Any, hint: str) -> str:
        """Put ``value`` into the code's globals under a name made here (never a name read from the graph)."""
        key = id(value)
        if key not in self.bound:
            safe = re.sub(r"[^A-Za-z0-9_]", "_", hint)[:40]
            name = f"_fx_{safe}_{len(self.bound)}"
            self.bound[key] = name
            self.globals[name] = value
        return self.bound[key]

    def function_name(self, fn: Callable) -> str:
        public = public_name(fn)  # a dotted path of identifiers that resolves to ``fn`` itself
        return public if public is not None else self.bind(fn, getattr(fn, "__name__", "fn"))

    def arg(self, value: Any) -> str:
        if isinstance(value, Node):
            return value.name
        if value is None or isinstance(value, bool) or type(value) is int:
            return repr(value)
        if type(value) is float:
            return repr(value) if math.isfinite(value) else self.bind(value, "float")
        if type(value) is str:
            return repr(value)  # repr of a str is a literal: safe to paste
        if value is Ellipsis:
            return "..."
        if type(value) is tuple:
            inner = ", ".join(self.arg(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if type(value) is list:
            return "[" + ", ".join(self.arg(v) for v in value) + "]"
        if type(value) is dict and all(type(k) in (str, int) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.arg(v)}" for k, v in value.items()) + "}"
        if type(value) is slice:
            return f"slice({self.arg(value.start)}, {self.arg(value.stop)}, {self.arg(value.step)})"
        return self.bind(value, type(value).__name__)

    def call_args(self, args: tuple, kwargs: dict) -> str:
        parts = [self.arg(a) for a in args]
        for key, value in kwargs.items():
            if not is_identifier(key):
                raise ValueError(f"fx: keyword argument name {key!r} is not an identifier")
            parts.append(f"{key} = {self.arg(value)}")
        return ", ".join(parts)

    def expression(self, node: Node) -> str:
        op, target, args, kwargs = node.op, node.target, node.args, node.kwargs
        if op == "get_attr":
            return _attribute_expr(self.root, target, op)
        if op == "call_module":
            return f"{_attribute_expr(self.root, target, op)}({self.call_args(args, kwargs)})"
        if op == "call_method":
            if not is_identifier(target) or not args:
                raise ValueError(f"fx: call_method node {node.name} needs a method name and a self argument")
            return f"{self.arg(args[0])}.{target}({self.call_args(args[1:], kwargs)})"
        if not kwargs:
            if target in _BINARY and len(args) == 2:
                return f"{self.arg(args[0])} {_BINARY[target]} {self.arg(args[1])}"
            if target in _UNARY and len(args) == 1:
                return f"{_UNARY[target]}{self.arg(args[0])}"
            if target is operator.getitem and len(args) == 2:
                return f"{self.arg(args[0])}[{self.arg(args[1])}]"
            if target is getattr and len(args) == 2 and is_identifier(args[1]):
                return f"{self.arg(args[0])}.{args[1]}"
        return f"{self.function_name(target)}({self.call_args(args, kwargs)})"

    def write(self) -> PythonCode:
        params, body = [self.root], []
        for node in self.graph._iter():
            if node.op == "placeholder":
                if not is_identifier(node.target):
                    raise ValueError(f"fx: placeholder {node.name} has the argument name {node.target!r}")
                params.append(node.target if not node.args else f"{node.target} = {self.arg(node.args[0])}")
                if node.name != node.target:
                    body.append(f"{node.name} = {node.target}")
            elif node.op == "output":
                body.append(f"return {self.arg(node.args[0])}")
            else:
                body.append(f"{node.name} = {self.expression(node)}")
        if not body or not body[-1].startswith("return "):
            body.append("return None")
        src = f"def forward({', '.join(params)}):\n" + "".join(f"    {line}\n" for line in body)
        return PythonCode(src, self.globals)


__all__ = ["Graph", "Node", "PythonCode", "format_table"]
