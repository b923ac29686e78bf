"""Launch a data- or model-parallel job: ``python -m ember.distributed.run -n 4 train.py --lr 0.1``.

ember's distributed engine is MPI, so the launcher is a thin front for ``mpiexec`` (from the MPICH
wheel that ``pip install 'ember[dist]'`` brings, or any MPI on PATH). Several machines:
``--hosts node1,node2 --nproc-per-node 8`` (MPICH's Hydra reaches them over ssh).

Example:
    >>> from ember.distributed.run import build_command
    >>> build_command(["-n", "2", "train.py", "--lr", "0.1"], mpiexec="mpiexec", python="python")
    ['mpiexec', '-n', '2', 'python', '-u', 'train.py', '--lr', '0.1']
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path


def find_mpiexec() -> str:
    """``mpiexec`` beside this Python (a venv with the MPICH wheel) or on PATH."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    if found is None:
        raise FileNotFoundError("ember.distributed.run: no mpiexec found beside this Python or on PATH; "
                                "pip install 'ember[dist]' (mpi4py + the MPICH wheel) or install an MPI")
    return found


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ember.distributed.run",
                                description="Start N processes of a script under MPI (one rank each).")
    p.add_argument("-n", "--nproc-per-node", "--nproc_per_node", dest="nproc", type=int, default=1,
                   help="processes per machine (default 1)")
    p.add_argument("--hosts", default=None, help="comma-separated machines (default: this one)")
    p.add_argument("-m", dest="module", action="store_true", help="run the target as a module (python -m)")
    p.add_argument("target", help="script (or module with -m)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def build_command(argv: list[str], mpiexec: str | None = None, python: str | None = None) -> list[str]:
    """The mpiexec command line for ``argv`` (the launcher's own arguments)."""
    opts = _parser().parse_args(argv)
    if opts.nproc < 1:
        raise SystemExit(f"ember.distributed.run: --nproc-per-node must be >= 1, got {opts.nproc}")
    cmd = [mpiexec or find_mpiexec()]
    if opts.hosts:
        hosts = [h for h in opts.hosts.split(",") if h]
        cmd += ["-hosts", ",".join(hosts), "-ppn", str(opts.nproc), "-n", str(opts.nproc * len(hosts))]
    else:
        cmd += ["-n", str(opts.nproc)]
    cmd += [python or sys.executable, "-u"]
    cmd += (["-m", opts.target] if opts.module else [opts.target]) + list(opts.args)
    return cmd


def main(argv: list[str] | None = None) -> int:
    cmd = build_command(sys.argv[1:] if argv is None else argv)
    return subprocess.call(cmd, env=dict(os.environ))


if __name__ == "__main__":
    raise SystemExit(main())
