"""Pictures of graphs: the autograd graph of a tensor, and static graphs (traced or define-then-run).

``draw(loss, params=dict(model.named_parameters()))`` draws what ``loss.backward()`` will walk, as
torchviz does: one box per backward node, parameters (light blue) named, tensors saved for backward
(orange) attached by dashed edges, the shape of each gradient on its edge, the root in green.

``draw(graph)`` draws an :class:`ember.graph.Graph`: inputs (green), parameters and other state
(light blue, with their names), constants (grey), one box per op (fused kernels list their ops), the
shape and dtype on every edge, state updates as dashed red boxes below the value they store.
``draw(compiled_fn)`` puts the traced graph and the optimized one side by side (state named after the
modules and optimizers the function reads); for a compiled function whose outputs need
gradients the optimized side is the forward and the backward graph in one picture. A list or dict of
graphs is drawn side by side.

Example:
    >>> import ember
    >>> w = ember.randn(3, 2, requires_grad=True)
    >>> loss = (ember.randn(4, 3) @ w).relu().sum()
    >>> doc = draw(loss, params={"w": w})
    >>> "MmBackward0" in doc.source and '"w\\\\n(3, 2)"' in doc.source
    True
"""
from __future__ import annotations

from typing import Any

from ember.viz.dot import Dot
from ember.autograd.node import SavedTensor
from ember.graph.compile import CompiledFunction
from ember.graph.ir import Graph, Value
from ember.tensor import Tensor
from ember.nn.modules.module import Module
from ember.optim.optimizer import Optimizer

ROOT, PARAM, SAVED, INPUT, CONST, OUTPUT = "darkolivegreen1", "lightblue", "orange", "palegreen", "gray90", "khaki"


def _shape(shape: Any) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def draw(obj: Any, params: dict | None = None, show_saved: bool = True, show_attrs: bool = False,
         title: str | None = None) -> Dot:
    """A :class:`~ember.viz.dot.Dot` picture of ``obj`` (see the module docstring); ``.source`` is the
    DOT text, ``.render("x.svg")`` / ``.render("x.png")`` draws it through Graphviz."""

    if isinstance(obj, Tensor) or (isinstance(obj, (list, tuple)) and obj and all(isinstance(t, Tensor) for t in obj)):
        return autograd_graph(obj if isinstance(obj, (list, tuple)) else [obj], params, show_saved, title)
    if isinstance(obj, Graph):
        return static_graph(obj, params, show_attrs, title)
    if isinstance(obj, CompiledFunction):
        return compiled_graphs(obj, params, show_attrs)
    if isinstance(obj, dict) or (isinstance(obj, (list, tuple)) and obj and all(isinstance(g, Graph) for g in obj)):
        items = obj.items() if isinstance(obj, dict) else [(g.name, g) for g in obj]
        return side_by_side(list(items), params, show_attrs, title)
    raise TypeError(f"ember.viz.draw: expected a Tensor (autograd graph), an ember.graph.Graph, a compiled function "
                    f"or a list/dict of graphs, got {type(obj).__name__}")


