"""``torch.fx.GraphModule``: a Module whose ``forward`` is Python generated from a Graph.

It holds the parameters, buffers and submodules its ``get_attr`` / ``call_module`` nodes name (copied by
reference from the traced module, so weights are shared), and regenerates ``forward`` on ``recompile()``
(also when ``graph`` is assigned). Each instance has a class of its own, as in torch.fx, so editing one
GraphModule's graph never changes another's ``forward``.

Example:
    >>> import ember, ember.fx as fx
    >>> m = ember.nn.Linear(3, 2)
    >>> gm = fx.symbolic_trace(m)
    >>> x = ember.randn(4, 3)
    >>> bool((gm(x) == m(x)).all())
    True
"""
from __future__ import annotations

import importlib
import itertools
import linecache
import sys
from typing import Any

from ember.fx.graph import Graph, PythonCode, check_attribute_path
from ember.fx.node import map_aggregate, map_arg
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

_COUNTER = itertools.count()


def _copy_attr(source: Module, target: Module, qualified_name: str) -> None:
    *path, field = check_attribute_path(qualified_name, "attribute")
    for item in path:
        source_child = getattr(source, item)
        target_child = getattr(target, item, None)
        if target_child is None:
            target_child = Module()
            setattr(target, item, target_child)
        source, target = source_child, target_child
    value = getattr(source, field)
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        target.register_buffer(field, value)
    else:
        setattr(target, field, value)


class GraphModule(Module):
    """``GraphModule(root, graph, class_name)``: ``root`` is a Module or a dict from qualified names to the
    modules/tensors the graph's ``get_attr`` and ``call_module`` nodes use."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "GraphModule":
        if "_fx_instance_class" not in cls.__dict__:  # one class per instance: forward is set on it
            cls = type(cls.__name__, (cls,), {"_fx_instance_class": True})
        return super().__new__(cls)

    def __init__(self, root: Module | dict, graph: Graph, class_name: str = "GraphModule") -> None:
        super().__init__()
        type(self).__name__ = class_name
        type(self).__qualname__ = class_name
        for node in graph.nodes:
            if node.op not in ("get_attr", "call_module"):
                continue
            if isinstance(root, Module):
                _copy_attr(root, self, node.target)
            elif isinstance(root, dict):
                if node.target not in root:
                    raise RuntimeError(f"Node {node.name} referenced target {node.target} but that target was not "
                                       "provided in ``root``!")
                self._install(node.target, root[node.target])
            else:
                raise RuntimeError(f"Unsupported type {type(root).__name__} passed for root!")
        self.training = getattr(root, "training", True)
        self.graph = graph

    def _install(self, qualified_name: str, value: Any) -> None:
        *path, field = check_attribute_path(qualified_name, "attribute")
        owner: Module = self
        for item in path:
            child = getattr(owner, item, None)
            if child is None:
                child = Module()
                setattr(owner, item, child)
            owner = child
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            owner.register_buffer(field, value)
        else:
            setattr(owner, field, value)

    def __reduce__(self) -> tuple:
        """Pickle (``torch.save(gm)``, ``pickle.dumps``, ``copy.deepcopy``) as the module's state plus its graph
        as data (node by node); loading rebuilds the Graph and generates ``forward`` from it again, so no code
        is read from the file (torch pickles the generated source and runs it on load)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_graph", "_code")}
        spec = [(n.op, n.name, _picklable_target(n.target) if n.op == "call_function" else n.target,
                 map_arg(n.args, _node_ref), map_arg(n.kwargs, _node_ref), n.type) for n in self.graph.nodes]
        return (_rebuild_graph_module, (state, spec, type(self).__name__))

    @property
    def graph(self) -> Graph:
        return self.__dict__["_graph"]

    @graph.setter
    def graph(self, graph: Graph) -> None:
        self.__dict__["_graph"] = graph
        graph.owning_module = self
        self.recompile()

    @property
    def code(self) -> str:
        """The source of ``forward`` as generated from the graph."""
        return self.__dict__["_code"]

    def recompile(self) -> PythonCode:
        """Regenerate ``forward`` from ``self.graph`` (call after editing the graph)."""
        python_code = self.graph.python_code("self")
        source = python_code.src
        filename = f"<eval_with_key>.{next(_COUNTER)}"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks show it
        namespace = dict(python_code.globals)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - source made by Graph.python_code
        type(self).forward = namespace["forward"]
        self.__dict__["_code"] = source
        return python_code

    def print_readable(self, print_output: bool = True) -> str:
        text = f"class {type(self).__name__}(ember.nn.Module):\n" + "".join(
            f"    {line}\n" for line in self.code.splitlines())
        if print_output:
            print(text)
        return text

    def add_submodule(self, target: str, m: Module) -> bool:
        *path, field = check_attribute_path(target, "submodule")
        owner: Module = self
        for item in path:
            child = getattr(owner, item, None)
            if child is None:
                child = Module()
                setattr(owner, item, child)
            if not isinstance(child, Module):
                return False
            owner = child
        setattr(owner, field, m)
        return True

    def delete_submodule(self, target: str) -> bool:
        *path, field = check_attribute_path(target, "submodule")
        owner: Any = self
        for item in path:
            owner = getattr(owner, item, None)
            if not isinstance(owner, Module):
                return False
        if field not in owner._modules:
            return False
        del owner._modules[field]
        return True

    def delete_all_unused_submodules(self) -> None:
        used: set[str] = set()
        for node in self.graph.nodes:
            if node.op in ("call_module", "get_attr"):
                parts = node.target.split(".")
                used.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
        for name, _ in list(self.named_modules()):
            if name and name not in used and not any(u.startswith(name + ".") for u in used):
                self.delete_submodule(name)


