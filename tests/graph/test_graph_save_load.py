"""Save a compiled training step; load and run it in a fresh process without the building code."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.graph as G

REPO = Path(__file__).resolve().parents[2]


def _build_and_save(path):
    rng = np.random.RandomState(0)
    x = ember.tensor(rng.randn(8, 6))
    y = ember.tensor(rng.randn(8, 2))
    w1 = ember.tensor(rng.randn(6, 4), requires_grad=True)
    w2 = ember.tensor(rng.randn(4, 2), requires_grad=True)

    def step(x, y):
        loss = ((x.mm(w1).relu().mm(w2) - y) ** 2).sum()
        loss.backward()
        with ember.no_grad():
            w1.sub_(1e-3 * w1.grad)
            w2.sub_(1e-3 * w2.grad)
            w1.grad = None
            w2.grad = None
        return loss

    f = ember.compile(step)
    f(x, y)
    f(x, y)  # traced here
    f.save(str(path))
    expected = [f(x, y).item() for _ in range(3)]
    # The saved weights are those before these three calls: two eager-equivalent steps had run.
    return x.numpy(), y.numpy(), expected


def test_saved_graph_runs_in_a_fresh_process(tmp_path):
    xv, yv, expected = _build_and_save(tmp_path / "g")
    np.save(tmp_path / "x.npy", xv)
    np.save(tmp_path / "y.npy", yv)
    script = (
        "import sys, numpy as np, ember.graph as G\n"
        "d = sys.argv[1]\n"
        "g = G.load(d + '/g')\n"
        "x, y = np.load(d + '/x.npy'), np.load(d + '/y.npy')\n"
        "print(' '.join(repr(g(x, y)[0].item()) for _ in range(3)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                         cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert out.returncode == 0, out.stderr
    got = [float(v) for v in out.stdout.split()]
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    doc = json.loads((tmp_path / "g" / "graph.json").read_text())
    assert doc["format"] == "ember.graph" and doc["version"] == 1
    assert (tmp_path / "g" / "weights.safetensors").exists()
    assert not any(p.suffix in (".pkl", ".pickle") for p in (tmp_path / "g").iterdir())


def test_define_then_run_graph_roundtrip(tmp_path):
    G.reset_default_graph()
    try:
        x = G.placeholder((3,), ember.float64, name="x")
        w = G.Variable(np.array([1.0, 2.0, 3.0]), name="w")
        y = (x * w)[1:].sum()
        graph = G.get_default_graph()
        graph.outputs = [y._data]
        G.save(graph, str(tmp_path / "d"))
    finally:
        G.reset_default_graph()
    loaded = G.load(str(tmp_path / "d"))
    np.testing.assert_allclose(loaded(np.array([1.0, 1.0, 1.0]))[0].numpy(), 5.0)


def test_corrupted_and_unknown_version_files_fail_clearly(tmp_path):
    _build_and_save(tmp_path / "g")
    path = tmp_path / "g" / "graph.json"
    doc = json.loads(path.read_text())
    doc["version"] = 99
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="version 99"):
        G.load(str(tmp_path / "g"))
    path.write_text('{"format": "ember.graph", "version": 1, "nodes": [')
    with pytest.raises(ValueError, match="not valid JSON"):
        G.load(str(tmp_path / "g"))
    doc["version"] = 1
    doc["nodes"][0]["op"] = "no_such_op"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="no_such_op"):
        G.load(str(tmp_path / "g"))
    (tmp_path / "g" / "weights.safetensors").write_bytes(b"garbage")
    doc["nodes"][0]["op"] = "matmul"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="weights"):
        G.load(str(tmp_path / "g"))