# ---- autograd graphs -------------------------------------------------------------------------------
def autograd_graph(roots: list, params: dict | None = None, show_saved: bool = True, title: str | None = None) -> Dot:
    names = {id(t): name for name, t in (params or {}).items()}
    doc = Dot("autograd", graph_attr={"label": title} if title else None)
    seen: set = set()
    leaf_ids: dict = {}

    def leaf(t: Any) -> str:
        key = f"leaf{id(t)}"
        if key not in seen:
            seen.add(key)
            name = names.get(id(t), "")
            label = f"{name}\n{_shape(t.shape)}" if name else _shape(t.shape)
            doc.node(key, label, fillcolor=PARAM)
            leaf_ids[id(t)] = key
        return key

    def saved(node: Any, key: str) -> None:
        slots = list(getattr(node, "saved", None) or ())
        out = getattr(node, "saved_out", None)
        outs = list(out) if isinstance(out, tuple) else ([out] if out is not None else [])

        for i, s in enumerate(slots + outs):
            if not isinstance(s, SavedTensor):
                continue
            what = f"input {i}" if not s.is_output else ("result" if len(outs) < 2 else f"result {i - len(slots)}")
            tensor = s.tensor
            if tensor is not None and id(tensor) in leaf_ids:  # a parameter saved as is: point at it
                doc.edge(leaf_ids[id(tensor)], key, style="dashed", color="darkorange", arrowhead="none")
                continue
            data = s.data if tensor is None else tensor._data
            skey = f"saved{id(node)}_{i}"
            doc.node(skey, f"saved {what}\n{_shape(data.shape)}", fillcolor=SAVED)
            doc.edge(skey, key, style="dashed", color="darkorange", arrowhead="none")

    def visit(node: Any) -> str:
        key = f"node{id(node)}"
        if key in seen:
            return key
        seen.add(key)
        doc.node(key, node.name() if callable(getattr(node, "name", None)) else type(node).__name__)
        edges = getattr(node, "next_edges", None) or ()
        meta = getattr(node, "input_meta", None) or ()
        for i, edge in enumerate(edges):
            if edge is None:
                continue
            child = edge[0]
            child_key = leaf(child) if isinstance(child, Tensor) else visit(child)
            shape = meta[i] if i < len(meta) and meta[i] is not None else getattr(child, "shape", None)
            doc.edge(child_key, key, _shape(shape) if shape is not None else None)
        if show_saved:
            saved(node, key)
        return key

    for k, root in enumerate(roots):
        rkey = f"root{k}"
        doc.node(rkey, f"{names.get(id(root), 'output')}\n{_shape(root.shape)}", fillcolor=ROOT)
        if root.grad_fn is not None:
            doc.edge(visit(root.grad_fn), rkey, _shape(root.shape))
        elif root.requires_grad:
            doc.edge(leaf(root), rkey)
    return doc


# ---- static graphs ---------------------------------------------------------------------------------
def _value_label(v: Any, names: dict) -> str:
    if v.kind == "state":
        name = names.get(id(v.tensor)) or v.name or "state"
        return f"{name}\n{_shape(v.shape)}"
    if v.kind == "const":
        data = v.data
        if data is not None and getattr(data, "size", 2) == 1:
            return f"{data.reshape(()).item():.4g}" if data.dtype.kind == "f" else str(data.reshape(()).item())
        return f"const\n{_shape(v.shape)}"
    return f"{v.name or 'input'}\n{_shape(v.shape)} {v.edtype.name}"


def _op_label(node: Any, show_attrs: bool) -> str:
    if node.op.category == "fused":
        members = str(node.attrs.get("ops") or node.op.doc.split("\n")[0] or "").split("+")
        members = [m for m in members if m]
        label = "fused: " + "+".join(members[:6]) + ("..." if len(members) > 6 else "")
    else:
        label = node.op.name
    if show_attrs:
        attrs = [f"{k}={v}" for k, v in node.attrs.items() if not k.startswith("_") and k != "ops"]
        if attrs:
            label += "\n" + "\n".join(a if len(a) < 40 else a[:37] + "..." for a in attrs)
    return label


