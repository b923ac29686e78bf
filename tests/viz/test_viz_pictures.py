"""ember.viz: autograd and static graph pictures (DOT always, SVG/PNG with Graphviz) and TensorBoard graphs."""
from __future__ import annotations

import re
import shutil

import pytest

import ember
import ember.graph as G
import ember.nn as nn
import ember.nn.functional as F
from ember.viz import draw
from ember.viz.dot import Dot, quote

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def _labels(source: str) -> list[str]:
    return re.findall(r'label="((?:[^"\\]|\\.)*)"', source)


def test_autograd_graph_names_parameters_shows_saved_tensors_and_shapes():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss = F.cross_entropy(model(ember.randn(5, 4)), ember.tensor([0, 1, 2, 0, 1]))
    doc = draw(loss, params=dict(model.named_parameters()))
    labels = _labels(doc.source)
    for name, p in model.named_parameters():
        assert f"{name}\\n{tuple(p.shape)}".replace(",)", ",)") in labels or \
            f"{name}\\n({p.shape[0]},)" in labels
    assert "AddmmBackward0" in labels and "ReluBackward0" in labels  # torch's names (Linear on 2-D: addmm)
    assert any(label.startswith("saved result") for label in labels)  # relu keeps its output
    assert "(5, 8)" in labels  # the gradient flowing between the layers
    assert "output\\n()" in labels
    # one backward box per node of the graph: count nodes reachable from loss.grad_fn
    reachable, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if id(node) in reachable:
            continue
        reachable.add(id(node))
        stack += [e[0] for e in node.next_edges if e is not None and not isinstance(e[0], ember.Tensor)]
    assert sum(1 for label in labels if label.endswith("Backward0")) == len(reachable)


def test_static_graph_define_then_run_has_inputs_variables_updates():
    G.reset_default_graph()
    x = G.placeholder((3, 4), ember.float32, name="x")
    w = G.Variable(ember.randn(4, 2).numpy(), name="w")
    loss = (x @ w).relu().sum()
    (gw,) = G.gradients(loss, [w])
    step = G.assign_sub(w, 0.1 * gw)
    doc = draw(G.get_default_graph())
    labels = _labels(doc.source)
    assert any(label.startswith("x\\n(3, 4)") for label in labels)
    assert "matmul" in labels and "relu" in labels
    assert "assign w\\n(4, 2)" in labels  # the assign names the Variable it writes...
    (assign,) = re.findall(r'("\w+") \[[^\n]*label="assign w', doc.source)
    (w_box,) = re.findall(r'("\w+") \[[^\n]*label="w\\n', doc.source)
    assert f"{w_box} -> {assign}" not in doc.source  # ...instead of an edge from its box (across the picture)
    assert f"-> {assign}" in doc.source  # (the new value still flows in)
    assert "(3, 2)" in labels  # shape on the matmul -> relu edge
    G.reset_default_graph()


def test_compiled_function_before_after_and_forward_backward():
    w = ember.randn(4, 3, requires_grad=True)

    def f(x):
        return (x @ w).relu().sum()

    step = ember.compile(f)
    x = ember.randn(2, 4)
    for _ in range(2):
        step(x)
    doc = draw(step, params={"w": w})
    src = doc.source
    assert src.count("subgraph") == 3  # traced | forward | backward
    assert "forward (after passes; saves" in src and '"backward (' in src and "before passes" in src
    assert "w\\n(4, 3)" in src
    # each value the forward saves names the backward input that reads it, and that input says where it came from
    saved = step.last.saved
    assert saved and all(f"saved{k} (saved for backward)" in src for k in range(len(saved)))
    assert src.count("(saved by the forward)") == len(saved)
    assert '"w\\n(4, 3)"' in draw(step).source  # a tensor the function reads is named after its variable
    with pytest.raises(RuntimeError, match="not been traced"):
        draw(ember.compile(f))


def test_dot_quoting_escapes_quotes_and_backslashes():
    assert quote('x"y\\') == '"x\\"y\\\\"'
    assert quote("a\nb") == '"a\\nb"'


