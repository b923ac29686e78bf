"""Issue 2 benchmarks: per-op overhead, a 100-op elementwise chain, and W1 (the lectures' two-layer
net training step), side by side with PyTorch eager and plain NumPy in one run.

Run alone (other processes stall PyTorch's OpenMP threads):  .venv/bin/python benchmarks/bench_core.py
"""
from __future__ import annotations

import functools
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment_line, interleaved_medians, median_time, print_table  # noqa: E402

import ember  # noqa: E402
from ember.graph.showcase import two_layer_step  # noqa: E402

try:
    import torch
except ImportError:  # torch is a test/benchmark extra
    torch = None


def small_op() -> None:
    a_np, b_np = np.random.rand(4).astype(np.float32), np.random.rand(4).astype(np.float32)
    ea, eb = ember.from_numpy(a_np.copy()), ember.from_numpy(b_np.copy())
    ga, gb = ember.from_numpy(a_np.copy()).requires_grad_(), ember.from_numpy(b_np.copy()).requires_grad_()
    rows = {"numpy a + b": median_time(lambda: a_np + b_np),
            "ember a + b": median_time(lambda: ea + eb),
            "ember a + b (requires_grad)": median_time(lambda: ga + gb)}
    if torch is not None:
        ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
        tga, tgb = ta.clone().requires_grad_(), tb.clone().requires_grad_()
        rows["torch a + b"] = median_time(lambda: ta + tb)
        rows["torch a + b (requires_grad)"] = median_time(lambda: tga + tgb)
    print_table("per-op overhead: a + b on shape (4,)  [targets: ember <= 2 us, <= 4 us with grad]", rows,
                "torch a + b" if torch is not None else "numpy a + b")


def chain(lib, x, n: int = 100):
    y = x
    for i in range(n):
        if i % 4 == 0:
            y = y * 1.01
        elif i % 4 == 1:
            y = y + 0.1
        elif i % 4 == 2:
            y = lib.tanh(y)
        else:
            y = y - 0.05
    return y.sum()


def chain_bench() -> None:
    data = np.random.rand(16).astype(np.float32)

    def ember_step() -> None:
        x = ember.from_numpy(data.copy()).requires_grad_()
        chain(ember, x).backward()

    def numpy_forward() -> None:
        chain(np, data)

    rows = {"ember fwd+bwd": median_time(ember_step), "numpy fwd only": median_time(numpy_forward)}
    if torch is not None:
        def torch_step() -> None:
            x = torch.from_numpy(data.copy()).requires_grad_()
            chain(torch, x).backward()

        rows["torch fwd+bwd"] = median_time(torch_step)
    print_table("W5-eager: chain of 100 tiny elementwise ops (16 elements), forward + backward", rows,
                "torch fwd+bwd" if torch is not None else "ember fwd+bwd")


def w1_bench() -> None:
    n, d_in, h, d_out = 64, 1000, 100, 10
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((n, d_in)).astype(np.float32)
    y_np = rng.standard_normal((n, d_out)).astype(np.float32)
    w1_np = rng.standard_normal((d_in, h)).astype(np.float32)
    w2_np = rng.standard_normal((h, d_out)).astype(np.float32)
    lr = 1e-6

    x, y = ember.from_numpy(x_np), ember.from_numpy(y_np)
    w1 = ember.from_numpy(w1_np.copy()).requires_grad_()
    w2 = ember.from_numpy(w2_np.copy()).requires_grad_()

    ember_step = functools.partial(two_layer_step(ember, w1, w2, lr), x, y)

    nw1, nw2 = w1_np.copy(), w2_np.copy()

    def numpy_step() -> None:
        hidden = x_np @ nw1
        h_relu = np.maximum(hidden, 0)
        y_pred = h_relu @ nw2
        grad_y_pred = 2.0 * (y_pred - y_np)
        grad_w2 = h_relu.T @ grad_y_pred
        grad_h = grad_y_pred @ nw2.T
        grad_h[hidden < 0] = 0
        grad_w1 = x_np.T @ grad_h
        np.subtract(nw1, lr * grad_w1, out=nw1)
        np.subtract(nw2, lr * grad_w2, out=nw2)

    steps = {"ember eager": ember_step, "numpy (hand-written)": numpy_step}
    if torch is not None:
        tx, ty = torch.from_numpy(x_np), torch.from_numpy(y_np)
        tw1 = torch.from_numpy(w1_np.copy()).requires_grad_()
        tw2 = torch.from_numpy(w2_np.copy()).requires_grad_()

        torch_step = functools.partial(two_layer_step(torch, tw1, tw2, lr), tx, ty)

        steps["torch eager"] = torch_step
    rows = interleaved_medians(steps, rounds=9, min_time=2.0)
    print_table("W1: two-layer net step 64x1000x100x10, autograd + SGD  [target: ember <= 1.3x torch eager]", rows,
                "torch eager" if torch is not None else "numpy (hand-written)")


def main() -> None:
    print("ember core benchmarks;", environment_line())
    if torch is not None:
        print(f"torch {torch.__version__}, threads={torch.get_num_threads()}")
    small_op()
    chain_bench()
    w1_bench()


if __name__ == "__main__":
    main()