def static_graph(graph: Any, params: dict | None = None, show_attrs: bool = False, title: str | None = None,
                 prefix: str = "", colors: dict | None = None, marks: dict | None = None) -> Dot:
    """The picture of one :class:`ember.graph.Graph` (``colors``: node -> fill colour; ``marks``: a Value's
    id -> a line added to the box that holds it, drawn with a purple border; both optional)."""
    marks = marks or {}
    marked = {"color": "purple", "penwidth": "2"}
    names = {id(t): name for name, t in (params or {}).items()}
    names.update({id(t.grad): f"{name}.grad" for name, t in (params or {}).items() if getattr(t, "grad", None) is not None})
    doc = Dot(prefix or graph.name, graph_attr={"label": title} if title else None)
    drawn: set = set()
    # Producers from this graph's own node list: passes may have re-pointed a shared Value's .node at a
    # node of a later graph, so a picture of an earlier graph in the history must not follow v.node.
    producer = {id(out): node for node in graph.nodes for out in node.outputs}

    def source(v: Value) -> str:
        node = producer.get(id(v))
        if node is not None:
            return f"{prefix}n{id(node)}"
        key = f"{prefix}v{v.id}"
        if key not in drawn:
            drawn.add(key)
            fill = {"input": INPUT, "state": PARAM, "const": CONST}.get(v.kind, "white")
            shape = "ellipse" if v.kind == "input" else ("plaintext" if v.kind == "const" and v.size == 1 else "box")
            mark = marks.get(v.id)
            doc.node(key, _value_label(v, names) + (f"\n{mark}" if mark else ""), fillcolor=fill, shape=shape,
                     **(marked if mark else {}))
        return key

    for node in graph.nodes:
        key = f"{prefix}n{id(node)}"
        fill = (colors or {}).get(id(node), "white")
        mark = [marks[o.id] for o in node.outputs if o.id in marks]
        inputs = node.inputs
        target = inputs[0] if node.op.name == "assign" and inputs and isinstance(inputs[0], Value) \
            and inputs[0].kind == "state" else None
        if target is not None:
            # A define-then-run assign is drawn as an update (named, dashed red) below the value it writes; an edge
            # from the Variable's box at the top down to it crossed the whole picture of a training step.
            name = _value_label(target, names).split("\n")[0]
            doc.node(key, "\n".join([f"assign {name}\n{_shape(target.shape)}"] + mark), fillcolor=PARAM,
                     style="filled,dashed", color="red")
            inputs = inputs[1:]
        else:
            doc.node(key, "\n".join([_op_label(node, show_attrs)] + mark), fillcolor=fill, **(marked if mark else {}))
        for i in inputs:
            if isinstance(i, Value):
                doc.edge(source(i), key, f"{_shape(i.shape)}" if i.shape else None)
    for k, out in enumerate(graph.outputs):
        okey = f"{prefix}out{k}"
        doc.node(okey, f"output {k}\n{_shape(out.shape)}", fillcolor=OUTPUT, shape="ellipse")
        doc.edge(source(out), okey, _shape(out.shape) if out.shape else None)
    # A state update is drawn as its own box below the value it stores (as TensorFlow draws an Assign), not as
    # an edge back up to the state's box: upward edges across the whole graph made training steps unreadable.
    for k, (state, new) in enumerate(graph.updates):
        ukey = f"{prefix}upd{k}"
        name = names.get(id(getattr(state, "tensor", None))) or state.name or "state"
        doc.node(ukey, f"update {name}\n{_shape(state.shape)}", fillcolor=PARAM, style="filled,dashed", color="red")
        doc.edge(source(new), ukey, "update", style="dashed", color="red")
    return doc


def side_by_side(items: list, params: dict | None = None, show_attrs: bool = False, title: str | None = None,
                 colors: dict | None = None, marks: dict | None = None) -> Dot:
    """Several graphs in one picture, each in its own labelled box, left to right (``marks``: item index ->
    the ``marks`` of :func:`static_graph`)."""
    doc = Dot("graphs", graph_attr={"label": title} if title else None)
    for k, (name, graph) in enumerate(items):
        inner = static_graph(graph, params, show_attrs, prefix=f"g{k}_", colors=colors, marks=(marks or {}).get(k))
        inner.name = f"g{k}"
        summary = f"{len(graph.nodes)} nodes"
        doc.subgraph(inner, label=f"{name} ({summary})")
    return doc


