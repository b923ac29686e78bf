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

# float32 models through a different runtime: max |a - b| over the output's largest magnitude
ONNX_TOL = 1e-4
# ember's own saved graph runs the same kernels as ember.compile: equal to eager up to fusion's reassociation
GRAPH_TOL = 1e-5


def _check(result: dict) -> None:
    for route, tol in (("onnx", ONNX_TOL), ("graph", GRAPH_TOL)):
        if route in result:
            value = result[route]
            assert not isinstance(value, str), f"{result['name']} {route}: {value}"
            assert value <= tol, f"{result['name']} {route}: relative error {value:.3g} > {tol}"


def test_lstm_onnx_and_saved_graph_in_a_fresh_process():
    _check(zoo_roundtrip.roundtrip("lstm"))


def test_squeezenet_onnx():
    _check(zoo_roundtrip.roundtrip("squeezenet1_1", which=("onnx",)))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(zoo_roundtrip.VISION) + list(zoo_roundtrip.MODULES))
def test_zoo_roundtrips(name):
    _check(zoo_roundtrip.roundtrip(name))
