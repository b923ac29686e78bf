"""``torch.fx``: symbolic tracing into a Graph of Nodes, graph editing, and GraphModules that run the
edited graph (docs/pytorch-compat.md, section torch.fx).

Example:
    >>> import ember, ember.fx as fx
    >>> gm = fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU()))
    >>> [n.op for n in gm.graph.nodes]
    ['placeholder', 'call_module', 'call_module', 'output']
"""
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.interpreter import Interpreter
from ember.fx.node import Node, map_arg
from ember.fx.proxy import Attribute, Proxy, TraceError
from ember.fx.tracer import Tracer, symbolic_trace, wrap
from ember.fx.transformer import Transformer
from ember.fx import experimental, passes, subgraph_rewriter
from ember.fx.subgraph_rewriter import replace_pattern

__all__ = ["symbolic_trace", "wrap", "Graph", "GraphModule", "Interpreter", "Node", "Proxy", "Tracer",
           "map_arg", "Attribute", "TraceError", "Transformer", "replace_pattern", "passes", "subgraph_rewriter",
           "experimental"]
