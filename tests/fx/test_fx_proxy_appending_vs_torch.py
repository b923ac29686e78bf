"""torch.fx's Proxy outside symbolic_trace, against torch 2.13: ``Proxy(node)`` / ``GraphAppendingTracer`` append
what ember functions do to an existing graph (through ``Proxy.__torch_function__``), a traced module called on
proxies inlines itself, tracing through ``torch.nn`` modules (a Tracer whose ``is_leaf_module`` says False) records
the functional calls torch records, custom tracers see the output node, and ``torch.ops.profiler``'s record-function
operators. The programs are pytorch/examples' ``fx/`` scripts' idioms, written here in my own words."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")
import torch.fx  # noqa: E402

LIBS = {"ember": ember, "torch": torch}


def _ops(graph):
    """(opcode, target name) of every node: what the two libraries must agree on."""
    out = []
    for n in graph.nodes:
        target = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", str(n.target))
        out.append((n.op, target))
    return out


def _lowp(lib):
    def sigmoid_lowp(x):
        return x.float().sigmoid().half()
    return sigmoid_lowp


@pytest.mark.parametrize("name", ["ember", "torch"])
def test_graph_appending_tracer_records_calls_on_proxies(name):
    lib = LIBS[name]
    fx = lib.fx
    g = fx.Graph()
    tracer = fx.proxy.GraphAppendingTracer(g)
    x = fx.Proxy(g.placeholder("x"), tracer)
    y = lib.relu(lib.nn.functional.gelu(x) * 2).sum(dim=1)
    g.output(y.node)
    assert _ops(g) == [("placeholder", "x"), ("call_function", "gelu"), ("call_function", "mul"),
                       ("call_function", "relu"), ("call_method", "sum"), ("output", "output")]
    gm = fx.GraphModule(lib.nn.Module(), g)
    data = np.linspace(-2, 2, 12).reshape(3, 4).astype(np.float32)
    got = gm(lib.tensor(data)).numpy()
    expect = torch.relu(torch.nn.functional.gelu(torch.tensor(data)) * 2).sum(dim=1).numpy()
    np.testing.assert_allclose(got, expect, rtol=1e-6)


def test_inlining_a_wrapped_function_matches_torch():
    """primitive_library.py: a function recorded as one node is replaced by its body, traced on Proxy(node)."""
    graphs = {}
    for name, lib in LIBS.items():
        fx = lib.fx
        lowp = _lowp(lib)
        g = fx.Graph()
        x = g.placeholder("x")
        call = g.call_function(lowp, (x,))
        g.output(call)
        with g.inserting_before(call):
            proxy_args = fx.node.map_arg(call.args, lambda n: fx.Proxy(n))  # no tracer: GraphAppendingTracer
            out = lowp(*proxy_args)
        call.replace_all_uses_with(out.node)
        g.erase_node(call)
        graphs[name] = _ops(g)
        gm = fx.GraphModule(lib.nn.Module(), g)
        assert gm(lib.tensor([0.5, -1.0]).half()).dtype == lib.float16
    assert graphs["ember"] == graphs["torch"] == [
        ("placeholder", "x"), ("call_method", "float"), ("call_method", "sigmoid"), ("call_method", "half"),
        ("output", "output")]


def test_traced_module_called_on_a_proxy_inlines_itself():
    """wrap_output_dynamically.py: symbolic_trace(nn.LeakyReLU()) called on Proxy(last node) appends its body."""
    results = {}
    data = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    for name, lib in LIBS.items():
        fx = lib.fx

        class Cat(lib.nn.Module):
            def forward(self, x, y):
                return lib.cat([x, y])

        traced = fx.symbolic_trace(Cat())
        output = next(n for n in reversed(traced.graph.nodes) if n.op == "output")
        last = output.all_input_nodes[0]
        act = fx.symbolic_trace(lib.nn.LeakyReLU(0.1))
        with traced.graph.inserting_after(last):
            new = act(fx.Proxy(last))
            output.args = (new.node,)
        traced.recompile()
        results[name] = (_ops(traced.graph), traced(lib.tensor(data), lib.tensor(data)).numpy())
    assert results["ember"][0] == results["torch"][0]
    assert ("call_function", "leaky_relu") in results["ember"][0]
    np.testing.assert_allclose(results["ember"][1], results["torch"][1], rtol=1e-6)


def test_multiple_tracers_refused():
    fx = ember.fx
    g1, g2 = fx.Graph(), fx.Graph()
    a, b = fx.Proxy(g1.placeholder("a")), fx.Proxy(g2.placeholder("b"))
    with pytest.raises(RuntimeError, match="multiple different tracers"):
        ember.add(a, b)


def _through_models(lib):
    nn = lib.nn
    return {
        "relu": nn.ReLU(), "relu6": nn.ReLU6(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(), "silu": nn.SiLU(), "gelu": nn.GELU(),
        "hardswish": nn.Hardswish(), "mish": nn.Mish(), "leaky": nn.LeakyReLU(0.2), "elu": nn.ELU(),
        "softmax": nn.Softmax(dim=1), "log_softmax": nn.LogSoftmax(dim=1), "softplus": nn.Softplus(),
        "linear": nn.Linear(4, 3), "conv": nn.Conv2d(2, 3, 3), "layer_norm": nn.LayerNorm(4),
        "group_norm": nn.GroupNorm(2, 4), "dropout": nn.Dropout(0.1), "flatten": nn.Flatten(),
        "embedding": nn.Embedding(5, 3), "max_pool": nn.MaxPool2d(2), "adaptive_avg": nn.AdaptiveAvgPool2d(1),
        "prelu": nn.PReLU(), "seq": nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2), nn.Tanh()),
    }


def test_tracing_through_nn_modules_records_torchs_calls():
    """custom_tracer.py's LowerReluTracer, for every module: not a leaf, so its functional call is recorded."""
    found = {}
    for name, lib in LIBS.items():
        class ThroughAll(lib.fx.Tracer):
            def is_leaf_module(self, m, qualname):
                return False

        found[name] = {k: _ops(ThroughAll().trace(m)) for k, m in _through_models(lib).items()}
    for key, ops in found["torch"].items():
        assert found["ember"][key] == ops, key


