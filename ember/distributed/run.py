"""Launch a data- or model-parallel job: ``python -m ember.distributed.run -n 4 train.py --lr 0.1``.

ember's distributed engine is MPI, so the launcher is a thin front for ``mpiexec`` (from the MPICH
wheel that ``pip install 'ember[dist]'`` brings, or any MPI on PATH). Several machines:
``--hosts node1,node2 --nproc-per-node 8`` (MPICH's Hydra reaches them over ssh).

Example:
    >>> from ember.distributed.run import build_command
    >>> build_command(["-n", "2", "train.py", "--lr", "0.1"], mpiexec="mpiexec", python="python")[:5]
    ['mpiexec', '-n', '2', 'python', '-u']
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ember.distributed import bootstrap
from ember.distributed.bootstrap import ERROR_DIR_ENV

BOOTSTRAP = str(Path(bootstrap.__file__).resolve())  # runs each rank's script; started by path (see its docstring)
GRACE_S = 3.0  # after a rank records a failure, how long the job may take to end by itself before it is ended


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
    cmd += [python or sys.executable, "-u", BOOTSTRAP]
    cmd += (["-m", opts.target] if opts.module else [opts.target]) + list(opts.args)
    return cmd


def main(argv: list[str] | None = None) -> int:
    """Run the job; when it fails, print which rank failed first and its traceback (as torchrun does)."""
    cmd = build_command(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="ember-errors-") as folder:
        job = subprocess.Popen(cmd, env=dict(os.environ, **{ERROR_DIR_ENV: folder}))
        try:
            code = _watch(job, folder)
        except KeyboardInterrupt:  # mpiexec got the Ctrl-C too and stops the ranks
            code = job.wait()
        if code != 0:
            sys.stderr.write(failure_summary(folder, code))
    return code


def _watch(job: subprocess.Popen, folder: str) -> int:
    """Wait for the job; if a rank recorded a failure and the job is still running ``GRACE_S`` later (the
    rank failed before MPI could abort the job, e.g. before init_process_group, or called sys.exit(1)),
    end it: mpiexec passes the signal to every rank."""
    failed_at = None
    while True:
        try:
            return job.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if failed_at is None and any(Path(folder).glob("rank-*.json")):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > GRACE_S:
            sys.stderr.write(f"ember.distributed.run: a rank failed {GRACE_S:.0f} s ago and the job is still "
                             "running; ending every rank\n")
            job.terminate()
            try:
                code = job.wait(timeout=10)
            except subprocess.TimeoutExpired:
                job.kill()
                code = job.wait()
            return code or 1


def failure_summary(folder: str, code: int) -> str:
    """A report of the ranks' recorded failures in ``folder``, the first one (the root cause) in full."""
    records = []
    for path in sorted(Path(folder).glob("rank-*.json")):
        try:
            records.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # a rank killed while writing: its traceback is on stderr above
    records = [r for r in records if isinstance(r, dict) and {"rank", "time", "exception", "traceback"} <= set(r)]
    records.sort(key=lambda r: float(r["time"]))
    line = "=" * 72
    out = [line, f"ember.distributed.run: the job failed (exit code {code})"]
    if not records:
        out.append("No rank recorded a Python exception: a rank was killed by a signal, or exited in a way Python "
                   "could not report (see mpiexec's messages above).")
    else:
        first = records[0]
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(first["time"])))
        out += ["Root cause (first observed failure):",
                f"  rank      : {first['rank']} (pid {first.get('pid')}, host {first.get('host')})",
                f"  time      : {stamp}",
                f"  exception : {first['exception']}",
                "  traceback :"]
        out += ["    " + text for text in str(first["traceback"]).rstrip().splitlines()]
        if len(records) > 1:
            out.append("Other failures (after the root cause):")
            out += [f"  rank {r['rank']}: {r['exception'][:300]}" for r in records[1:]]
    out.append(line)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
