"""``torchvision.models.feature_extraction``: pull intermediate outputs out of a model by name.

The model is traced with ``ember.fx``; every node gets torchvision's name for it -- the module path for a
module call (``"layer1.0.conv1"``), the path of the module it happens in plus the operation for anything
else (``"layer1.0.add"``); a trailing ``_<n>`` is dropped and repeats are numbered ``_1``, ``_2`` ... in order
(the second ReLU of a ResNet block is ``"layer1.0.relu_1"``; a ViT block's ``ln_1``/``ln_2`` are ``ln``/``ln_1``).
torchvision.ops-style modules (``ember.vision.ops``) stay whole, as torchvision keeps its ops' modules. ``create_feature_extractor`` returns a ``GraphModule`` whose output is a
dict of the requested nodes; a requested name that is a module path (``"layer1"``) means the last node inside
that module. What the outputs do not need is cut from the graph. Train and eval mode are traced separately
(their graphs may differ, e.g. dropout) and the extractor switches between them with ``.train()``/``.eval()``.

Example:
    >>> import ember
    >>> from ember.vision.models import resnet18
    >>> extractor = create_feature_extractor(resnet18(), return_nodes={"layer1": "low", "avgpool": "pooled"})
    >>> {k: tuple(v.shape) for k, v in extractor(ember.randn(2, 3, 32, 32)).items()}
    {'low': (2, 64, 8, 8), 'pooled': (2, 512, 1, 1)}
"""
from __future__ import annotations

import itertools
import linecache
import re
import warnings
from typing import Any

from ember.fx.graph import Graph
from ember.fx.graph_module import GraphModule, _copy_attr
from ember.fx.tracer import Tracer
from ember.nn.modules.module import Module
from ember.vision import ops as vision_ops

__all__ = ["create_feature_extractor", "get_graph_node_names"]


def _ops_modules() -> tuple:
    """Every module class of ``ember.vision.ops`` (Conv2dNormActivation, SqueezeExcitation, Permute, ...):
    torchvision's feature extraction keeps these whole, as it does torchvision.ops' modules."""
    return tuple(value for value in vars(vision_ops).values()
                 if isinstance(value, type) and issubclass(value, Module))


class NodePathTracer(Tracer):
    """A tracer that names every node the way torchvision's feature extraction does (see the module doc);
    ``leaf_modules`` (and ember.vision.ops' modules) stay one node each."""

    def __init__(self, *args: Any, leaf_modules: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.leaf_modules = tuple(leaf_modules or ()) + _ops_modules()
        self.scope = ""
        self.node_to_qualname: dict = {}
        self._used: dict[str, int] = {}

    def is_leaf_module(self, m: Module, module_qualified_name: str) -> bool:
        return isinstance(m, self.leaf_modules) or super().is_leaf_module(m, module_qualified_name)

    def call_module(self, m: Module, forward: Any, args: tuple, kwargs: dict) -> Any:
        outer = self.scope
        self.scope = self.path_of_module(m)
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.scope = outer

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict, name: str | None = None,
                     type_expr: Any = None) -> Any:
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr)
        self.node_to_qualname[proxy.node] = self._qualname(proxy.node)
        return proxy

    def _qualname(self, node: Any) -> str:
        if node.op == "call_module":
            base = self.scope
        else:
            base = f"{self.scope}.{node.name}" if self.scope else node.name
        # torchvision's numbering: a trailing _<n> (fx's graph-wide count, or a module named ln_1) is dropped, and
        # repeats of a name get _1, _2, ... in order.
        base = re.sub(r"(?<=.)_[0-9]+$", "", base)
        count = self._used.get(base, 0)
        self._used[base] = count + 1
        return base if count == 0 else f"{base}_{count}"


def _trace(model: Module, training: bool, tracer_kwargs: dict | None, concrete_args: dict | None) -> tuple:
    was_training = model.training
    model.train(training)
    try:
        tracer = NodePathTracer(**(tracer_kwargs or {}))
        graph = tracer.trace(model, concrete_args=concrete_args)
    finally:
        model.train(was_training)
    return graph, tracer.node_to_qualname


def get_graph_node_names(model: Module, tracer_kwargs: dict | None = None, suppress_diff_warning: bool = False,
                         concrete_args: dict | None = None) -> tuple[list, list]:
    """The node names of ``model``'s graph in train mode and in eval mode (warning when they differ)."""
    train = list(_trace(model, True, tracer_kwargs, concrete_args)[1].values())
    evaluation = list(_trace(model, False, tracer_kwargs, concrete_args)[1].values())
    if train != evaluation and not suppress_diff_warning:
        warnings.warn("NOTE: The nodes obtained by tracing the model in eval mode are a subsequence of those "
                      "obtained in train mode. When choosing nodes for feature extraction, you may need to specify "
                      "output nodes for train and eval mode separately.")
    return train, evaluation


