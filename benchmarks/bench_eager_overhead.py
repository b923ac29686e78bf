"""Eager Python overhead per training step, ember against PyTorch eager in one process.

Both libraries run the same code (``lib`` is ``ember`` or ``torch``), one thread each, timed in
alternating rounds with the process's CPU time (``time.process_time``): on a machine shared with other
jobs wall time mostly measures the scheduler. Each row prints the median per call of both and the ratio
ember / torch. Cases on tiny shapes measure only framework overhead (dispatch, autograd nodes, the
backward walk, optimizer bookkeeping); ``w1`` is the lectures' two-layer net at full size.

Usage:
    python benchmarks/bench_eager_overhead.py                 # every case, 7 rounds
    python benchmarks/bench_eager_overhead.py --only w1_tiny,lstm --rounds 15
    python benchmarks/bench_eager_overhead.py --profile lstm  # cProfile of ember's case, top 30 by tottime
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _ab import cpu_model, one_thread  # noqa: E402


def w1_case(lib: Any, n: int, d_in: int, hidden: int, d_out: int) -> Callable[[], None]:
    """The lectures' two-layer net: autograd, manual SGD under no_grad, grads zeroed in place."""
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal((n, d_in)).astype(np.float32))
    y = lib.from_numpy(rng.standard_normal((n, d_out)).astype(np.float32))
    w1 = lib.from_numpy(rng.standard_normal((d_in, hidden)).astype(np.float32)).requires_grad_()
    w2 = lib.from_numpy(rng.standard_normal((hidden, d_out)).astype(np.float32)).requires_grad_()

    def step() -> None:
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        with lib.no_grad():
            w1.sub_(1e-6 * w1.grad)
            w2.sub_(1e-6 * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()
    return step


def two_op_case(lib: Any) -> Callable[[], None]:
    x = lib.ones(3, requires_grad=True)
    y = lib.ones(3)

    def step() -> None:
        (x * y).sum().backward()
    return step


def forward_only_case(lib: Any) -> Callable[[], None]:
    """Ten recorded ops, no backward: the forward dispatch + node creation cost."""
    w = lib.ones(4, 4, requires_grad=True)
    x = lib.ones(4, 4)

    def step() -> None:
        h = x @ w
        h = h.relu() * 2.0 + x
        h = h.sigmoid().tanh() - w
        h.sum().exp()
    return step


def mlp_case(lib: Any) -> Callable[[], None]:
    """nn.Sequential + cross entropy + SGD momentum on tiny shapes."""
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 4))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = lib.randn(5, 8)
    t = lib.tensor([0, 1, 2, 3, 0])

    def step() -> None:
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), t)
        loss.backward()
        opt.step()
    return step


def lstm_case(lib: Any, inputs: int, hidden: int, steps: int, batch: int, bidirectional: bool) -> Callable[[], None]:
    """An LSTM classifier (last output -> Linear), cross entropy, Adam: graykode's Bi-LSTM at its sizes."""
    lib.manual_seed(0)
    lstm = lib.nn.LSTM(inputs, hidden, bidirectional=bidirectional)
    head = lib.nn.Linear(hidden * (2 if bidirectional else 1), inputs)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = lib.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal((steps, batch, inputs)).astype(np.float32))
    t = lib.from_numpy(rng.integers(0, inputs, batch))
    d = 2 if bidirectional else 1

    def step() -> None:
        opt.zero_grad()
        h0 = lib.zeros(d, batch, hidden)
        c0 = lib.zeros(d, batch, hidden)
        out, _ = lstm(x, (h0, c0))
        loss = lib.nn.functional.cross_entropy(head(out[-1]), t)
        loss.backward()
        opt.step()
    return step


CASES: dict[str, Callable[[Any], Callable[[], None]]] = {
    "two_op": two_op_case,
    "forward10": forward_only_case,
    "w1_tiny": lambda lib: w1_case(lib, 4, 3, 5, 2),
    "w1": lambda lib: w1_case(lib, 64, 1000, 100, 10),
    "mlp_tiny": mlp_case,
    "lstm": lambda lib: lstm_case(lib, 10, 8, 5, 3, False),
    "bilstm": lambda lib: lstm_case(lib, 24, 5, 27, 26, True),
}


def per_call(fn: Callable[[], None], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.2, help="CPU seconds per case per round")
    parser.add_argument("--profile", default="", help="cProfile ember's run of this case")
    args = parser.parse_args()
    import ember
    import torch

    torch.set_num_threads(1)
    one_thread()
    if args.profile:
        import cProfile
        import pstats

        fn = CASES[args.profile](ember)
        for _ in range(20):
            fn()
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(200):
            fn()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
        return
    names = [n for n in (args.only.split(",") if args.only else CASES)]
    fns = {(name, lib.__name__): CASES[name](lib) for name in names for lib in (ember, torch)}
    calls = {}
    for key, fn in fns.items():
        for _ in range(5):
            fn()
        calls[key] = max(1, int(args.min_time / max(per_call(fn, 1), 1e-7)))
    samples: dict = {key: [] for key in fns}
    for r in range(args.rounds):
        order = list(fns) if r % 2 == 0 else list(reversed(fns))
        for key in order:
            samples[key].append(per_call(fns[key], calls[key]))
    load = os.getloadavg()
    print(f"{cpu_model()}, {os.cpu_count()} cores, load average {load[0]:.1f}; torch {torch.__version__}, "
          f"one thread, {args.rounds} alternating rounds, median CPU time per step")
    print(f"  {'case':<12}{'ember':>14}{'torch':>14}{'ember/torch':>13}")
    for name in names:
        e = statistics.median(samples[(name, "ember")])
        t = statistics.median(samples[(name, "torch")])
        print(f"  {name:<12}{e * 1e6:11.1f} us{t * 1e6:11.1f} us{e / t:12.2f}x")


if __name__ == "__main__":
    main()
