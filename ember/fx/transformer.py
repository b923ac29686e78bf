"""``torch.fx.Transformer``: an Interpreter that runs a GraphModule on Proxies and so writes a new graph;
override the per-opcode methods to rewrite calls (swap functions, drop nodes, insert new ones).

Example:
    >>> import ember, ember.fx as fx
    >>> class SigmoidToTanh(fx.Transformer):
    ...     def call_function(self, target, args, kwargs):
    ...         if target is ember.sigmoid:
    ...             return ember.tanh(*args, **kwargs)
    ...         return super().call_function(target, args, kwargs)
    >>> gm = SigmoidToTanh(fx.symbolic_trace(lambda x: ember.sigmoid(x) * 2)).transform()
    >>> [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
    ['tanh', 'mul']
"""
from __future__ import annotations

from typing import Any

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.interpreter import Interpreter
from ember.fx.node import Node, map_aggregate
from ember.fx.proxy import Proxy
from ember.fx.tracer import Tracer
from ember.nn.modules.module import Module


class _TransformerTracer(Tracer):
    """Records into the Transformer's new graph; every module call stays one ``call_module`` node."""

    def __init__(self, root: Module, graph: Graph) -> None:
        super().__init__()
        self.root = root
        self.graph = graph
        self._module_paths = {id(m): name for name, m in root.named_modules()}
        self._tensor_paths = {id(t): name for name, t in root.named_buffers()}
        self._tensor_paths.update({id(p): name for name, p in root.named_parameters()})

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return True


class Transformer(Interpreter):
    """``Transformer(gm).transform()`` returns a new GraphModule; by default an equal copy of ``gm``."""

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module)
        self.new_graph = Graph()
        self.tracer = _TransformerTracer(module, self.new_graph)

    def run_node(self, n: Node) -> Any:
        # While recording, ``ember.sigmoid`` names the recording wrapper of the function; hand overrides the
        # wrapper as the target so ``target is ember.sigmoid`` holds in them as it does in torch.fx.
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        target = n.target
        if n.op == "call_function":
            target = self.tracer.recording_wrapper(target)
        return getattr(self, n.op)(target, args, kwargs)

    def placeholder(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        node = self.new_graph.create_node("placeholder", target, args[:1])
        return Proxy(node, self.tracer)

    def get_attr(self, target: str, args: tuple, kwargs: dict) -> Proxy:
        return self.tracer.create_proxy("get_attr", target, args, kwargs)

    def call_module(self, target: str, args: tuple, kwargs: dict) -> Any:
        submodule = self.fetch_attr(target)
        return self.tracer.call_module(submodule, submodule.forward, args, kwargs)

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        return self.tracer.create_proxy("call_function", target, args, kwargs)

    def transform(self) -> GraphModule:
        """Run the graph symbolically and return the GraphModule of what was recorded."""
        with self.tracer.recording():
            result = super().run()
        if result is not None:
            output = self.new_graph.output(map_aggregate(result, lambda v: v.node if isinstance(v, Proxy) else v))
            old_output = next(n for n in reversed(self.graph.nodes) if n.op == "output")
            output.meta.update(old_output.meta)
        return GraphModule(self.module, self.new_graph)


__all__ = ["Transformer"]