def test_custom_create_node_sees_the_output_node():
    for lib in LIBS.values():
        class Tagging(lib.fx.Tracer):
            def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
                n = super().create_node(kind, target, args, kwargs, name)
                n.tag = "foo"
                return n

        class Add(lib.nn.Module):
            def forward(self, a, b):
                return a + b

        graph = Tagging().trace(Add())
        assert [getattr(n, "tag", None) for n in graph.nodes] == ["foo"] * 4


def test_fx_node_type_aliases():
    for lib in LIBS.values():
        def create_proxy(kind: str, target: lib.fx.node.Target, args: lib.fx.node.Argument) -> None:
            return None
        assert create_proxy("call_function", len, ()) is None


def test_profiler_record_function_ops_and_legacy_printout():
    """profiling_tracer.py: a range opened by an explicit node and closed by the operator called on its Proxy."""
    for lib in LIBS.values():
        class Foo(lib.nn.Module):
            def forward(self, x):
                return lib.relu(x)

        class RangeTracer(lib.fx.Tracer):
            def trace(self, root, concrete_args=None):
                graph = super().trace(root, concrete_args)
                return graph

        tracer = RangeTracer()
        graph = tracer.trace(Foo())
        relu = next(n for n in graph.nodes if n.op == "call_function")
        with graph.inserting_before(relu):
            handle = tracer.create_proxy("call_function", lib.ops.profiler._record_function_enter, ("foo",), {})
        with graph.inserting_after(relu):
            lib.ops.profiler._record_function_exit(handle)  # a Proxy argument: recorded, not run
        targets = [str(n.target) for n in graph.nodes if n.op == "call_function"]
        assert targets[0].endswith("_record_function_enter") and targets[-1].endswith("_record_function_exit")
        traced = lib.fx.GraphModule(tracer.root, graph)
        with lib.autograd.profiler.profile() as prof:
            traced(lib.ones(3))
        text = str(prof)  # the legacy profile prints its table
        names = [line.split()[0] for line in text.splitlines()[3:] if line.strip() and not line.startswith("-")]
        assert "foo" in names and any(n.endswith("relu") for n in names), text


def test_tracing_leaves_public_functions_unswitched():
    """Proxies switch __torch_function__ dispatch on only while their tracer lives: plain programs pay nothing."""
    from ember import _torch_function as tf
    gm = ember.fx.symbolic_trace(ember.nn.Sequential(ember.nn.Linear(3, 2), ember.nn.ReLU()))
    gc.collect()
    assert not tf.SWITCH.on
    g = ember.fx.Graph()
    p = ember.fx.Proxy(g.placeholder("x"))
    assert tf.SWITCH.on
    del p
    gc.collect()
    assert not tf.SWITCH.on
    assert gm(ember.ones(1, 3)).shape == (1, 2)