def _reachable_state(fn: Any) -> dict:
    """Names for the tensors a function reaches through its closure and the globals it reads: the parameters
    and buffers of modules (``model.0.weight``) and the state of optimizers over them (``model.0.weight.exp_avg``),
    so a compiled training step's state boxes carry names without the user passing ``params``."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return {}
    found: dict = {}
    for var, cell in zip(code.co_freevars, getattr(fn, "__closure__", None) or ()):
        try:
            found[var] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    scope = getattr(fn, "__globals__", {})
    for var in code.co_names:
        if var in scope:
            found.setdefault(var, scope[var])
    names: dict = {var: obj for var, obj in found.items() if isinstance(obj, Tensor)}  # a weight read as is: `w`
    for var, obj in found.items():
        if isinstance(obj, Module):
            for name, tensor in list(obj.named_parameters()) + list(obj.named_buffers()):
                names.setdefault(f"{var}.{name}", tensor)
    by_id = {id(t): n for n, t in names.items()}
    for var, obj in found.items():
        if isinstance(obj, Optimizer):
            for k, (param, state) in enumerate(obj.state.items()):
                owner = by_id.get(id(param), f"{var}.param{k}")
                for key, value in state.items():
                    if isinstance(value, Tensor):
                        names.setdefault(f"{owner}.{key}", value)
    return names


def _saved_marks(saved: Any, backward: Any) -> tuple:
    """Marks for a forward/backward pair: each value the forward saves says which backward input reads it
    (``saved0``, ``saved1``, ... in the order of ``saved``), and that input says it comes from the forward."""
    inputs = [v for v in backward.inputs if (v.name or "").startswith("saved")]
    forward_marks = {value.id: f"-> {target.name} (saved for backward)" for value, target in zip(saved, inputs)}
    backward_marks = {target.id: "(saved by the forward)" for target in inputs}
    return forward_marks, backward_marks


def make_dot(var: Any, params: dict | None = None, show_attrs: bool = False, show_saved: bool = False,
             max_attr_chars: int = 50) -> Dot:
    """torchviz's ``make_dot``: the autograd graph of ``var`` (``show_saved`` as torchviz: off by default;
    ``show_attrs``/``max_attr_chars`` are accepted, attributes are not drawn). ``.render("g", format="png")``
    writes ``g`` (DOT) and ``g.png`` as with graphviz."""
    return autograd_graph(list(var) if isinstance(var, (list, tuple)) else [var], params, show_saved)


def compiled_graphs(fn: Any, params: dict | None = None, show_attrs: bool = False) -> Dot:
    """A compiled function's traced graph beside its optimized one (forward + backward when split)."""
    last = getattr(fn, "last", None)
    if last is None:
        raise RuntimeError(f"ember.viz.draw: {getattr(fn, 'name', 'the function')} has not been traced yet; call the "
                           "compiled function (twice: the first call runs eagerly) before drawing it")
    if params is None:
        params = dict(fn.fn.named_parameters()) if isinstance(fn.fn, Module) else _reachable_state(fn.fn)
    history = list(last.history)
    traced = history[0][1]
    split = [(name, g) for name, g in history if name.startswith("split:")]
    if split:
        # The lectures' picture: forward and backward of one step, in one frame, after the passes, with each value
        # the forward saves linked to the backward input that reads it.
        saved = getattr(last, "saved", ())
        marks = None
        if len(split) == 2 and saved:
            split = [(f"forward (after passes; saves {len(saved)} values for backward)", split[0][1]),
                     ("backward", split[1][1])]
            forward_marks, backward_marks = _saved_marks(saved, split[1][1])
            marks = {1: forward_marks, 2: backward_marks}
        doc = side_by_side([("traced (forward + backward, before passes)", traced)] + split, params, show_attrs,
                           title=f"{fn.name}: before and after passes", marks=marks)
        return doc
    final = [(name, g) for name, g in history[1:] if name != "fuse"]
    after = final[-1] if final else history[-1]
    fused = [(name, g) for name, g in history if name == "fuse"]
    items = [("traced, before passes", traced), (f"after passes (last: {after[0]})", after[1])]
    if fused:
        items.append(("after fusion", fused[-1][1]))
    return side_by_side(items, params, show_attrs, title=f"{fn.name}: before and after passes")
