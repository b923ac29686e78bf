"""ember.hardware: the peak measurement is sane, cached per machine, and the roofline arithmetic is right."""
from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest

from ember import hardware


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    hardware._MEMO.clear()
    yield tmp_path
    hardware._MEMO.clear()


def test_quick_measurement_is_sane():
    p = hardware.measure(dtypes=("float32", "float64"), quick=True)
    cores = os.cpu_count() or 1
    for name in ("float32", "float64"):
        # at least 0.1 GFLOP/s, at most 64 FLOPs per cycle per core at 6 GHz
        assert 1e8 < p.flops[name] < cores * 64 * 6e9, p
    assert 1e8 < p.bandwidth < 5e12, p
    assert p.model == hardware.cpu_model() and p.seconds < 5


def test_gemm_rate_counts_2n3_flops(monkeypatch):
    ticks = itertools.count()  # a clock that advances 0.5 s per reading: every timed call "takes" 0.5 s
    monkeypatch.setattr(hardware.time, "perf_counter", lambda: 0.5 * next(ticks))
    rate = hardware._best_rate(2.0 * 64**3, lambda: None, budget=0.0)
    assert rate == pytest.approx(2.0 * 64**3 / 0.5)


def test_peak_is_measured_once_and_cached_with_the_cpu_in_the_key(home, monkeypatch):
    calls = []

    def fake_measure(device="cpu", **kw):
        calls.append(device)
        return hardware.Peak(device, hardware.cpu_model(), {"float32": 2e10, "float64": 1e10}, 3e10)

    monkeypatch.setattr(hardware, "measure", fake_measure)
    first = hardware.peak()
    hardware._MEMO.clear()  # a new process: reads the file instead of measuring
    second = hardware.peak()
    assert calls == ["cpu"] and first.flops == second.flops == {"float32": 2e10, "float64": 1e10}
    stored = json.loads((home / "hardware.json").read_text())
    (key,) = stored
    assert hardware.cpu_model() in key and f"numpy {np.__version__}" in key
    # a corrupt or foreign entry is not trusted: measured again
    stored[key]["flops"] = {"float32": -1}
    (home / "hardware.json").write_text(json.dumps(stored))
    hardware._MEMO.clear()
    hardware.peak()
    assert calls == ["cpu", "cpu"]


def test_roofline_bounds_and_fractions(home, monkeypatch):
    monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: hardware.Peak(
        device, "m", {"float32": 100e9}, 10e9))
    r = hardware.roofline(flops=50e9, nbytes=1e9, seconds=1.0)  # intensity 50 > ridge 10: compute-bound
    assert r.bound == "compute" and r.mfu == pytest.approx(0.5) and r.attained == pytest.approx(0.5)
    assert r.bytes_per_s == pytest.approx(1e9) and r.bandwidth_fraction == pytest.approx(0.1)
    r = hardware.roofline(flops=1e9, nbytes=4e9, seconds=1.0)  # intensity 0.25 < 10: memory-bound
    assert r.bound == "memory" and r.attained == pytest.approx(1e9 / (0.25 * 10e9))
    assert "memory-bound" in str(r) and "MFU" in str(r)


def test_a_run_beating_the_peak_corrects_it_in_this_process_only(home, monkeypatch):
    measured = []

    def fake_measure(device="cpu", **kw):
        measured.append(device)
        return hardware.Peak(device, hardware.cpu_model(), {"float32": 10e9}, 10e9)

    monkeypatch.setattr(hardware, "measure", fake_measure)
    monkeypatch.setattr(hardware, "_REMEASURED", set())
    hardware.peak()
    r = hardware.roofline(flops=40e9, nbytes=1e9, seconds=1.0)  # 40 GFLOP/s "beats" the 10 GFLOP/s peak
    assert measured == ["cpu", "cpu"]  # measured again once...
    assert r.mfu == pytest.approx(1.0) and hardware.peak().flops["float32"] == 40e9  # ...then the run's rate
    stored = json.loads((home / "hardware.json").read_text())
    assert [v["flops"]["float32"] for v in stored.values()] == [10e9]  # the cache keeps only measurements
    hardware._MEMO.clear()  # a new process
    assert hardware.peak().flops["float32"] == 10e9
