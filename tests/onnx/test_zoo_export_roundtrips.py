"""Model-zoo round trips: ember.onnx.export -> onnxruntime, and ember's saved static graph loaded in a fresh
process (no torch, no model-building code) against the eager result (tests/onnx/zoo_roundtrip.py does the work).

The default run takes two small representatives (an LSTM for both routes, SqueezeNet 1.1 through ONNX); the
sweep over every classification family, the video and segmentation models and nn.Transformer/LSTM/GRU is slow.
"""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

sys.path.insert(0, os.path.dirname(__file__))
import zoo_roundtrip  # noqa: E402

# Errors are max |a - b| over the output's largest magnitude. onnxruntime runs float32 with its own kernels: it must be
# as close to the float64 answer as ember's float32 eager result is (within 4x, or 1e-5 for shallow nets).
ONNX_NOISE_FACTOR, ONNX_FLOOR = 4.0, 1e-5
# ember's own saved graph runs the same kernels as ember.compile: equal to eager up to fusion's reassociation
GRAPH_TOL = 1e-5


def _check(result: dict) -> None:
    for route in ("onnx", "graph"):
        if route in result:
            value = result[route]
            assert not isinstance(value, str), f"{result['name']} {route}: {value}"
            tol = max(ONNX_NOISE_FACTOR * result["f32_noise"], ONNX_FLOOR) if route == "onnx" else GRAPH_TOL
            assert value <= tol, f"{result['name']} {route}: relative error {value:.3g} > {tol:.3g}"


def test_lstm_onnx_and_saved_graph_in_a_fresh_process():
    _check(zoo_roundtrip.roundtrip("lstm"))


def test_squeezenet_onnx():
    _check(zoo_roundtrip.roundtrip("squeezenet1_1", which=("onnx",)))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(zoo_roundtrip.VISION) + list(zoo_roundtrip.MODULES))
def test_zoo_roundtrips(name):
    _check(zoo_roundtrip.roundtrip(name))