@needs_dot
def test_dot_quoting_cannot_break_out_of_a_label():
    doc = Dot("g")
    doc.node("a", 'evil" ] ; "b" -> "c')
    plain = doc.pipe("plain").decode().splitlines()
    assert sum(line.startswith("node ") for line in plain) == 1  # still one node, and no edge was injected
    assert not any(line.startswith("edge ") for line in plain)


def test_render_without_graphviz_says_how_to_install(monkeypatch, tmp_path):
    import ember.viz.dot as dot_module

    monkeypatch.setattr(dot_module.shutil, "which", lambda name: None)
    doc = draw((ember.randn(2, requires_grad=True) * 2).sum())
    with pytest.raises(RuntimeError, match="apt-get install graphviz"):
        doc.render(tmp_path / "g.svg")
    path = doc.render(tmp_path / "g.dot")  # DOT text needs nothing
    assert open(path).read().startswith("digraph")


@needs_dot
def test_svg_and_png_are_produced(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 4 * 4, 2))
    loss = model(ember.randn(1, 1, 6, 6)).sum()
    doc = draw(loss, params=dict(model.named_parameters()))
    svg = doc.render(tmp_path / "graph.svg")
    png = doc.render(tmp_path / "graph.png")
    text = open(svg).read()
    assert "<svg" in text and "ConvolutionBackward0" in text and "0.weight" in text
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_add_graph_is_read_back_by_tensorboard(tmp_path):
    pytest.importorskip("tensorboardX")
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from ember.utils.tensorboard import SummaryWriter

    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 3))
    with SummaryWriter(str(tmp_path)) as writer:
        writer.add_graph(model, ember.randn(2, 1, 8, 8))
        for step, value in enumerate([0.9, 0.5, 0.25]):
            writer.add_scalar("loss", value, step)
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    graph = acc.Graph()
    nodes = {n.name: n for n in graph.node}
    conv = nodes["Sequential/Conv2d[0]/conv2d"]
    assert conv.op == "ember::conv2d" and list(conv.input) == ["input/input.0", "Sequential/Conv2d[0]/weight",
                                                                "Sequential/Conv2d[0]/bias"]  # bias added in the op
    shape = [d.size for d in conv.attr["_output_shapes"].list.shape[0].dim]
    assert shape == [2, 4, 6, 6]
    assert "Sequential/Linear[3]/linear" in nodes and "Sequential/Linear[3]/bias" in nodes
    assert nodes["output/output.0"].input == ["Sequential/Linear[3]/linear"]
    scalars = acc.Scalars("loss")
    assert [s.step for s in scalars] == [0, 1, 2]
    assert [s.value for s in scalars] == pytest.approx([0.9, 0.5, 0.25], rel=1e-6)  # stored as float32


def test_torchviz_make_dot_and_graphviz_render_with_format(tmp_path):
    """torchviz code: ``make_dot(y, params=...).render("name", format="png")`` writes ``name`` (DOT) and
    ``name.png``; several saved results of one node are numbered."""
    from ember.viz import make_dot

    model = nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4))
    loss = F.cross_entropy(model(ember.randn(2, 3)), ember.tensor([0, 3]))
    doc = make_dot(loss, params=dict(model.named_parameters()))
    assert "saved" not in doc.source  # torchviz's default: show_saved=False
    labels = _labels(draw(loss).source)
    results = sorted(label.split("\\n")[0] for label in labels if label.startswith("saved result"))
    # numbered by output position: layer_norm keeps results 1 and 2 (mean, rstd), cross_entropy result 1
    assert results == ["saved result 1", "saved result 1", "saved result 2"]
    path = doc.render(tmp_path / "graph", format="dot")
    assert path.endswith("graph") and open(path).read().startswith("digraph")
    if shutil.which("dot") is not None:
        path = doc.render(tmp_path / "graph", format="png")
        assert path == str(tmp_path / "graph.png") and open(path, "rb").read(4) == b"\x89PNG"
        assert open(tmp_path / "graph").read().startswith("digraph")
