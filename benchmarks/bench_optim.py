"""Optimizer steps and the W2 training step (MLP 784-512-10, batch 256, Adam), eager and compiled.

Two uses:

    python benchmarks/bench_optim.py                  # this checkout: median time per case
    python benchmarks/bench_optim.py --ab OLD_REPO    # OLD_REPO's ember vs this one, side by side

``--ab`` runs the cases in separate processes (two versions of one package cannot share a process),
alternating old and new for ``--rounds`` rounds, and prints each side's best median and the ratio
new/old (< 1: the new code is faster). Each process times every case in interleaved rounds itself.
Cases: ``w2 eager`` / ``w2 compiled`` (forward, backward, ``opt.step()``: the workload of
bench_workloads.py), and ``opt.step()`` alone over W2's parameters (Adam, AdamW), over a 1M-element
tensor (Adam, SGD momentum) and over 20 small tensors (Adam: per-parameter overhead).
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cases() -> dict:
    import ember
    import ember.nn as nn
    import ember.nn.functional as F

    rng = np.random.default_rng(0)
    cases = {}

    def w2(compiled: bool):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = ember.optim.Adam(model.parameters(), 1e-3)
        x = ember.tensor(rng.standard_normal((256, 784)).astype(np.float32))
        y = ember.tensor(rng.integers(0, 10, 256))

        def step(xb, yb):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

        fn = ember.compile(step) if compiled else step
        return lambda: fn(x, y).item()

    cases["w2 eager"] = w2(False)
    cases["w2 compiled"] = w2(True)

    def step_only(make, shapes):
        params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(np.float32))) for s in shapes]
        for p in params:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32))
        opt = make(params)
        return opt.step

    w2_shapes = [(512, 784), (512,), (10, 512), (10,)]
    cases["Adam.step, W2 params"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), w2_shapes)
    cases["AdamW.step, W2 params"] = step_only(lambda ps: ember.optim.AdamW(ps, 1e-3), w2_shapes)
    cases["Adam.step, 1M"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), [(1 << 20,)])
    cases["SGD momentum.step, 1M"] = step_only(lambda ps: ember.optim.SGD(ps, 0.1, momentum=0.9), [(1 << 20,)])
    cases["Adam.step, 20 x (64,)"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), [(64,)] * 20)
    return cases


def measure(rounds: int, min_time: float) -> dict:
    """Median seconds per call of every case, in interleaved rounds (after a warm-up that compiles)."""
    cases = _cases()
    calls = {}
    for name, fn in cases.items():
        for _ in range(5):  # compiled paths trace and compile on their first calls
            fn()
        start = time.perf_counter()
        fn()
        calls[name] = max(1, int(min_time / max(time.perf_counter() - start, 1e-7)))
    samples: dict = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            for _ in range(calls[name]):
                fn()
            samples[name].append((time.perf_counter() - start) / calls[name])
    return {name: statistics.median(v) for name, v in samples.items()}


def _run_child(repo: str, rounds: int, min_time: float) -> dict:
    env = dict(os.environ, PYTHONPATH=repo)
    out = subprocess.run([sys.executable, os.path.join(HERE, "bench_optim.py"), "--json", "--rounds", str(rounds),
                          "--min-time", str(min_time)], env=env, capture_output=True, text=True, check=True, cwd=repo)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ab", metavar="OLD_REPO", help="compare OLD_REPO's ember (old) with this checkout (new)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds inside each process")
    parser.add_argument("--processes", type=int, default=3, help="--ab: process pairs (old, new) to alternate")
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per case per round")
    parser.add_argument("--json", action="store_true", help="print one JSON line of medians (used by --ab)")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(args.rounds, args.min_time)))
        return
    print(f"CPU: {_cpu_model()}, {os.cpu_count()} cores; numpy {np.__version__}; "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    if not args.ab:
        for name, t in measure(args.rounds, args.min_time).items():
            print(f"  {name:<26} {t * 1e3:9.3f} ms")
        return
    new_repo = os.path.dirname(HERE)
    runs: dict = {"old": [], "new": []}
    for k in range(args.processes):
        for side in (("old", "new") if k % 2 == 0 else ("new", "old")):
            runs[side].append(_run_child(args.ab if side == "old" else new_repo, args.rounds, args.min_time))
    print(f"old: {args.ab}\nnew: {new_repo}\n{args.processes} process pairs (alternating order), "
          "best of the per-process medians")
    print(f"  {'case':<26} {'old':>10} {'new':>10}  new/old")
    for name in runs["new"][0]:
        old = min(r[name] for r in runs["old"])
        new = min(r[name] for r in runs["new"])
        print(f"  {name:<26} {old * 1e3:8.3f}ms {new * 1e3:8.3f}ms  {new / old:6.3f}")


if __name__ == "__main__":
    main()
