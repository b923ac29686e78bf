"""Optimizer steps and the W2 training step (MLP 784-512-10, batch 256, Adam), eager and compiled.

    python benchmarks/bench_optim.py                  # this checkout: median time per case
    python benchmarks/bench_optim.py --ab OLD_REPO    # OLD_REPO's ember vs this one (benchmarks/_ab.py)

Cases: ``w2 eager`` / ``w2 compiled`` (forward, backward, ``opt.step()``: the workload of
bench_workloads.py), and ``opt.step()`` alone over W2's parameters (Adam, AdamW), over a 1M-element
tensor (Adam, SGD momentum) and over 20 small tensors (Adam: per-parameter overhead).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ab import main  # noqa: E402


def cases() -> dict:
    import ember
    import ember.nn as nn
    import ember.nn.functional as F

    rng = np.random.default_rng(0)
    cases = {}

    def w2(compiled: bool):
        ember.manual_seed(0)
        model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = ember.optim.Adam(model.parameters(), 1e-3)
        x = ember.tensor(rng.standard_normal((256, 784)).astype(np.float32))
        y = ember.tensor(rng.integers(0, 10, 256))

        def step(xb, yb):
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            return loss

        fn = ember.compile(step) if compiled else step
        return lambda: fn(x, y).item()

    cases["w2 eager"] = w2(False)
    cases["w2 compiled"] = w2(True)

    def step_only(make, shapes):
        params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(np.float32))) for s in shapes]
        for p in params:
            p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32))
        opt = make(params)
        return opt.step

    w2_shapes = [(512, 784), (512,), (10, 512), (10,)]
    cases["Adam.step, W2 params"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), w2_shapes)
    cases["AdamW.step, W2 params"] = step_only(lambda ps: ember.optim.AdamW(ps, 1e-3), w2_shapes)
    cases["Adam.step, 1M"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), [(1 << 20,)])
    cases["SGD momentum.step, 1M"] = step_only(lambda ps: ember.optim.SGD(ps, 0.1, momentum=0.9), [(1 << 20,)])
    cases["Adam.step, 20 x (64,)"] = step_only(lambda ps: ember.optim.Adam(ps, 1e-3), [(64,)] * 20)
    return cases


if __name__ == "__main__":
    main(__file__, cases, __doc__)
