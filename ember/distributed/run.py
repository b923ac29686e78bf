"""Launch a data- or model-parallel job: ``python -m ember.distributed.run -n 4 train.py --lr 0.1``.

Two ways to start the ranks (``--launcher``):

* ``mpi`` (the default when ``mpiexec`` is beside this Python or on PATH): a thin front for ``mpiexec``
  (the MPICH wheel of ``pip install 'ember[dist]'``, or any MPI). Several machines:
  ``--hosts node1,node2 --nproc-per-node 8`` (MPICH's Hydra reaches them over ssh).
* ``local`` (the default without ``mpiexec``): starts the processes itself, as torchrun does, for
  ``init_process_group("gloo")`` scripts; several machines run the launcher once each with
  ``--nnodes N --node-rank i --master-addr host0 --master-port P``.

Either way every rank finds torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
GROUP_RANK, MASTER_ADDR, MASTER_PORT (a free port unless given), TORCHELASTIC_RUN_ID; so a torchrun
script runs unchanged (``init_process_group("gloo")`` or ``"mpi"``). When a rank fails the launcher
ends the others and prints the first failure.

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
import socket
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
    p.add_argument("--hosts", default=None, help="comma-separated machines for mpiexec (default: this one)")
    p.add_argument("--launcher", choices=("auto", "mpi", "local"), default="auto",
                   help="mpi: through mpiexec; local: start the processes here (torchrun's way); auto: mpi when "
                        "mpiexec exists")
    p.add_argument("--nnodes", type=int, default=1, help="machines in the job (local launcher; default 1)")
    p.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0,
                   help="this machine's index among --nnodes (local launcher)")
    p.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1",
                   help="address of node 0, where rank 0 serves the rendezvous store")
    p.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=0,
                   help="port of the rendezvous store (default: a free one; give one with --nnodes > 1)")
    p.add_argument("--standalone", action="store_true", help="torchrun's flag: one machine (accepted)")
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


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on now (the rendezvous store's, when none is given)."""
    with socket.socket() as probe:
        probe.bind((host if host in ("127.0.0.1", "localhost") else "", 0))
        return probe.getsockname()[1]


def rank_environments(opts: argparse.Namespace, port: int) -> list[dict]:
    """torchrun's variables for each process this node starts (local launcher)."""
    world = opts.nproc * opts.nnodes
    common = {"WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(opts.nproc), "GROUP_RANK": str(opts.node_rank),
              "MASTER_ADDR": opts.master_addr, "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": "ember-run"}
    return [dict(common, RANK=str(opts.node_rank * opts.nproc + i), LOCAL_RANK=str(i)) for i in range(opts.nproc)]


def _use_mpi(opts: argparse.Namespace) -> bool:
    if opts.launcher == "mpi":
        return True
    if opts.launcher == "local" or opts.nnodes > 1:
        return False
    try:
        find_mpiexec()
    except FileNotFoundError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the job; when it fails, print which rank failed first and its traceback (as torchrun does)."""
    argv = sys.argv[1:] if argv is None else argv
    opts = _parser().parse_args(argv)
    if opts.nproc < 1 or opts.nnodes < 1 or not 0 <= opts.node_rank < opts.nnodes:
        raise SystemExit(f"ember.distributed.run: need --nproc-per-node >= 1 and 0 <= --node-rank < --nnodes, got "
                         f"{opts.nproc}, {opts.node_rank}, {opts.nnodes}")
    if opts.nnodes > 1 and not opts.master_port:
        raise SystemExit("ember.distributed.run: with --nnodes > 1 give --master-addr and --master-port (the same on "
                         "every machine)")
    port = opts.master_port or free_port(opts.master_addr)
    if not _use_mpi(opts):
        return _run_local(opts, port)
    cmd = build_command(argv)
    with tempfile.TemporaryDirectory(prefix="ember-errors-") as folder:
        env = dict(os.environ, MASTER_ADDR=opts.master_addr, MASTER_PORT=str(port), **{ERROR_DIR_ENV: folder})
        job = subprocess.Popen(cmd, env=env)
        try:
            code = _watch(job, folder)
        except KeyboardInterrupt:  # mpiexec got the Ctrl-C too and stops the ranks
            code = job.wait()
        if code != 0:
            sys.stderr.write(failure_summary(folder, code))
    return code


def _run_local(opts: argparse.Namespace, port: int) -> int:
    """Start this node's ranks as child processes; when one fails, end the others (torchrun's behaviour)."""
    target = ["-m", opts.target] if opts.module else [opts.target]
    cmd = [sys.executable, "-u", BOOTSTRAP] + target + list(opts.args)
    with tempfile.TemporaryDirectory(prefix="ember-errors-") as folder:
        procs = [subprocess.Popen(cmd, env=dict(os.environ, **env, **{ERROR_DIR_ENV: folder}))
                 for env in rank_environments(opts, port)]
        try:
            code = _watch_local(procs)
        except KeyboardInterrupt:  # the terminal sent the ranks the Ctrl-C too
            code = _stop(procs) or 130
        if code != 0:
            sys.stderr.write(failure_summary(folder, code))
    return code


def _watch_local(procs: list[subprocess.Popen]) -> int:
    """0 when every rank ends with 0; else the first failing rank's exit code, after ending the others."""
    while True:
        codes = [p.poll() for p in procs]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            running = sum(c is None for c in codes)
            if running:
                sys.stderr.write(f"ember.distributed.run: a rank exited with code {failed[0]}; ending the other "
                                 f"{running} rank(s)\n")
            _stop(procs)
            return failed[0] if failed[0] > 0 else 128 - failed[0]  # killed by signal N: 128 + N, as a shell says
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.1)


def _stop(procs: list[subprocess.Popen]) -> int:
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return 0


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
