"""ember.hardware on a GPU backend: measured through the backend's xp and events, keyed by the device model."""
from __future__ import annotations

import pytest

import ember
from ember import hardware


@pytest.fixture()
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    hardware._MEMO.clear()
    yield tmp_path
    hardware._MEMO.clear()


def test_device_peak_is_measured_with_the_backend_and_cached_under_the_device_model(home, monkeypatch):
    with ember.testing.standin_cuda():
        model = hardware.device_model("cuda")
        assert model.startswith("ember standin device 0")  # the backend's device_properties name
        key = hardware.cache_key("cuda")
        assert key.startswith("cuda|") and model in key and hardware.cpu_model() not in key
        measured = hardware.measure("cuda", dtypes=("float32", "float64"), quick=True)
        assert measured.device == "cuda" and measured.model == model
        # the stand-in multiplies with NumPy: its GEMM rate is a CPU's, between 10 MFLOP/s and 10 TFLOP/s
        for rate in measured.flops.values():
            assert 1e7 < rate < 1e13
        assert 1e8 < measured.bandwidth < 1e13
        calls = []
        monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: calls.append(device) or measured)
        first = hardware.peak("cuda")
        hardware._MEMO.clear()
        second = hardware.peak("cuda")  # read back from the cache file, not measured again
    assert calls == ["cuda"] and first.flops == second.flops
    assert key in (home / "hardware.json").read_text()


def test_a_dtype_the_device_cannot_multiply_is_left_out(home, monkeypatch):
    with ember.testing.standin_cuda():
        measured = hardware.measure("cuda", dtypes=("float32", "complex-nonsense"), quick=True)
    assert set(measured.flops) == {"float32"}
