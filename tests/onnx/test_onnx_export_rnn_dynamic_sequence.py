"""nn.LSTM / GRU / RNN export as ONNX LSTM / GRU / RNN nodes with a dynamic sequence axis (formats22).

Found: a dynamic sequence axis through a recurrent module was refused ("the traced graph changes when a dynamic
size changes"): the trace held one set of nodes per time step. Each layer is now one ONNX node (both directions),
checked in onnxruntime at sequence lengths other than the example's against ember's forward and torch's (same
weights through state_dict), with and without initial states, time- and batch-major, unbatched.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")


def _leaves(result) -> list:
    if isinstance(result, (tuple, list)):
        return [leaf for v in result for leaf in _leaves(v)]
    return [result.detach().numpy()]


def _torch_twin(model, kind: str, **options):
    twin = getattr(torch.nn, kind)(model.input_size, model.hidden_size, **options)
    twin.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in model.state_dict().items()})
    return twin.eval()


def _session(tmp_path, model, examples, names, dynamic):
    path = str(tmp_path / "rnn.onnx")
    ember.onnx.export(model, examples, path, input_names=names, dynamic_axes=dynamic)
    proto = onnx.load(path)
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(path, providers=["CPUExecutionProvider"])


CASES = [  # kind, options; every case is 2 layers so layer chaining and the per-layer states are exercised
    ("LSTM", {"batch_first": True}),
    ("LSTM", {"bidirectional": True}),
    ("GRU", {"batch_first": True, "bidirectional": True}),
    ("GRU", {}),
    ("RNN", {"nonlinearity": "relu", "bidirectional": True, "batch_first": True}),
    ("RNN", {"bias": False}),
]


@pytest.mark.parametrize("kind,options", CASES)
def test_dynamic_sequence_and_batch_match_ember_and_torch(kind, options, tmp_path) -> None:
    ember.manual_seed(1)
    model = getattr(nn, kind)(3, 4, num_layers=2, **options).eval()
    batch_first = options.get("batch_first", False)
    seq_axis, batch_axis = (1, 0) if batch_first else (0, 1)
    example = ember.randn(*((2, 5, 3) if batch_first else (5, 2, 3)))
    proto, session = _session(tmp_path, model, (example,), ["x"], {"x": {seq_axis: "seq", batch_axis: "batch"}})
    op_type = kind if kind != "RNN" else "RNN"
    assert sum(node.op_type == op_type for node in proto.graph.node) == 2  # one node per layer, any length
    twin = _torch_twin(model, kind, num_layers=2, **options)
    rng = np.random.default_rng(0)
    for steps, batch in ((1, 3), (8, 1), (13, 2)):
        shape = [0, 0, 3]
        shape[seq_axis], shape[batch_axis] = steps, batch
        x = (rng.standard_normal(shape) * 2).astype(np.float32)
        got = session.run(None, {"x": x})
        with ember.no_grad():
            mine = _leaves(model(ember.from_numpy(x)))
        with torch.no_grad():
            theirs = _leaves(twin(torch.from_numpy(x)))
        assert len(got) == len(mine) == len(theirs)
        for g, m, t in zip(got, mine, theirs):
            assert g.shape == m.shape == t.shape
            np.testing.assert_allclose(g, m, atol=2e-6, rtol=1e-5)
            np.testing.assert_allclose(g, t, atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_given_initial_states_are_graph_inputs(kind, tmp_path) -> None:
    ember.manual_seed(2)
    model = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True, batch_first=True).eval()
    x0, h0 = ember.randn(2, 5, 3), ember.randn(4, 2, 4)
    names = ["x", "h0", "c0"] if kind == "LSTM" else ["x", "h0"]
    dynamic = {"x": {0: "batch", 1: "seq"}, "h0": {1: "batch"}}
    if kind == "LSTM":
        dynamic["c0"] = {1: "batch"}

        class WithStates(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = model

            def forward(self, x, h, c):
                return self.rnn(x, (h, c))

        wrapped, examples = WithStates().eval(), (x0, h0, ember.randn(4, 2, 4))
    else:
        wrapped, examples = model, (x0, h0)
    _, session = _session(tmp_path, wrapped, examples, names, dynamic)
    twin = _torch_twin(model, kind, num_layers=2, bidirectional=True, batch_first=True)
    rng = np.random.default_rng(1)
    for steps, batch in ((2, 3), (9, 1)):
        feeds = {"x": rng.standard_normal((batch, steps, 3)).astype(np.float32),
                 "h0": rng.standard_normal((4, batch, 4)).astype(np.float32)}
        if kind == "LSTM":
            feeds["c0"] = rng.standard_normal((4, batch, 4)).astype(np.float32)
        got = session.run(None, feeds)
        args = [ember.from_numpy(feeds[n]) for n in names]
        targs = [torch.from_numpy(feeds[n]) for n in names]
        with ember.no_grad():
            mine = _leaves(wrapped(*args))
        with torch.no_grad():
            theirs = _leaves(twin(targs[0], tuple(targs[1:]) if kind == "LSTM" else targs[1]))
        for g, m, t in zip(got, mine, theirs):
            np.testing.assert_allclose(g, m, atol=2e-6, rtol=1e-5)
            np.testing.assert_allclose(g, t, atol=2e-6, rtol=1e-5)


def test_unbatched_input_and_a_head_after_the_rnn(tmp_path) -> None:
    """(T, H_in) input, then a Linear on the last step: a typical sequence classifier."""
    ember.manual_seed(3)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(3, 6)
            self.head = nn.Linear(6, 2)

        def forward(self, x):
            out, h = self.rnn(x)
            return self.head(out[-1]) + h.sum()

    model = Classifier().eval()
    _, session = _session(tmp_path, model, (ember.randn(4, 3),), ["x"], {"x": {0: "seq"}})
    for steps in (1, 7):
        x = np.random.default_rng(steps).standard_normal((steps, 3)).astype(np.float32)
        with ember.no_grad():
            expected = model(ember.from_numpy(x)).numpy()
        np.testing.assert_allclose(session.run(None, {"x": x})[0], expected, atol=2e-6, rtol=1e-5)


def test_the_export_op_computes_the_module_eagerly() -> None:
    """The unregistered export op's own impl (used only if someone calls it eagerly) equals the module."""
    from ember.ops import dispatch
    from ember.onnx.recurrent import RECURRENT_LAYER

    ember.manual_seed(4)
    lstm = nn.LSTM(3, 4, bidirectional=True).eval()
    x = ember.randn(6, 2, 3)
    args = [x] + [p for d in range(2) for p in lstm._weights(0, d)[:4]]
    attrs = {"mode": "LSTM", "hidden": 4, "directions": 2, "has_bias": True, "has_h0": False, "has_c0": False}
    with ember.no_grad():
        out, h, c = dispatch.apply(RECURRENT_LAYER, tuple(args), attrs)
        ref_out, (ref_h, ref_c) = lstm(x)
    for a, e in ((out, ref_out), (h, ref_h), (c, ref_c)):
        np.testing.assert_allclose(a.numpy(), e.numpy(), atol=1e-6, rtol=1e-6)


