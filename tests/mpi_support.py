"""Shared by the tests that start MPI jobs: find mpiexec, skip without it, run a script on N ranks."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKERS = Path(__file__).parent / "distributed"


def _mpiexec() -> str | None:
    try:
        import mpi4py  # noqa: F401

        from ember.distributed.run import find_mpiexec

        return find_mpiexec()
    except (ImportError, FileNotFoundError):
        return None


MPIEXEC = _mpiexec()
needs_mpi = pytest.mark.skipif(MPIEXEC is None, reason="mpi4py/mpiexec not installed (pip install 'ember[dist]')")


def run_on_ranks(args: list, n: int = 2, timeout: int = 240) -> str:
    """Run ``python args...`` on ``n`` MPI ranks from the repository root (this checkout's ember
    first on the path); fail with both ranks' output if any rank fails. Returns stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *map(str, args)], capture_output=True,
                            text=True, timeout=timeout, env=env, cwd=ROOT)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    return result.stdout
