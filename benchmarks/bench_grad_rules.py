"""Backward passes through the gradient rules (issue 15: rules say only the math; the engine skips
unneeded gradients and sums broadcast ones back).

    python benchmarks/bench_grad_rules.py                  # this checkout: median time per case
    python benchmarks/bench_grad_rules.py --ab OLD_REPO    # OLD_REPO's ember vs this one (benchmarks/_ab.py)

Cases: a 100-op elementwise chain on 16 floats, forward + backward (per-node overhead of the rules);
broadcast ``mul``/``div``/``sub`` backward ((256, 512) with (512,)); a batched matmul with a
broadcast weight; ``linear`` + bias; a conv2d (32x16x32x32, 3x3) backward when only the weight needs
a gradient (first layer), only the input (frozen weight), and both.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _ab import main  # noqa: E402


def cases() -> dict:
    import ember
    import ember.nn.functional as F

    rng = np.random.default_rng(0)

    def t(shape, grad=True):
        return ember.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=grad)

    def backward(fn, *inputs):
        def run():
            for x in inputs:
                x.grad = None
            fn().sum().backward()
        return run

    out = {}
    a, b = t((16,)), t((16,))

    def chain():
        y = a
        for k in range(25):
            y = ((y * b + a) / (b * b + 1.0)) - a
        return y

    out["100-op chain (16,) fwd+bwd"] = backward(chain, a, b)
    x, v = t((256, 512)), t((512,))
    out["broadcast mul/div/sub bwd"] = backward(lambda: (x * v) / (v * v + 1.0) - v, x, v)
    bx, bw = t((8, 64, 128)), t((128, 64))
    out["batched matmul, shared weight"] = backward(lambda: bx @ bw, bx, bw)
    lx, lw, lb = t((256, 784)), t((512, 784)), t((512,))
    out["linear + bias"] = backward(lambda: F.linear(lx, lw, lb), lx, lw, lb)
    cx_frozen, cw = t((32, 16, 32, 32), grad=False), t((32, 16, 3, 3))
    out["conv2d, weight grad only"] = backward(lambda: F.conv2d(cx_frozen, cw, padding=1), cw)
    cx, cw_frozen = t((32, 16, 32, 32)), t((32, 16, 3, 3), grad=False)
    out["conv2d, input grad only"] = backward(lambda: F.conv2d(cx, cw_frozen, padding=1), cx)
    out["conv2d, both grads"] = backward(lambda: F.conv2d(cx, cw, padding=1), cx, cw)
    return out


if __name__ == "__main__":
    main(__file__, cases, __doc__)
