"""The fixed cost of one small op, ember against PyTorch eager in one process (CPU time per call, medians of
alternating rounds): the ops hand-written tiny-op programs call in loops (a BiLSTM-CRF's Viterbi and forward
algorithm, a DQN's target computation), on a 5x5 float32 tensor that requires grad (each call records a node).
Prints the CPU model, the load and ember / torch per op, worst first; points at where the per-op overhead is.

    python benchmarks/bench_op_overhead.py              # with autograd recording
    python benchmarks/bench_op_overhead.py --no-grad    # plain calls
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
from _ab import cpu_model  # noqa: E402


def cases(lib: Any, grad: bool) -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.random((5, 5), dtype=np.float32), requires_grad=grad)
    y = lib.tensor(rng.random((5, 5), dtype=np.float32))
    v = lib.tensor(rng.random(5, dtype=np.float32))
    index = lib.zeros(5, 1, dtype=lib.long)
    return {
        "add": lambda: x + y, "mul_scalar": lambda: x * 2.0, "sum": lambda: x.sum(), "sum_dim": lambda: x.sum(1),
        "mean": lambda: x.mean(), "exp": lambda: x.exp(), "log": lambda: x.log(), "relu": lambda: x.relu(),
        "sigmoid": lambda: x.sigmoid(), "tanh": lambda: x.tanh(), "matmul": lambda: x @ y, "index0": lambda: x[0],
        "slice": lambda: x[:, 1:3], "cat": lambda: lib.cat([x, y]), "stack": lambda: lib.stack([v, v]),
        "view": lambda: x.view(25), "unsqueeze": lambda: x.unsqueeze(0), "t": lambda: x.t(),
        "max_dim": lambda: x.max(1), "logsumexp": lambda: lib.logsumexp(x, 1), "softmax": lambda: lib.softmax(x, 1),
        "argmax": lambda: x.argmax(1), "item": lambda: x[0, 0].item(), "expand_add": lambda: v.unsqueeze(1) + x,
        "gather": lambda: x.gather(1, index),
    }


def per_call(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    mine, theirs = cases(ember, not args.no_grad), cases(torch, not args.no_grad)
    times: dict = {name: ([], []) for name in mine}
    for _ in range(args.rounds):
        for name in mine:
            times[name][0].append(per_call(mine[name], args.calls))
            times[name][1].append(per_call(theirs[name], args.calls))
    print(f"{cpu_model()}, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}, one thread; "
          f"{'no grad' if args.no_grad else 'input requires grad'}; CPU time per call, medians of {args.rounds} rounds")
    rows = [(name, statistics.median(e), statistics.median(t)) for name, (e, t) in times.items()]
    print(f"  {'op':12s} {'ember':>9s} {'torch':>9s} {'ratio':>7s}")
    for name, e, t in sorted(rows, key=lambda r: -r[1] / r[2]):
        print(f"  {name:12s} {e:7.2f}us {t:7.2f}us {e / t:6.2f}x")


if __name__ == "__main__":
    main()
