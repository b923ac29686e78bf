"""Shared set-up of the profiler tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def fixed_hardware_peak(tmp_path, monkeypatch):
    """Tables read the machine's peak: use a fixed one (10 GFLOP/s float32, 10 GB/s) cached in a temporary
    EMBER_HOME, so the tests neither measure this machine nor read or write the user's cache."""
    from ember import hardware

    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "ember_home"))
    monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: hardware.Peak(
        device, "test CPU", {"float32": 1e10, "float64": 5e9}, 1e10))
    hardware._MEMO.clear()
    yield
    hardware._MEMO.clear()
