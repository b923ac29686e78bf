"""`ember bench`: eager vs compiled time of the same step, each with achieved FLOP/s, MFU, bandwidth and bound."""
from __future__ import annotations

import re
import sys

import pytest

from ember import cli, hardware


@pytest.fixture(autouse=True)
def _isolated_hardware(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "ember_home"))
    monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: hardware.Peak(
        device, "test CPU", {"float32": 1e13, "float64": 5e12}, 1e13))
    hardware._MEMO.clear()
    yield
    hardware._MEMO.clear()


def test_bench_prints_eager_and_compiled_with_mfu(monkeypatch, capsys):
    from ember.graph import showcase

    real = showcase.showcase
    monkeypatch.setattr(showcase, "showcase", lambda steps=100, verbose=True: real(steps=10, verbose=verbose))
    monkeypatch.setattr(sys, "argv", ["ember", "bench"])
    cli.main()
    out = capsys.readouterr().out
    lines = {name: re.search(rf"^\s+{name}\s+([\d.]+) us/step\s+([\d.]+) GFLOP/s =\s+([\d.]+)% MFU", out, re.M)
             for name in ("eager", "compiled")}
    assert all(lines.values()), out
    step_mflop = float(re.search(r"a step is ([\d.]+) MFLOP", out).group(1))
    # the two-layer net: 2 GEMMs forward (64x1000 @ 1000x100, 64x100 @ 100x10) and 3 backward (dW2, dH, dW1;
    # x needs no gradient), each 2*m*n*k; the elementwise ops (clamp, its mask, sub, pow, sum, SGD) add < 0.1 MFLOP
    gemms = 2 * 64 * 1000 * 100 + 2 * 64 * 100 * 10 + 2 * 100 * 64 * 10 + 2 * 64 * 10 * 100 + 2 * 1000 * 64 * 100
    assert gemms / 1e6 <= step_mflop <= gemms / 1e6 + 0.2
    for match in lines.values():
        us, gflops, mfu = (float(g) for g in match.groups())
        assert gflops == pytest.approx(step_mflop * 1e6 / (us * 1e-6) / 1e9, rel=0.02, abs=0.01)
        assert mfu == pytest.approx(100 * gflops * 1e9 / 1e13, abs=0.051)  # printed with one decimal
    assert "weights agree to" in out and "peak of this machine: test CPU" in out


def test_bench_says_when_the_machine_was_too_busy_to_time(monkeypatch, capsys):
    """Timed while other work held the cores (wall time far above the process's CPU time), the figures are the
    busy machine's: the bench says so instead of presenting them as ember's."""
    from ember.graph import showcase

    real_perf, real_cpu = showcase.time.perf_counter, showcase.time.process_time
    # a wall clock running 20x faster than the process's CPU time: the process got 5% of the time it was timed
    monkeypatch.setattr(showcase.time, "perf_counter", lambda: 20 * real_perf())
    monkeypatch.setattr(showcase.time, "process_time", real_cpu)
    result = showcase.showcase(steps=5, verbose=True)
    out = capsys.readouterr().out
    assert result["cpu_share"] < 0.5 and "got the CPU for only" in out
    monkeypatch.setattr(showcase.time, "perf_counter", real_perf)
    assert showcase.showcase(steps=5, verbose=False)["cpu_share"] > 0.05  # the real clocks: some CPU was had
