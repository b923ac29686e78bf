"""benchmarks/bench_gpu.py end to end without a GPU: ``--dry-run`` runs every workload with ember on
the stand-in device and PyTorch on the CPU at tiny sizes, so the script a GPU session will spend its
minutes on has run through (its correctness checks included) before that session."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import ember

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_bench_gpu_dry_run(tmp_path):
    if getattr(ember.testing, "standin_cuda", None) is None:
        pytest.skip("the stand-in device is not on this branch")
    pytest.importorskip("torch")
    env = dict(os.environ, EMBER_CUDA_STANDIN="1", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py"), "--dry-run", "--out",
                             str(tmp_path)], capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "WRONG" not in result.stdout and "FAILED" not in result.stdout
    for name in ("matmul bf16", "w3 fp32", "w4 bf16 autocast", "gpt2 bf16 autocast", "chain fwd+bwd", "dispatch"):
        assert name in result.stdout, name
    assert list(tmp_path.glob("gpu-*-dry-run.txt")) and list(tmp_path.glob("gpu-*-dry-run.json"))


def test_bench_gpu_without_a_gpu_exits_cleanly():
    if ember.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_gpu.py")], capture_output=True,
                            text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    assert result.returncode == 0 and "nothing to measure here: no CUDA device is available" in result.stdout
