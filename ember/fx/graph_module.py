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

import itertools
import linecache
from typing import Any

from ember.fx.graph import Graph, PythonCode, check_attribute_path
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
