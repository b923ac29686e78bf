"""``torch.fx.experimental.optimization``: fold batch norms into the convolutions or linears before them, drop
dropout layers, cut a subgraph out into its own GraphModule (for inference).

Example:
    >>> import ember
    >>> from ember.fx.experimental.optimization import fuse
    >>> model = ember.nn.Sequential(ember.nn.Conv2d(3, 4, 3), ember.nn.BatchNorm2d(4)).eval()
    >>> fused = fuse(model)
    >>> [n.op for n in fused.graph.nodes]
    ['placeholder', 'call_module', 'output']
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from ember import nn
from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule
from ember.fx.node import Node
from ember.fx.tracer import symbolic_trace
from ember.fx.transformer import Transformer
from ember.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

__all__ = ["extract_subgraph", "fuse", "matches_module_pattern", "remove_dropout", "replace_node_module"]

_FUSABLE = [(nn.Conv1d, nn.BatchNorm1d), (nn.Conv2d, nn.BatchNorm2d), (nn.Conv3d, nn.BatchNorm3d),
            (nn.Linear, nn.BatchNorm1d)]


def matches_module_pattern(pattern: Iterable[type], node: Node, modules: dict[str, Any]) -> bool:
    """Whether ``node`` (a call_module) and its first argument are calls of modules of exactly the pattern's
    types, first argument first."""
    if len(node.args) == 0:
        return False
    for expected, current in zip(pattern, (node.args[0], node)):
        if not isinstance(current, Node) or current.op != "call_module" or not isinstance(current.target, str):
            return False
        if current.target not in modules or type(modules[current.target]) is not expected:
            return False
    return True


def replace_node_module(node: Node, modules: dict[str, Any], new_module: nn.Module) -> None:
    """Put ``new_module`` where ``node``'s module is, in its parent and in ``modules``."""
    parent, _, name = node.target.rpartition(".")
    modules[node.target] = new_module
    setattr(modules[parent], name, new_module)


def fuse(model: nn.Module, inplace: bool = False, no_trace: bool = False) -> GraphModule:
    """Fold each BatchNorm that only a Conv1d/2d/3d (or Linear, for BatchNorm1d) feeds into that layer's weight
    and bias, using the running statistics (so the result computes the model's eval-mode output). The model
    is copied first unless ``inplace``; a GraphModule is used as it is with ``no_trace``."""
    if not inplace:
        model = copy.deepcopy(model)
    fx_model = model if (no_trace and isinstance(model, GraphModule)) else symbolic_trace(model)
    modules = dict(fx_model.named_modules())
    graph = copy.deepcopy(fx_model.graph)
    for pattern in _FUSABLE:
        for node in list(graph.nodes):
            if not matches_module_pattern(pattern, node, modules):
                continue
            if len(node.args[0].users) > 1:  # the layer's output is used elsewhere too: keep the batch norm
                continue
            layer, norm = modules[node.args[0].target], modules[node.target]
            if not norm.track_running_stats:
                continue
            fold = fuse_linear_bn_eval if pattern[0] is nn.Linear else fuse_conv_bn_eval
            replace_node_module(node.args[0], modules, fold(layer, norm))
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    return GraphModule(fx_model, graph)


class _DropoutRemover(Transformer):
    def call_module(self, target: Any, args: tuple, kwargs: dict) -> Any:
        if isinstance(self.submodules[target], nn.Dropout):
            if len(args) != 1:
                raise RuntimeError(f"remove_dropout: expected dropout {target!r} to take one argument")
            return args[0]
        return super().call_module(target, args, kwargs)


def remove_dropout(model: nn.Module) -> GraphModule:
    """The model traced without its ``nn.Dropout`` layers (each replaced by its input)."""
    return _DropoutRemover(symbolic_trace(model)).transform()


def extract_subgraph(orig_module: nn.Module, nodes: list[Node], inputs: list[Node], outputs: list[Node]) -> GraphModule:
    """A GraphModule computing ``outputs`` from ``inputs`` through ``nodes`` (taken from ``orig_module``'s graph,
    in order)."""
    graph = Graph()
    env: dict[Node, Node] = {}
    for node in inputs:
        env[node] = graph.placeholder(node.name)
    for node in nodes:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output([env[node] for node in outputs])
    graph.lint()
    return GraphModule(orig_module, graph)
