"""Per-op cost of the paths that ask the backend (is_writeable, may_share_memory, item, ...), two checkouts
side by side: ``python benchmarks/bench_backend_calls.py OLD_CHECKOUT NEW_CHECKOUT [ROUNDS]``.

Each round runs one subprocess per checkout (alternating which goes first), each timing the same small
ops; the table prints the best over rounds and NEW/OLD (under 1: NEW is faster).
With no arguments it times the checkout it is run from once.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import timeit
from typing import Callable


def best_time(fn: Callable[[], object], number: int = 2000, repeat: int = 15) -> float:
    """Fastest of ``repeat`` runs of ``number`` calls, per call: on a machine shared with other jobs the
    minimum is the figure least disturbed by them (medians moved 30% between identical runs here)."""
    fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def measure() -> dict:
    import ember

    x = ember.ones(8)
    y = ember.ones(8)
    s = ember.tensor(3.0)
    w = ember.ones(64, 64)
    step_fn = ember.compile(lambda a, b: (a * b).sum())
    a, b = ember.ones(32), ember.ones(32)
    for _ in range(3):
        step_fn(a, b)

    def setitem() -> None:
        w[0, 1] = 2.0

    cases = {
        "x + y (8 floats)": lambda: x + y,
        "x.mul_(2) in place": lambda: x.mul_(1.0),
        "x.zero_()": lambda: x.zero_(),
        "w[0, 1] = 2.0": setitem,
        "s.item()": lambda: s.item(),
        "x.relu()": lambda: x.relu(),
        "compiled (a*b).sum() call": lambda: step_fn(a, b),
    }
    return {name: best_time(fn) for name, fn in cases.items()}


def main() -> None:
    if len(sys.argv) < 3:
        for name, t in measure().items():
            print(f"{name:32s} {t * 1e6:8.2f} us")
        return
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    results: dict[str, list] = {old: [], new: []}
    for r in range(rounds):
        for path in ((old, new) if r % 2 == 0 else (new, old)):
            env = dict(os.environ, PYTHONPATH=path)
            out = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True, text=True,
                                 check=True)
            results[path].append(json.loads(out.stdout))
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"{cpu}; {rounds} rounds, best of each round's best (15 x 2000 calls); ratio = new / old")
    print(f"{'case':32s} {'old':>10s} {'new':>10s} {'ratio':>7s}")
    for name in results[old][0]:
        o = min(r[name] for r in results[old])
        n = min(r[name] for r in results[new])
        print(f"{name:32s} {o * 1e6:8.2f}us {n * 1e6:8.2f}us {n / o:7.3f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        print(json.dumps(measure()))
    else:
        main()
