"""tools/gpu_session.sh without a GPU (fast checks; the whole dry run is tests/backends/test_bench_gpu_dry_run.py,
slow): the script parses, refuses an unknown step, and `collect` copies exactly the session's logs (the names the
steps write) under benchmarks/results/ of the folder it runs in."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "gpu_session.sh"
pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def test_the_script_parses_and_refuses_unknown_steps(tmp_path):
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    bad = subprocess.run(["bash", str(SCRIPT), "frobnicate"], cwd=tmp_path, capture_output=True, text=True,
                         env={"OUT": str(tmp_path / "out"), "PATH": "/usr/bin:/bin"})
    assert bad.returncode == 2 and "usage" in bad.stderr


def test_collect_copies_the_session_logs_under_benchmarks_results(tmp_path):
    got = tmp_path / "files"
    got.mkdir()
    names = ["session-20261126-0100-NVIDIA-H200.txt", "gpu-20261126-0100-NVIDIA-H200.txt",
             "gpu-20261126-0100-NVIDIA-H200.json", "suite-20261126-0110-NVIDIA-H200.txt"]
    for name in names + ["core.12345", "notes.md"]:
        (got / name).write_text(name)
        (got / name).chmod(0o444)  # the device tool hands files back read-only
    repo = tmp_path / "repo"
    repo.mkdir()
    done = subprocess.run(["bash", str(SCRIPT), "collect", str(got)], cwd=repo, capture_output=True, text=True,
                          env={"OUT": str(tmp_path / "out"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    results = repo / "benchmarks" / "results"
    assert sorted(p.name for p in results.iterdir()) == sorted(names)
    assert all((results / n).read_text() == n for n in names) and "4 files" in done.stdout
