"""Profiler overhead: a + b (the smallest op) and a small training step, profiler off vs on, and
off vs the code before the profiler's hooks existed (another checkout, timed in a subprocess).

    .venv/bin/python benchmarks/bench_profiler.py                      # off vs on (this checkout)
    .venv/bin/python benchmarks/bench_profiler.py --before /tmp/before # also vs a tree without hooks

Rounds alternate (A, B, A, B, ...) so a noisy shared machine slows every contender alike; the
figures are medians of per-round means.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def workloads() -> dict:
    import ember

    a, b = ember.randn(4), ember.randn(4)
    ga, gb = ember.randn(4, requires_grad=True), ember.randn(4, requires_grad=True)
    model = ember.nn.Sequential(ember.nn.Linear(64, 128), ember.nn.ReLU(), ember.nn.Linear(128, 10))
    x, y = ember.randn(32, 64), ember.randint(0, 10, (32,))
    opt = ember.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        ember.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    from ember.train.mnist import build_cnn

    cnn = build_cnn()
    cnn_opt = ember.optim.Adam(cnn.parameters())
    images, labels = ember.randn(64, 1, 28, 28), ember.randint(0, 10, (64,))

    def cnn_step() -> None:  # the demo's training step (batch 64)
        cnn_opt.zero_grad()
        ember.nn.functional.cross_entropy(cnn(images), labels).backward()
        cnn_opt.step()

    return {"a + b": (lambda: a + b, 2000), "a + b (requires_grad)": (lambda: ga + gb, 2000),
            "MLP train step (32x64)": (step, 20), "demo CNN train step (64)": (cnn_step, 2)}


def round_mean(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def worker(rounds: int) -> None:
    """One process: time each workload for ``rounds`` rounds, read a line on stdin before each."""
    loads = workloads()
    for fn, calls in loads.values():
        for _ in range(3):
            round_mean(fn, calls)
    for _ in range(rounds):
        sys.stdin.readline()
        print(json.dumps({name: round_mean(fn, calls) for name, (fn, calls) in loads.items()}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", help="a checkout without the profiler hooks, timed in a subprocess")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    if args.worker:
        return worker(args.rounds)
    from _timing import environment_line

    from ember import hardware
    from ember.profiler import _recorder

    print(f"CPU: {hardware.cpu_model()}; {environment_line()}")
    loads = workloads()
    for fn, calls in loads.values():
        for _ in range(3):
            round_mean(fn, calls)
    before = None
    if args.before:
        env = dict(os.environ, PYTHONPATH=os.path.abspath(args.before))
        before = subprocess.Popen([sys.executable, __file__, "--worker", "--rounds", str(args.rounds)], env=env,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=args.before)
    samples: dict = {name: {"before": [], "off": [], "on": []} for name in loads}
    for _ in range(args.rounds):
        if before is not None:
            before.stdin.write("\n")
            before.stdin.flush()
            for name, value in json.loads(before.stdout.readline()).items():
                samples[name]["before"].append(value)
        for name, (fn, calls) in loads.items():
            samples[name]["off"].append(round_mean(fn, calls))
            recorder = _recorder.Recorder()
            _recorder.attach(recorder)
            try:
                samples[name]["on"].append(round_mean(fn, calls))
            finally:
                _recorder.detach(recorder)
    if before is not None:
        before.wait()
    # Medians, and minima (the least disturbed round: on a machine shared with other jobs the minimum is the
    # better estimate of what the code costs; the median shows what a busy machine gives).
    for label, stat in (("median of rounds", statistics.median), ("best round", min)):
        print(f"\n{label}")
        print(f"{'workload':<26}{'before hooks':>14}{'profiler off':>14}{'profiler on':>14}{'off/before':>12}"
              f"{'on/off':>9}")
        for name, by in samples.items():
            v = {k: stat(x) if x else float("nan") for k, x in by.items()}
            print(f"{name:<26}{v['before'] * 1e6:>12.2f}us{v['off'] * 1e6:>12.2f}us{v['on'] * 1e6:>12.2f}us"
                  f"{v['off'] / v['before']:>11.3f}x{v['on'] / v['off']:>8.3f}x")


if __name__ == "__main__":
    main()
