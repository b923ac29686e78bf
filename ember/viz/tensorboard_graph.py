"""Static graphs as TensorFlow ``GraphDef`` protos, the format TensorBoard's Graphs tab reads.

Node names carry the module path as scopes (``Sequential/Linear[0]/linear``), so TensorBoard folds
each module into one box that opens on a click, as it does for graphs from ``torch.utils.tensorboard``.
Every node has its op name, its inputs and an ``_output_shapes`` attribute (the shapes on the edges).

Example:
    >>> import ember, ember.nn as nn
    >>> g, names = trace_module(nn.Sequential(nn.Linear(4, 3), nn.ReLU()), (ember.randn(2, 4),))
    >>> [n.name for n in graph_def(g, names).node][-2:]   # doctest: +SKIP
    ['Sequential/ReLU[1]/relu', 'output/output.0']
"""
from __future__ import annotations

import re
from typing import Any, Sequence
from ember.autograd import grad_mode
from ember.graph.builder import Tracer
from ember.graph.ir import Value


def _protos() -> Any:
    try:
        from tensorboardX.proto import (attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2,
                                        versions_pb2)
    except ImportError:
        raise ImportError("ember.viz.graph_def needs tensorboardX (pip install tensorboardX, or "
                          "pip install 'ember[train]')") from None
    return attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2, versions_pb2


def _clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.\-/\[\]]", "_", name) or "_"


def trace_module(model: Any, inputs: Sequence[Any]) -> tuple:
    """Trace ``model(*inputs)`` (no gradients) into a graph; returns (graph, node scopes and names).

    The second item maps ``id(node)`` to its module scope and ``id(tensor)`` to parameter names.
    """

    inputs = tuple(inputs)
    scopes: dict = {}
    stack: list[str] = []
    handles = []
    root = type(model).__name__
    children = {id(m): f"{type(m).__name__}[{name.rsplit('.', 1)[-1]}]" for name, m in model.named_modules() if name}

    with Tracer(root) as tracer:
        graph = tracer.graph

        def enter(module: Any, args: Any) -> None:
            stack.append(children.get(id(module), root))
            stack.append(len(graph.nodes))

        def leave(module: Any, args: Any, output: Any) -> None:
            start = stack.pop()
            scope = "/".join(s for s in stack if isinstance(s, str))
            stack.pop()
            for node in graph.nodes[start:]:
                scopes.setdefault(id(node), scope)  # the innermost module claims the node first

        for name, module in model.named_modules():
            handles.append(module.register_forward_pre_hook(enter))
            handles.append(module.register_forward_hook(leave))
        try:
            sym = [tracer.input(tuple(t.shape), t.dtype, t.device, False, name=f"input.{k}")
                   for k, t in enumerate(inputs)]
            with grad_mode.no_grad():
                out = model(*sym)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            tracer.builder.finish(outs)
        finally:
            for handle in handles:
                handle.remove()
    # Parameters live inside their module's box: Sequential/Linear[0]/weight.
    module_scope = {"": root}
    for name, module in model.named_modules():
        if name:
            parent = name.rsplit(".", 1)[0] if "." in name else ""
            module_scope[name] = f"{module_scope[parent]}/{children[id(module)]}"
    names = {}
    for prefix, module in model.named_modules():
        for leaf, tensor in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            names.setdefault(id(tensor), f"{module_scope[prefix]}/{leaf}")
    return graph, {"scopes": scopes, "params": names}


def graph_def(graph: Any, naming: dict | None = None) -> Any:
    """A ``GraphDef`` of ``graph`` (``naming`` from :func:`trace_module` adds module scopes)."""
    attr_value_pb2, graph_pb2, node_def_pb2, tensor_shape_pb2, versions_pb2 = _protos()
    scopes = (naming or {}).get("scopes", {})
    params = (naming or {}).get("params", {})
    names: dict = {}
    used: set = set()
    nodes = []

    def unique(name: str) -> str:
        name = _clean(name)
        base, k = name, 1
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        return name

    def shapes_attr(values: Sequence[Any]) -> Any:
        protos = [tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=int(s))
                                                         for s in v.shape]) for v in values]
        return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(shape=protos))

    def add(name: str, op: str, inputs: list, outputs: Sequence[Any], extra: str = "") -> None:
        attr = {"_output_shapes": shapes_attr(outputs)}
        if outputs:
            attr["dtype"] = attr_value_pb2.AttrValue(s=str(getattr(outputs[0], "edtype", outputs[0].dtype)).encode())
        if extra:
            attr["attr"] = attr_value_pb2.AttrValue(s=extra.encode())
        nodes.append(node_def_pb2.NodeDef(name=name, op=op, input=inputs, device="/device:CPU:0", attr=attr))

    def ref(v: Value) -> str:
        if v.node is not None:
            base = names[id(v.node)]
            return base if len(v.node.outputs) == 1 else f"{base}:{v.index}"
        if id(v) not in names:
            if v.kind == "state":
                names[id(v)] = unique(params.get(id(v.tensor)) or v.name or f"state/{v.id}")
                add(names[id(v)], "Parameter", [], [v])
            elif v.kind == "const":
                names[id(v)] = unique(f"constants/const.{v.id}")
                add(names[id(v)], "Constant", [], [v])
            else:
                names[id(v)] = unique(f"input/{v.name or v.id}")
                add(names[id(v)], "IO Node", [], [v])
        return names[id(v)]

    for node in graph.nodes:
        inputs = [ref(i) for i in node.inputs if isinstance(i, Value)]
        scope = scopes.get(id(node), "")
        label = "fused" if node.op.category == "fused" else node.op.name
        names[id(node)] = unique(f"{scope}/{label}" if scope else label)
        attrs = ", ".join(f"{k}={v}" for k, v in node.attrs.items() if not k.startswith("_"))
        add(names[id(node)], f"ember::{label}", inputs, node.outputs, attrs)
    for k, out in enumerate(graph.outputs):
        add(unique(f"output/output.{k}"), "IO Node", [ref(out)], [out])
    return graph_pb2.GraphDef(node=nodes, versions=versions_pb2.VersionDef(producer=22))