class _NodeRef:
    """A node named in another node's arguments, in a pickled graph."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple:
        return (_NodeRef, (self.name,))


def _node_ref(node: Any) -> _NodeRef:
    return _NodeRef(node.name)


# Where ember exposes functions a graph calls; a function wrapped after its definition (the out= and autocast
# wrappers keep the inner function's __qualname__) is pickled by the name it has in one of these.
_FUNCTION_NAMESPACES = ("ember", "ember.nn.functional", "ember.linalg", "ember.special", "ember.fft")


class _FunctionRef:
    """A function of one of ember's public namespaces, by name (for functions pickle cannot find by their
    ``__qualname__``)."""

    __slots__ = ("namespace", "name")

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace, self.name = namespace, name

    def __reduce__(self) -> tuple:
        return (_FunctionRef, (self.namespace, self.name))


def _findable_by_pickle(fn: Any) -> bool:
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    owner: Any = module
    for part in str(getattr(fn, "__qualname__", "")).split("."):
        owner = getattr(owner, part, None)
    return owner is fn


def _picklable_target(fn: Any) -> Any:
    if _findable_by_pickle(fn):
        return fn
    name = getattr(fn, "__name__", "")
    for namespace in _FUNCTION_NAMESPACES:
        if getattr(sys.modules.get(namespace), name, None) is fn:
            return _FunctionRef(namespace, name)
    return fn  # pickle reports what it cannot find, as for any other object


def _function_of(target: Any) -> Any:
    if isinstance(target, _FunctionRef):
        if target.namespace not in _FUNCTION_NAMESPACES or not target.name.isidentifier():
            raise RuntimeError(f"GraphModule: refusing the pickled function {target.namespace}.{target.name}")
        return getattr(importlib.import_module(target.namespace), target.name)
    return target


def _rebuild_graph_module(state: dict, spec: list, class_name: str) -> GraphModule:
    """Inverse of ``GraphModule.__reduce__``: each node re-created through ``Graph.create_node`` (which checks
    opcodes, targets and names), ``forward`` generated by ember from that graph."""
    graph = Graph()
    made: dict[str, Any] = {}

    def resolve(value: Any) -> Any:
        if isinstance(value, _NodeRef):
            if value.name not in made:
                raise RuntimeError(f"GraphModule: a pickled node refers to {value.name!r} before it is defined")
            return made[value.name]
        return value

    for op, name, target, args, kwargs, type_expr in spec:
        if op in ("get_attr", "call_module") and any(part.startswith("__") for part in str(target).split(".")):
            # a file names the module's own attributes only; dunder paths (``lin.__init__.__globals__``) would
            # reach Python's internals through the generated code
            raise RuntimeError(f"GraphModule: refusing the pickled {op} target {target!r} (a dunder attribute path)")
        if op == "call_function":
            target = _function_of(target)
        node = graph.create_node(op, target, map_aggregate(args, resolve), map_aggregate(kwargs, resolve), name=name,
                                 type_expr=type_expr)
        made[name] = node
    module = GraphModule.__new__(GraphModule)
    module.__dict__.update(state)
    type(module).__name__ = type(module).__qualname__ = class_name
    module.graph = graph
    return module
