"""DistributedDataParallel and collectives on 'cuda' tensors, two ranks sharing one device.

On CPU-only machines the device is the stand-in (EMBER_CUDA_STANDIN=1), which exercises the host-
staging path (device pack, one copy to the host, MPI all-reduce, one copy back) with arrays that
refuse silent host conversion. On a machine with one GPU the same test runs on CuPy (two ranks
share the GPU: host staging again, as NCCL refuses two ranks on one GPU).
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mpi_support import WORKERS, needs_mpi, run_on_ranks  # noqa: E402

import ember  # noqa: E402


def _device_env() -> dict | None:
    if ember.cuda.is_available():
        return {}
    if importlib.util.find_spec("ember.backends.standin") is not None:
        return {"EMBER_CUDA_STANDIN": "1"}
    return None


@needs_mpi
def test_ddp_on_cuda_tensors_matches_torch(monkeypatch):
    env = _device_env()
    if env is None:
        pytest.skip("no CUDA device and no stand-in device")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("EXPECT_COMM", "host")
    out = run_on_ranks([WORKERS / "worker_ddp_cuda.py"], n=2)
    assert "ddp cuda ok (host)" in out
