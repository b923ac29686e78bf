"""Cost of torch's one-rounding arithmetic (ember/ops/fma.py): fused ops and optimizer steps.

Prints CPU time (``time.process_time``, robust to other processes on a shared machine) per call:
``add(alpha=)``/``addcmul``/``lerp`` with one rounding next to the two-rounding composite they replaced, and
optimizer steps (SGD with momentum, Adam) over one 1M-element parameter and 20 small ones. To compare with an
older ember, run the script under each checkout's PYTHONPATH, alternating.

Usage: python benchmarks/bench_fma.py [--repeat 20]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import ember


def _cpu(fn, repeat: int) -> float:
    fn()  # warm (compiles, caches)
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    a, b, c = (ember.tensor(rng.standard_normal(1 << 20).astype(np.float32)) for _ in range(3))
    rows = [
        ("add(alpha) 1M f32, one rounding", lambda: ember.add(a, b, alpha=0.1)),
        ("a + b * 0.1 1M f32, two roundings", lambda: a + b * 0.1),
        ("addcmul 1M f32, one rounding", lambda: ember.addcmul(a, b, c, value=0.1)),
        ("a + b * 0.1 * c, two roundings", lambda: a + b * 0.1 * c),
        ("lerp 1M f32, one rounding", lambda: ember.lerp(a, b, 0.1)),
    ]
    for name, kwargs in (("SGD", dict(lr=0.01, momentum=0.9)), ("Adam", dict(lr=1e-3))):
        params = [ember.tensor(rng.standard_normal(1 << 20).astype(np.float32), requires_grad=True)] + \
                 [ember.tensor(rng.standard_normal((64, 64)).astype(np.float32), requires_grad=True) for _ in range(20)]
        for p in params:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32))
        opt = getattr(ember.optim, name)(params, **kwargs)
        for _ in range(3):
            opt.step()  # the compiled update from the third step
        rows.append((f"{name} step, 1M + 20x4096 params", opt.step))
    for name, fn in rows:
        print(f"{name:40s} {_cpu(fn, args.repeat):8.2f} ms CPU")


if __name__ == "__main__":
    main()
