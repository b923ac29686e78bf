"""Compiled training steps with their big fused elementwise loops on ember's threads against the same steps
with serial loops (``NumbaKernel.threaded``), and eager, in alternating rounds in one process.

The question (issue 11, "compiled never slower than eager"): eager runs Adam's update, gelu and relu's gradient
on both cores; a compiled step whose fused loops ran on one core could be slower than eager on an idle machine
while using less CPU. Prints the median wall time, process CPU time and the calling thread's CPU time per step
of each mode, the load average and the CPU model. Wall time answers the question only on a quiet machine; CPU
time shows what the threads cost, and the calling thread's CPU time how much work left it for ember's threads.

    python benchmarks/bench_compiled_threads.py --only w2,w4 --rounds 7
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
from _ab import cpu_model  # noqa: E402
from ember.graph.passes import fuse_numba  # noqa: E402


def _w2(lib):
    return lib.nn.Sequential(lib.nn.Linear(784, 512), lib.nn.ReLU(), lib.nn.Linear(512, 10))


def _w4(lib):
    return lib.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, norm_first=True)


def _data(name: str):
    rng = np.random.default_rng(0)
    if name == "w2":
        return (ember.from_numpy(rng.standard_normal((256, 784)).astype(np.float32)),
                ember.from_numpy(rng.integers(0, 10, 256)), _w2, ember.nn.functional.cross_entropy)
    x = ember.from_numpy(rng.standard_normal((16, 128, 256)).astype(np.float32))
    return x, x, _w4, ember.nn.functional.mse_loss


def _step(name: str, threaded: bool | None):
    """A training step: eager (threaded None), or compiled with its fused loops threaded or serial."""
    x, y, build, loss_fn = _data(name)
    ember.manual_seed(0)
    model = build(ember)
    opt = ember.optim.Adam(model.parameters(), 1e-3)

    def step(a, b):
        opt.zero_grad()
        loss = loss_fn(model(a), b)
        loss.backward()
        opt.step()
        return loss

    if threaded is None:
        return lambda: step(x, y).item()
    compiled = ember.compile(step)
    real_init = fuse_numba.NumbaKernel.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        self.threaded = threaded

    fuse_numba.NumbaKernel.__init__ = init
    try:
        for _ in range(12):  # compile now (the graph and its kernels), with this setting
            compiled(x, y).item()
    finally:
        fuse_numba.NumbaKernel.__init__ = real_init
    return lambda: compiled(x, y).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="w2,w4")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=0, help="steps per round (default: ~0.5 s of work)")
    args = parser.parse_args()
    print(f"{cpu_model()}, {os.cpu_count()} CPUs, ember threads {ember.get_num_threads()}, "
          f"load average {os.getloadavg()[0]:.1f} at start")
    for name in args.only.split(","):
        modes = {"eager": _step(name, None), "compiled, threaded loops": _step(name, True),
                 "compiled, serial loops": _step(name, False)}
        for fn in modes.values():
            fn()
        start = time.perf_counter()
        modes["eager"]()
        steps = args.steps or max(3, int(0.5 / max(time.perf_counter() - start, 1e-4)))
        wall: dict = {m: [] for m in modes}
        cpu: dict = {m: [] for m in modes}
        main_thread: dict = {m: [] for m in modes}
        for _ in range(args.rounds):
            for mode, fn in modes.items():
                w0, c0, t0 = time.perf_counter(), time.process_time(), time.thread_time()
                for _ in range(steps):
                    fn()
                wall[mode].append((time.perf_counter() - w0) / steps * 1e3)
                cpu[mode].append((time.process_time() - c0) / steps * 1e3)
                main_thread[mode].append((time.thread_time() - t0) / steps * 1e3)
        print(f"\n{name}: {steps} steps a round, {args.rounds} alternating rounds, load average "
              f"{os.getloadavg()[0]:.1f} at the end")
        print(f"  {'mode':28s} {'wall ms':>9s} {'CPU ms':>9s} {'calling thread CPU ms':>22s}")
        for mode in modes:
            print(f"  {mode:28s} {statistics.median(wall[mode]):9.2f} {statistics.median(cpu[mode]):9.2f} "
                  f"{statistics.median(main_thread[mode]):22.2f}")


if __name__ == "__main__":
    main()
