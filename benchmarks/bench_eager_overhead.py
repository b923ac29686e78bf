"""Eager Python overhead per training step, ember against PyTorch eager in one process.

Both libraries run the same code (``lib`` is ``ember`` or ``torch``), one thread each, timed in
alternating rounds with the process's CPU time (``time.process_time``): on a machine shared with other
jobs wall time mostly measures the scheduler. Each row prints the median per call of both and the ratio
ember / torch. Cases on tiny shapes measure only framework overhead (dispatch, autograd nodes, the
backward walk, optimizer bookkeeping); ``w1`` is the lectures' two-layer net at full size.

The cases, from one op to whole steps: ``add`` (one small op, no autograd: dispatch and Tensor
construction), ``mul_grad`` (one recorded op: dispatch plus the autograd node), ``two_op`` (``mul_grad``,
a sum and the backward of those two nodes: mostly the engine's fixed cost per pass) ... ``mlp_tiny`` (tiny
training steps), ``lstm``/``bilstm`` (``nn.LSTM``), ``lstm_cell`` (a user-written ``nn.LSTMCell`` loop, the
tutorials' form, one node per op), ``adam_many``/``sgd_many`` (an optimizer step alone over 64 small
parameters, torch's default foreach path against ember's) and ``vit_tiny`` (a two-block ViT on 4x4
patches of 16x16 images, batch 4, AdamW: many tiny ops per step).

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


def add_case(lib: Any) -> Callable[[], None]:
    """One small op without autograd: dispatch and the result's Tensor only."""
    x = lib.ones(4, 4)
    y = lib.ones(4, 4)

    def step() -> None:
        x + y
    return step


def mul_grad_case(lib: Any) -> Callable[[], None]:
    """One small op recorded for autograd: dispatch plus the node (its inputs, saved tensors, edges)."""
    w = lib.ones(4, 4, requires_grad=True)
    y = lib.ones(4, 4)

    def step() -> None:
        w * y
    return step


def lstm_cell_case(lib: Any, inputs: int = 10, hidden: int = 16, steps: int = 8, batch: int = 4) -> Callable[[], None]:
    """A hand-written time loop over ``nn.LSTMCell`` (the tutorials' form): ~20 recorded ops per time step."""
    lib.manual_seed(0)
    cell = lib.nn.LSTMCell(inputs, hidden)
    head = lib.nn.Linear(hidden, 3)
    opt = lib.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)
    rng = np.random.default_rng(0)
    xs = [lib.from_numpy(rng.standard_normal((batch, inputs)).astype(np.float32)) for _ in range(steps)]
    t = lib.from_numpy(rng.integers(0, 3, batch))

    def step() -> None:
        opt.zero_grad()
        h = lib.zeros(batch, hidden)
        c = lib.zeros(batch, hidden)
        for x in xs:
            h, c = cell(x, (h, c))
        lib.nn.functional.cross_entropy(head(h), t).backward()
        opt.step()
    return step


def optimizer_case(lib: Any, kind: str, count: int = 64, size: int = 32) -> Callable[[], None]:
    """``opt.step()`` alone over ``count`` parameters of ``size`` elements with fixed gradients
    (torch's default, the foreach path, against ember's)."""
    lib.manual_seed(0)
    params = [lib.randn(size, requires_grad=True) for _ in range(count)]
    for p in params:
        p.grad = lib.randn(size) * 1e-3
    opt = lib.optim.Adam(params, lr=1e-3) if kind == "adam" else lib.optim.SGD(params, lr=1e-3, momentum=0.9)

    def step() -> None:
        opt.step()
    return step


def vit_case(lib: Any, dim: int = 32, depth: int = 2, heads: int = 2, batch: int = 4) -> Callable[[], None]:
    """A tiny Vision Transformer: 4x4 patches of 3x16x16 images (16 tokens + a class token), pre-norm encoder
    blocks (``nn.TransformerEncoderLayer``), a linear head, AdamW; ~150 small ops a step."""
    lib.manual_seed(0)
    nn = lib.nn

    class ViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.patch = nn.Conv2d(3, dim, 4, stride=4)
            self.cls = nn.Parameter(lib.zeros(1, 1, dim))
            self.pos = nn.Parameter(lib.randn(1, 17, dim) * 0.02)
            self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, batch_first=True,
                                                                    norm_first=True) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, 10)

        def forward(self, x: Any) -> Any:
            x = self.patch(x).flatten(2).transpose(1, 2)
            x = lib.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x[:, 0]))

    model = ViT()
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = lib.from_numpy(rng.standard_normal((batch, 3, 16, 16)).astype(np.float32))
    t = lib.from_numpy(rng.integers(0, 10, batch))

    def step() -> None:
        opt.zero_grad()
        lib.nn.functional.cross_entropy(model(x), t).backward()
        opt.step()
    return step


CASES: dict[str, Callable[[Any], Callable[[], None]]] = {
    "add": add_case,
    "mul_grad": mul_grad_case,
    "two_op": two_op_case,
    "forward10": forward_only_case,
    "w1_tiny": lambda lib: w1_case(lib, 4, 3, 5, 2),
    "w1": lambda lib: w1_case(lib, 64, 1000, 100, 10),
    "mlp_tiny": mlp_case,
    "lstm": lambda lib: lstm_case(lib, 10, 8, 5, 3, False),
    "bilstm": lambda lib: lstm_case(lib, 24, 5, 27, 26, True),
    "lstm_cell": lstm_cell_case,
    "adam_many": lambda lib: optimizer_case(lib, "adam"),
    "sgd_many": lambda lib: optimizer_case(lib, "sgd"),
    "vit_tiny": vit_case,
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
