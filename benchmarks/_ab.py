"""Run a benchmark's cases here, or side by side against another checkout of ember (``--ab OLD_REPO``).

Two versions of one package cannot share a process, so ``--ab`` starts process pairs (old, new, then
new, old, ...), each timing every case in interleaved rounds, and prints each side's best
per-process median and the ratio new/old (< 1: the new code is faster), with the CPU model.

``--cpu-time`` times with the process's CPU time on one thread (BLAS, Numba loops and optimizer
updates limited to one thread; see :func:`one_thread`): far less sensitive to other processes on a
shared machine than wall time, but blind to what threads would gain.

A benchmark file defines ``cases() -> {name: zero-argument callable}`` and ends with
``main(__file__, cases, __doc__)``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def one_thread() -> None:
    """Limit ember's own threads (old and new knobs, whichever exist) to one."""
    try:
        import ember.optim

        if hasattr(ember.optim.Optimizer, "update_threads"):
            ember.optim.Optimizer.update_threads = 1
        from ember.graph.passes import fuse_numba

        if hasattr(fuse_numba, "THREADS"):  # checkouts before the fused loops used cpu_threads
            fuse_numba.THREADS = 1
        from ember import _config

        _config.CPU_THREADS = 1
    except ImportError:
        pass


def measure(cases: dict, rounds: int, min_time: float, clock: Callable[[], float] = time.perf_counter) -> dict:
    """Median seconds per call of every case, in interleaved rounds (after a warm-up that compiles)."""
    calls = {}
    for name, fn in cases.items():
        for _ in range(5):  # compiled paths trace and compile on their first calls
            fn()
        start = clock()
        fn()
        calls[name] = max(1, int(min_time / max(clock() - start, 1e-7)))
    samples: dict = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = clock()
            for _ in range(calls[name]):
                fn()
            samples[name].append((clock() - start) / calls[name])
    return {name: statistics.median(v) for name, v in samples.items()}


def _child(script: str, repo: str, rounds: int, min_time: float, cpu_time: bool, only: str) -> dict:
    env = dict(os.environ, PYTHONPATH=repo)
    flags = ["--only", only] if only else []
    if cpu_time:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        flags.append("--cpu-time")
    out = subprocess.run([sys.executable, script, "--json", "--rounds", str(rounds), "--min-time", str(min_time),
                          *flags], env=env, capture_output=True, text=True, check=True, cwd=repo)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(script: str, make_cases: Callable[[], dict], doc: str | None) -> None:
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    parser.add_argument("--ab", metavar="OLD_REPO", help="compare OLD_REPO's ember (old) with this checkout (new)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds inside each process")
    parser.add_argument("--processes", type=int, default=3, help="--ab: process pairs (old, new) to alternate")
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per case per round")
    parser.add_argument("--json", action="store_true", help="print one JSON line of medians (used by --ab)")
    parser.add_argument("--cpu-time", action="store_true", help="one thread, timed by process CPU time")
    parser.add_argument("--only", default="", help="run only cases whose name contains this text")
    args = parser.parse_args()
    script = os.path.abspath(script)
    clock = time.process_time if args.cpu_time else time.perf_counter
    if args.cpu_time:
        one_thread()

    def selected() -> dict:
        return {k: v for k, v in make_cases().items() if args.only in k}

    if args.json:
        print(json.dumps(measure(selected(), args.rounds, args.min_time, clock)))
        return
    import numpy as np

    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    if not args.ab:
        for name, t in measure(selected(), args.rounds, args.min_time, clock).items():
            print(f"  {name:<30} {t * 1e3:9.3f} ms")
        return
    new_repo = os.path.dirname(os.path.dirname(script))
    runs: dict = {"old": [], "new": []}
    for k in range(args.processes):
        for side in (("old", "new") if k % 2 == 0 else ("new", "old")):
            runs[side].append(_child(script, args.ab if side == "old" else new_repo, args.rounds, args.min_time,
                                     args.cpu_time, args.only))
    print(f"old: {args.ab}\nnew: {new_repo}\n{args.processes} process pairs (alternating order), "
          f"best of the per-process medians; {'CPU time, one thread' if args.cpu_time else 'wall time'}")
    print(f"  {'case':<30} {'old':>10} {'new':>10}  new/old")
    for name in runs["new"][0]:
        old = min(r[name] for r in runs["old"])
        new = min(r[name] for r in runs["new"])
        print(f"  {name:<30} {old * 1e3:8.3f}ms {new * 1e3:8.3f}ms  {new / old:6.3f}")