def _as_mapping(nodes: Any) -> dict:
    if nodes is None:
        return {}
    if isinstance(nodes, (list, tuple)):
        return {str(n): str(n) for n in nodes}
    return {str(k): str(v) for k, v in dict(nodes).items()}


def _extractor_graph(model: Module, training: bool, wanted: dict, tracer_kwargs: dict | None,
                     concrete_args: dict | None) -> Graph:
    graph, names = _trace(model, training, tracer_kwargs, concrete_args)
    ordered = [(node, names[node]) for node in graph.nodes if node in names]
    chosen: dict = {}
    for query, output_name in wanted.items():
        matches = [node for node, name in ordered if name == query or name.startswith(query + ".")]
        if not matches:
            available = [name for _, name in ordered]
            raise ValueError(f"node: '{query}' is not present in model. Hint: use get_graph_node_names to make sure "
                             f"the return_nodes you specified are present. It may even be that you need to specify "
                             f"`train_return_nodes` and `eval_return_nodes` separately. Nodes: {available[:20]}"
                             f"{' ...' if len(available) > 20 else ''}")
        chosen[output_name] = matches[-1]
    output = next(node for node in graph.nodes if node.op == "output")
    output.args = (chosen,)
    _prune(graph)
    graph.lint()
    return graph


def _prune(graph: Graph) -> None:
    """Drop what the outputs do not need, module calls included (as torch.fx does for modules not marked
    ``_is_impure``; ember's own eliminate_dead_code keeps every module call)."""
    changed = True
    while changed:
        changed = graph.eliminate_dead_code()
        for node in reversed(list(graph.nodes)):
            if node.op == "call_module" and not node.users:
                graph.erase_node(node)
                changed = True


_COUNTER = itertools.count()


class DualGraphModule(GraphModule):
    """A GraphModule holding the model's submodules at their own paths (so its state_dict keys are the model's)
    and two graphs: ``forward`` runs the train-mode graph in training and the eval-mode graph otherwise."""

    def __init__(self, root: Module, train_graph: Graph, eval_graph: Graph,
                 class_name: str = "GraphModule") -> None:
        super().__init__(root, train_graph, class_name)
        for node in eval_graph.nodes:
            if node.op in ("get_attr", "call_module"):
                _copy_attr(root, self, node.target)
        self.__dict__["eval_graph"] = eval_graph
        train_forward = type(self).forward
        eval_forward = _compiled_forward(eval_graph)

        def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
            return (train_forward if self.training else eval_forward)(self, *args, **kwargs)

        type(self).forward = forward


def _compiled_forward(graph: Graph) -> Any:
    """``forward`` generated from ``graph`` (as GraphModule.recompile does) without installing it."""
    code = graph.python_code("self")
    filename = f"<feature_extraction>.{next(_COUNTER)}"
    linecache.cache[filename] = (len(code.src), None, code.src.splitlines(True), filename)
    namespace = dict(code.globals)
    exec(compile(code.src, filename, "exec"), namespace)  # noqa: S102 - source made by Graph.python_code
    return namespace["forward"]


def create_feature_extractor(model: Module, return_nodes: Any = None, train_return_nodes: Any = None,
                             eval_return_nodes: Any = None, tracer_kwargs: dict | None = None,
                             suppress_diff_warning: bool = False, concrete_args: dict | None = None) -> Module:
    """A module returning ``{output_name: value}`` for the requested nodes (a list of names, or a dict
    ``{node_name: output_name}``), given once (``return_nodes``) or per mode (``train_return_nodes`` and
    ``eval_return_nodes``)."""
    if return_nodes is None and (train_return_nodes is None or eval_return_nodes is None):
        raise ValueError("Either `return_nodes` or `train_return_nodes` and `eval_return_nodes` together, should "
                         "be specified")
    if return_nodes is not None and (train_return_nodes is not None or eval_return_nodes is not None):
        raise ValueError("If `train_return_nodes` and `eval_return_nodes` are specified, then both should be "
                         "specified, and `return_nodes` should not")
    train_wanted = _as_mapping(return_nodes if return_nodes is not None else train_return_nodes)
    eval_wanted = _as_mapping(return_nodes if return_nodes is not None else eval_return_nodes)
    training = model.training
    extractor = DualGraphModule(model, _extractor_graph(model, True, train_wanted, tracer_kwargs, concrete_args),
                                _extractor_graph(model, False, eval_wanted, tracer_kwargs, concrete_args),
                                class_name=type(model).__name__)
    extractor.train(training)
    return extractor

