"""Backward cost of two checkouts side by side: a 50 x (sin, mul) chain on 16 elements, backward only.

Each round starts one process per checkout (``PYTHONPATH=<tree>``), alternating the order, with the cyclic GC
off; each process builds 300 graphs, then times their ``backward()`` (and the engine's ``_propagate`` alone) in
CPU time. The table shows the median over rounds and the ratio B/A. Written for the saved-tensor hooks work
(docs/pytorch-compat.md): hooks must cost nothing when unused. Two copies of one checkout differ by ~1.5% here.

Usage:
    python benchmarks/bench_backward_trees.py /work/main /work/wt/autohooks [--rounds 6]
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys

_CHILD = r"""
import gc, time
import ember
from ember.autograd import engine
gc.disable()
inner = [0.0]
original = engine._propagate
def timed(*args, **kwargs):
    start = time.process_time()
    result = original(*args, **kwargs)
    inner[0] += time.process_time() - start
    return result
engine._propagate = timed
x = ember.ones(16, requires_grad=True)
def forward():
    y = x
    for _ in range(50):
        y = y.sin() * 1.01
    return y.sum()
for _ in range(20):
    forward().backward()
graphs = [forward() for _ in range(300)]
inner[0] = 0.0
start = time.process_time()
for y in graphs:
    y.backward()
print((time.process_time() - start) / 300 * 1e6, inner[0] / 300 * 1e6)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a")
    parser.add_argument("tree_b")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    trees = [os.path.abspath(args.tree_a), os.path.abspath(args.tree_b)]
    results: dict[int, list] = {0: [], 1: []}
    for r in range(args.rounds):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            env = dict(os.environ, PYTHONPATH=trees[k])
            out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True)
            results[k].append(tuple(map(float, out.stdout.split())))
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {args.rounds} alternating rounds, "
          "median CPU time per backward()")
    print(f"  A: {trees[0]}\n  B: {trees[1]}")
    for i, name in enumerate(["backward()", "engine _propagate"]):
        a = statistics.median(v[i] for v in results[0])
        b = statistics.median(v[i] for v in results[1])
        print(f"  {name:20s} A {a:8.1f} us   B {b:8.1f} us   B/A {b / a:.3f}")


if __name__ == "__main__":
    main()
