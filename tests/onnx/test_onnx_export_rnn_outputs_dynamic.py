"""ONNX export of recurrent models with a dynamic batch and nested outputs (formats21), checked with
onnx.checker(full_check=True) and run in onnxruntime at other batch sizes than the example's.

Found: an LSTM's ``output, (h, c)`` was refused ("must return tensors"; torch.onnx.export flattens nested outputs),
and with a dynamic batch its zero initial state and the reversed-time index of a bidirectional layer were constants
whose shape follows the batch ("depends on a dynamic size"). They are now Expand of their values along the
size-dependent axes; a constant that really differs along such an axis is still refused.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


def _flat(result) -> list:
    if isinstance(result, dict):
        return [leaf for v in result.values() for leaf in _flat(v)]
    if isinstance(result, (tuple, list)):
        return [leaf for v in result for leaf in _flat(v)]
    return [result.detach().numpy()]


def _export_and_run(tmp_path, model, example, dynamic, batches):
    path = str(tmp_path / "m.onnx")
    ember.onnx.export(model, (example,), path, input_names=["x"], dynamic_axes={"x": dynamic})
    onnx.checker.check_model(onnx.load(path), full_check=True)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for batch in batches:
        shape = list(example.shape)
        shape[next(iter(dynamic))] = batch
        x = rng.standard_normal(shape).astype(np.float32)
        with ember.no_grad():
            expected = _flat(model(ember.from_numpy(x)))
        got = session.run(None, {"x": x})
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            assert e.shape == g.shape
            np.testing.assert_allclose(g, e, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_bidirectional_stacked_rnn_with_dynamic_batch(kind, tmp_path) -> None:
    ember.manual_seed(0)
    model = getattr(nn, kind)(4, 5, num_layers=2, batch_first=True, bidirectional=True).eval()
    _export_and_run(tmp_path, model, ember.randn(2, 6, 4), {0: "batch"}, [1, 3, 7])


def test_dict_and_nested_outputs_are_flattened_in_order(tmp_path) -> None:
    class Heads(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            y = self.fc(x)
            return {"logits": y, "extra": (y.relu(), [y.sum(1), x * 2])}

    _export_and_run(tmp_path, Heads().eval(), ember.randn(4, 3), {0: "batch"}, [2, 5])


def test_constants_repeated_along_the_dynamic_axis_follow_it(tmp_path) -> None:
    """x + zeros(batch, 3) + a per-column ramp repeated over the batch: built from constants at trace time."""
    def fn(x):
        batch = x.shape[0]
        ramp = ember.arange(3.0).reshape(1, 3).repeat(batch, 1)
        return x + ember.zeros(batch, 3) + ramp

    _export_and_run(tmp_path, fn, ember.randn(4, 3), {0: "batch"}, [1, 6])


def test_a_constant_that_varies_along_the_dynamic_axis_is_refused(tmp_path) -> None:
    """linspace(0, 1, batch): neither repeated nor an integer ramp (arange(batch) exports as Range since formats22)."""
    def fn(x):
        return x + ember.linspace(0.0, 1.0, x.shape[0]).reshape(-1, 1)

    with pytest.raises(RuntimeError, match="depends on a dynamic size"):
        ember.onnx.export(fn, (ember.randn(4, 3),), str(tmp_path / "m.onnx"), input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})