def test_proj_size_keeps_the_static_composite(tmp_path) -> None:
    """ONNX's LSTM has no projection: a static export still works; a dynamic sequence says why it cannot."""
    ember.manual_seed(5)
    model = nn.LSTM(3, 4, proj_size=2).eval()
    x = ember.randn(5, 2, 3)
    _, session = _session(tmp_path, model, (x,), ["x"], None)
    with ember.no_grad():
        expected = _leaves(model(x))
    for g, e in zip(session.run(None, {"x": x.numpy()}), expected):
        np.testing.assert_allclose(g, e, atol=2e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match="dynamic size"):
        ember.onnx.export(model, (x,), str(tmp_path / "p.onnx"), input_names=["x"], dynamic_axes={"x": {0: "seq"}})


def test_only_the_exporting_thread_traces_the_export_op() -> None:
    """While one thread exports, another thread's trace of the same LSTM (ember.compile, jit) keeps its per-step ops."""
    import threading

    from ember.graph.builder import Tracer
    from ember.onnx.recurrent import recurrent_as_onnx_nodes

    lstm = nn.LSTM(3, 4).eval()

    def traced_ops() -> set:
        with ember.no_grad(), Tracer("thread_check") as tracer:
            x = tracer.input((5, 2, 3), ember.float32, ember.randn(1).device, name="x")
            out = lstm(x)[0]
            tracer.builder.finish([out])
            del out, x
        return {node.op.name for node in tracer.graph.nodes}

    seen: dict = {}
    with recurrent_as_onnx_nodes():
        seen["exporting"] = traced_ops()
        other = threading.Thread(target=lambda: seen.__setitem__("other", traced_ops()))
        other.start()
        other.join()
    seen["after"] = traced_ops()
    assert "onnx_recurrent_layer" in seen["exporting"]
    assert "onnx_recurrent_layer" not in seen["other"] and "matmul" in seen["other"]
    assert "onnx_recurrent_layer" not in seen["after"]
