"""torch's own profiler on the steps of benchmarks/bench_profiler.py, for comparison with ember's.

    .venv/bin/python benchmarks/bench_profiler_torch.py [rounds]

torch 2.13 CPU on one thread: the tiny MLP Adam step (4x8) and the MLP SGD step (32x64), in blocks of 20 steps,
off / ``profile()`` / ``profile(record_shapes=True, profile_memory=True, with_flops=True)`` in rotating order;
thread CPU time of the steps only (the profile is entered before the timed block and left after it). Prints the
median of each round's own ratio to the un-profiled block.
"""
from __future__ import annotations

import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

BLOCK = 20


def tiny_step():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                                torch.nn.Linear(16, 2))
    x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
    opt = torch.optim.Adam(model.parameters())

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def sgd_step():
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def block(step) -> float:
    start = time.thread_time()
    for _ in range(BLOCK):
        step()
    return (time.thread_time() - start) / BLOCK


def main() -> None:
    torch.set_num_threads(1)
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    modes = {"off": None, "profile()": {}, "+shapes/memory/flops": dict(record_shapes=True, profile_memory=True,
                                                                          with_flops=True)}
    print(f"torch {torch.__version__}, {rounds} rounds of {BLOCK}-step blocks, thread CPU time")
    for name, make in (("tiny MLP Adam step (4x8)", tiny_step), ("MLP SGD step (32x64)", sgd_step)):
        step = make()
        for _ in range(50):
            step()
        samples: dict = {m: [] for m in modes}
        names = list(modes)
        for r in range(rounds):
            k = r % len(names)
            for mode in names[k:] + names[:k]:
                if modes[mode] is None:
                    samples[mode].append(block(step))
                else:
                    with profile(activities=[ProfilerActivity.CPU], **modes[mode]):
                        samples[mode].append(block(step))
        off = samples["off"]
        ratios = ", ".join(f"{m} {statistics.median(a / b for a, b in zip(samples[m], off)):.2f}x" for m in names[1:])
        print(f"{name}: off {statistics.median(off) * 1e6:.0f} us/step; {ratios} (paired medians)")


if __name__ == "__main__":
    main()
