"""Eager dispatch overhead of two checkouts side by side: tiny ops and a small MLP training step.

Each round starts one process per checkout (``PYTHONPATH=<tree>``), alternating A, B, A, B, ... so a
noisy, shared machine slows both alike; each process prints its medians of CPU time per call
(``time.process_time``: on a machine shared with other jobs, wall time mostly measures the scheduler),
and the table shows the median over rounds and the ratio B/A. Written for issue 15's "no slowdown of eager dispatch" check.

Usage:
    python benchmarks/bench_dispatch_trees.py /work/main /work/wt/interp-stack [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

_CHILD = r"""
import json, time, statistics
import numpy as np
import ember

def per_call(fn, calls, repeats=5):
    for _ in range(50):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            fn()
        samples.append((time.process_time() - start) / calls)
    return statistics.median(samples)

x = ember.ones(4)
y = ember.ones(4)
w = ember.ones(4, requires_grad=True)
model = ember.nn.Sequential(ember.nn.Linear(32, 64), ember.nn.ReLU(), ember.nn.Linear(64, 10))
opt = ember.optim.SGD(model.parameters(), lr=0.01)
inputs = ember.randn(16, 32)
target = ember.randint(0, 10, (16,))

def mlp_step():
    opt.zero_grad()
    loss = ember.nn.functional.cross_entropy(model(inputs), target)
    loss.backward()
    opt.step()

print(json.dumps({
    "x.exp() (unary)": per_call(lambda: x.exp(), 20000),
    "x + y (binary)": per_call(lambda: x + y, 20000),
    "x * 2.0 (tensor, scalar)": per_call(lambda: x * 2.0, 20000),
    "x.sum() (apply)": per_call(lambda: x.sum(), 20000),
    "w * y (records autograd)": per_call(lambda: w * y, 20000),
    "MLP 32-64-10 SGD step": per_call(mlp_step, 300),
}))
"""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _run(tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a")
    parser.add_argument("tree_b")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list] = {args.tree_a: [], args.tree_b: []}
    for _ in range(args.rounds):
        for tree in (args.tree_a, args.tree_b):
            results[tree].append(_run(tree))
    print(f"{_cpu_model()}, {os.cpu_count()} cores, {args.rounds} alternating rounds, median CPU time per call")
    print(f"  {'':<28}{'A: ' + os.path.basename(args.tree_a.rstrip('/')):>16}"
          f"{'B: ' + os.path.basename(args.tree_b.rstrip('/')):>20}{'B/A':>8}")
    for name in results[args.tree_a][0]:
        a = statistics.median(r[name] for r in results[args.tree_a])
        b = statistics.median(r[name] for r in results[args.tree_b])
        print(f"  {name:<28}{a * 1e6:13.2f} us{b * 1e6:17.2f} us{b / a:8.3f}")


if __name__ == "__main__":
    main()
