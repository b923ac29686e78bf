"""The fixed cost of one small op, ember against PyTorch eager in one process (CPU time per call, medians of
alternating rounds): the ops hand-written tiny-op programs call in loops (a BiLSTM-CRF's Viterbi and forward
algorithm, a DQN's target computation, a ViT's attention reshapes), on a 5x5 float32 tensor that requires grad
(each call records a node). Prints the CPU model, the load and ember / torch per op, worst first.

    python benchmarks/bench_op_overhead.py              # with autograd recording
    python benchmarks/bench_op_overhead.py --no-grad    # plain calls
    python benchmarks/bench_op_overhead.py --ab /work/main   # another checkout's ember (old) against this one (new)
    python benchmarks/bench_op_overhead.py --only gather,softmax,cross_entropy

``--ab OLD_REPO`` starts process pairs (old, new, then new, old, ...; ``PYTHONPATH`` set to each tree), each
timing every op for ember and torch in alternating rounds, and prints per op the best per-process median of old
and new ember, both ratios to torch (measured in the same processes) and new/old.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
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
    h = lib.tensor(rng.random((2, 4, 6), dtype=np.float32), requires_grad=grad)
    index = lib.zeros(5, 1, dtype=lib.long)
    rows = lib.tensor([0, 2, 4], dtype=lib.long)
    target = lib.tensor([0, 1, 2, 3, 4], dtype=lib.long)
    F = lib.nn.functional
    return {
        "add": lambda: x + y, "mul_scalar": lambda: x * 2.0, "sum": lambda: x.sum(), "sum_dim": lambda: x.sum(1),
        "mean": lambda: x.mean(), "exp": lambda: x.exp(), "log": lambda: x.log(), "relu": lambda: x.relu(),
        "sigmoid": lambda: x.sigmoid(), "tanh": lambda: x.tanh(), "matmul": lambda: x @ y, "index0": lambda: x[0],
        "slice": lambda: x[:, 1:3], "cat": lambda: lib.cat([x, y]), "stack": lambda: lib.stack([v, v]),
        "view": lambda: x.view(25), "unsqueeze": lambda: x.unsqueeze(0), "t": lambda: x.t(),
        "max_dim": lambda: x.max(1), "logsumexp": lambda: lib.logsumexp(x, 1), "softmax": lambda: lib.softmax(x, 1),
        "argmax": lambda: x.argmax(1), "item": lambda: x[0, 0].item(), "expand_add": lambda: v.unsqueeze(1) + x,
        "gather": lambda: x.gather(1, index),
        "log_softmax": lambda: F.log_softmax(x, 1), "cross_entropy": lambda: F.cross_entropy(x, target),
        "index_select": lambda: x.index_select(0, rows), "embedding": lambda: F.embedding(rows, x),
        "reshape3": lambda: h.reshape(2, 4, 2, 3), "transpose": lambda: h.transpose(1, 2),
        "permute": lambda: h.permute(0, 2, 1), "flatten": lambda: h.flatten(1), "chunk": lambda: h.chunk(2, -1),
        "index_tuple": lambda: h[:, 0], "ellipsis": lambda: h[..., :3], "contiguous_t": lambda: x.t().contiguous(),
    }


def per_call(fn: Callable[[], Any], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls * 1e6


def measure(grad: bool, rounds: int, calls: int, only: str = "") -> dict[str, tuple[float, float]]:
    """{op: (ember us, torch us)}: medians of ``rounds`` alternating rounds, CPU time per call."""
    torch.set_num_threads(1)
    mine, theirs = cases(ember, grad), cases(torch, grad)
    if only:
        mine = {name: mine[name] for name in only.split(",")}
    times: dict = {name: ([], []) for name in mine}
    for _ in range(rounds):
        for name in mine:
            times[name][0].append(per_call(mine[name], calls))
            times[name][1].append(per_call(theirs[name], calls))
    return {name: (statistics.median(e), statistics.median(t)) for name, (e, t) in times.items()}


def _child(repo: str, args: argparse.Namespace) -> dict:
    env = dict(os.environ, PYTHONPATH=repo, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    flags = (["--no-grad"] if args.no_grad else []) + (["--only", args.only] if args.only else [])
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--json", "--rounds", str(args.rounds),
                          "--calls", str(args.calls), *flags], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-grad", action="store_true")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--ab", metavar="OLD_REPO", help="compare OLD_REPO's ember (old) with this checkout's (new)")
    parser.add_argument("--processes", type=int, default=3, help="--ab: process pairs (old, new) to alternate")
    parser.add_argument("--json", action="store_true", help="print one JSON line of medians (used by --ab)")
    parser.add_argument("--only", default="", help="comma-separated op names (default: all)")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(measure(not args.no_grad, args.rounds, args.calls, args.only)))
        return
    header = (f"{cpu_model()}, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}, one thread; "
              f"{'no grad' if args.no_grad else 'input requires grad'}; CPU time per call, medians of {args.rounds} "
              "rounds")
    if not args.ab:
        rows = [(name, e, t) for name, (e, t) in measure(not args.no_grad, args.rounds, args.calls, args.only).items()]
        print(header)
        print(f"  {'op':12s} {'ember':>9s} {'torch':>9s} {'ratio':>7s}")
        for name, e, t in sorted(rows, key=lambda r: -r[1] / r[2]):
            print(f"  {name:12s} {e:7.2f}us {t:7.2f}us {e / t:6.2f}x")
        return
    new_repo = str(Path(__file__).resolve().parent.parent)
    runs: dict = {"old": [], "new": []}
    for k in range(args.processes):
        for side in (("old", "new") if k % 2 == 0 else ("new", "old")):
            runs[side].append(_child(args.ab if side == "old" else new_repo, args))
    print(header + f"; {args.processes} process pairs, best of the per-process medians\n"
          f"old: {args.ab}\nnew: {new_repo}")
    print(f"  {'op':12s} {'old':>9s} {'new':>9s} {'torch':>9s} {'old/torch':>9s} {'new/torch':>9s} {'new/old':>8s}")
    table = []
    for name in runs["new"][0]:
        old = min(r[name][0] for r in runs["old"])
        new = min(r[name][0] for r in runs["new"])
        ref = min(r[name][1] for r in runs["old"] + runs["new"])
        table.append((name, old, new, ref))
    for name, old, new, ref in sorted(table, key=lambda r: -r[1] / r[3]):
        print(f"  {name:12s} {old:7.2f}us {new:7.2f}us {ref:7.2f}us {old / ref:8.2f}x {new / ref:8.2f}x "
              f"{new / old:7.3f}")


if __name__ == "__main__":
    main()
