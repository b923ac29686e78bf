"""The CNN training steps (ResNet-18 on 128 x 3x32x32, the MNIST CNN on 64 x 1x28x28) with ember's
BLAS split on and off (``EMBER_BLAS_SPLIT``, ember/backends/cpu_blas.py), and PyTorch eager, in
alternating rounds in one process, on all cores.

    python benchmarks/bench_cnn_threads.py                  # both models
    python benchmarks/bench_cnn_threads.py --only resnet18 --rounds 9

Per contender it prints the median wall time of a step and two CPU clocks: the calling thread's
CPU time (``time.thread_time``; with the work split evenly and nothing spinning, about what the
step would take on an idle machine) and the whole process's (all threads; more than twice the
calling thread's means threads spin or wait busily). On a shared machine only the CPU columns
compare like with like; wall times are what a user sees, and need a quiet machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
import workload_models as models  # noqa: E402
from _ab import cpu_model  # noqa: E402
from _timing import environment_line  # noqa: E402
from ember import _config  # noqa: E402
from ember.backends import cpu_threads  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

SETUPS = {
    "resnet18": (models.resnet18, (128, 3, 32, 32),
                 lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)),
    "mnist": (models.mnist_cnn, (64, 1, 28, 28), lambda lib, m: lib.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)),
}


def make_step(lib, build, shape, make_opt):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(shape, dtype=np.float32), rng.integers(0, 10, shape[0])
    model = build(lib)
    opt = make_opt(lib, model)
    convert = torch.from_numpy if lib is torch else ember.from_numpy
    xs, ys = convert(x), convert(y)

    def step() -> None:
        loss = lib.nn.functional.cross_entropy(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        float(loss.item())

    return step


def with_split(step, on: bool):
    def run() -> None:
        saved, _config.BLAS_SPLIT = _config.BLAS_SPLIT, on
        try:
            step()
        finally:
            _config.BLAS_SPLIT = saved

    return run


def measure(fns: dict, rounds: int) -> dict:
    for fn in fns.values():
        for _ in range(2):
            fn()
    samples = {name: [] for name in fns}
    for r in range(rounds):
        for name, fn in (list(fns.items()) if r % 2 == 0 else list(fns.items())[::-1]):
            time.sleep(0.3)  # let BLAS/OpenMP workers of the previous contender stop spinning
            w, t, p = time.perf_counter(), time.thread_time(), time.process_time()
            fn()
            samples[name].append((time.perf_counter() - w, time.thread_time() - t, time.process_time() - p))
    return {name: tuple(statistics.median(s[i] for s in v) for i in range(3)) for name, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="resnet18,mnist")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--no-torch", action="store_true")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model()}; {environment_line()}; ember threads {cpu_threads.num_threads()}"
          + (f"; torch {torch.__version__} ({torch.get_num_threads()} threads)" if torch else ""))
    for name in args.only.split(","):
        build, shape, make_opt = SETUPS[name]
        ember.manual_seed(0)
        step = make_step(ember, build, shape, make_opt)
        fns = {"ember, BLAS split": with_split(step, True), "ember, BLAS threads": with_split(step, False)}
        if torch is not None and not args.no_torch:
            torch.manual_seed(0)
            fns["torch eager"] = make_step(torch, build, shape, make_opt)
        result = measure(fns, args.rounds)
        base = result["ember, BLAS threads"]
        print(f"\n{name}: median of {args.rounds} alternating rounds (ms); ratios to 'ember, BLAS threads'")
        print(f"  {'contender':<22}{'wall':>16}{'thread CPU':>18}{'process CPU':>18}")
        for contender, values in result.items():
            cells = "".join(f"{v * 1e3:9.1f} ({v / b:4.2f}x)" for v, b in zip(values, base))
            print(f"  {contender:<22}{cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
