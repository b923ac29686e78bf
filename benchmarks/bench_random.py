"""ember's PyTorch-exact random numbers against torch's own: the same draws, how much slower.

Prints, side by side in one run (interleaved medians), torch and ember for large ``rand``/``randn``/``randperm``
fills and a ResNet-18 initialization (every parameter drawn as torch draws it), with the ratio and the CPU.

    python benchmarks/bench_random.py [--threads 1] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _ab import cpu_model  # noqa: E402


def _median_cpu(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        samples.append(time.process_time() - start)
    return sorted(samples)[len(samples) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import torch

    import ember
    import ember.vision.models as ember_models

    torch.set_num_threads(args.threads)
    n = 4_000_000
    cases = {
        "rand(4M)": (lambda: torch.rand(n), lambda: ember.rand(n)),
        "randn(4M)": (lambda: torch.randn(n), lambda: ember.randn(n)),
        "randn(4M, float64)": (lambda: torch.randn(n, dtype=torch.float64), lambda: ember.randn(n, dtype=ember.float64)),
        "exponential_(4M, f64)": (lambda: torch.empty(n, dtype=torch.float64).exponential_(),
                                  lambda: ember.empty(n, dtype=ember.float64).exponential_()),
        "randint(4M)": (lambda: torch.randint(0, 1000, (n,)), lambda: ember.randint(0, 1000, (n,))),
        "randperm(1M)": (lambda: torch.randperm(1_000_000), lambda: ember.randperm(1_000_000)),
        "dropout(4M)": (lambda: torch.nn.functional.dropout(torch.ones(n), 0.1),
                        lambda: ember.nn.functional.dropout(ember.ones(n), 0.1)),
    }
    try:
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "vision"))
        from torchvision_ref import import_torchvision

        tv = import_torchvision()
        cases["resnet18 init"] = (lambda: tv.models.resnet18(), lambda: ember_models.resnet18())
    except ImportError:
        pass
    print(f"{cpu_model()}, load average {os.getloadavg()[0]:.1f}; torch {torch.__version__}, {args.threads} thread(s); "
          "CPU seconds, median of interleaved repeats (the values are equal: tests/tensor/test_random_streams_equal_torch.py)")
    print(f"{'case':22s} {'torch':>10s} {'ember':>10s} {'ember/torch':>12s}")
    for name, (theirs, ours) in cases.items():
        t_samples, e_samples = [], []
        for _ in range(args.repeats):  # interleaved: both see the same machine state
            t_samples.append(_median_cpu(theirs, 1))
            e_samples.append(_median_cpu(ours, 1))
        t, e = sorted(t_samples)[len(t_samples) // 2], sorted(e_samples)[len(e_samples) // 2]
        print(f"{name:22s} {t * 1e3:8.1f}ms {e * 1e3:8.1f}ms {e / max(t, 1e-9):11.2f}x")


if __name__ == "__main__":
    main()
