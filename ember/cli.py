"""The ``ember`` command: ``ember demo`` runs the main job.

Example:
    $ ember demo
"""
from __future__ import annotations

import argparse
import sys
import time


def two_layer_demo(steps: int = 500) -> float:
    """The lectures' two-layer ReLU network on random data, trained with autograd."""
    import ember as torch

    torch.manual_seed(0)
    n, d_in, h, d_out = 64, 1000, 100, 10
    x = torch.randn(n, d_in)
    y = torch.randn(n, d_out)
    w1 = torch.randn(d_in, h, requires_grad=True)
    w2 = torch.randn(h, d_out, requires_grad=True)
    learning_rate = 1e-6
    start = time.perf_counter()
    loss_value = float("nan")
    for t in range(steps):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            w1 -= learning_rate * w1.grad
            w2 -= learning_rate * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
        loss_value = loss.item()
        if t % 50 == 0 or t == steps - 1:
            print(f"step {t:4d}  loss {loss_value:14.3f}")
    print(f"{steps} steps in {time.perf_counter() - start:.2f}s")
    return loss_value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember deep learning framework")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job")
    demo.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    if args.command == "demo":
        two_layer_demo(args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
