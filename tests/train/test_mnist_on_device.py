"""``ember demo --device cuda`` / ``ember train mnist --device cuda``: the MNIST trainer on a CUDA device.

Without a GPU the device is the stand-in; the run must equal the CPU run (same initial weights,
same shuffling; the stand-in computes with NumPy), and its pictures are written.
"""
from __future__ import annotations

import pytest

import ember
from ember import cli
from ember.train import mnist


@pytest.mark.slow
def test_mnist_trains_on_the_device_like_on_the_cpu(tmp_path):
    if getattr(ember.testing, "standin_cuda", None) is None:
        pytest.skip("the stand-in device is not on this branch")
    cpu = mnist.run(epochs=1, limit=200, verbose=0, run_dir=tmp_path / "cpu", device="cpu")
    with ember.testing.standin_cuda():
        dev = mnist.run(epochs=1, limit=200, verbose=0, run_dir=tmp_path / "cuda", device="cuda")
    assert dev["test_accuracy"] == cpu["test_accuracy"]
    assert dev["test_loss"] == pytest.approx(cpu["test_loss"], rel=1e-5)
    assert dev["pictures"]["graph"] is not None


def test_cli_passes_the_device(monkeypatch):
    seen = {}
    monkeypatch.setattr(mnist, "run", lambda **kwargs: seen.update(kwargs) or {})
    assert cli.main(["demo", "--device", "cuda:1", "--epochs", "1"]) == 0
    assert seen["device"] == "cuda:1" and seen["epochs"] == 1
    assert cli.main(["train", "mnist", "--data", "d"]) == 0
    assert seen["device"] == "cpu" and seen["data_dir"] == "d"
