"""The ``ember`` command.

    ember demo                       train a small CNN on the MNIST subset carried in the package
    ember train mnist --data DIR     train on the full MNIST IDX files in DIR
    ember bench                      eager vs compiled time of the same training step
    ember twolayer                   the lectures' two-layer network with autograd

Example:
    $ ember demo
"""
from __future__ import annotations

import argparse
import sys
import time
from ember.run import run_script
from ember.train import mnist
import ember as torch


def two_layer_demo(steps: int = 500) -> float:
    """The lectures' two-layer ReLU network on random data, trained with autograd."""
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


def _train_mnist(data_dir: str | None, epochs: int | None, batch_size: int, out: str | None,
                 device: str = "cpu") -> int:
    kwargs = {"data_dir": data_dir, "epochs": epochs, "batch_size": batch_size, "device": device}
    if out is not None:
        kwargs["run_dir"] = out
    mnist.run(**kwargs)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ember", description="ember deep learning framework")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="train and evaluate a CNN on the carried MNIST subset (offline)")
    demo.add_argument("--epochs", type=int, default=None)
    demo.add_argument("--batch-size", type=int, default=64)
    demo.add_argument("--out", default=None, help="run directory for the checkpoint and logs")
    demo.add_argument("--device", default="cpu", help="cpu (default) or cuda / cuda:N (needs a GPU and CuPy)")
    train = sub.add_parser("train", help="train a model on a data set")
    train.add_argument("dataset", choices=["mnist"])
    train.add_argument("--data", default=None, help="folder with the four MNIST IDX .gz files")
    train.add_argument("--epochs", type=int, default=None)
    train.add_argument("--batch-size", type=int, default=64)
    train.add_argument("--out", default=None)
    train.add_argument("--device", default="cpu", help="cpu (default) or cuda / cuda:N (needs a GPU and CuPy)")
    sub.add_parser("bench", help="eager vs compiled time for the same training step")
    twolayer = sub.add_parser("twolayer", help="the lectures' two-layer network with autograd")
    twolayer.add_argument("--steps", type=int, default=500)
    run = sub.add_parser("run", help="run a PyTorch script unchanged, with `import torch` resolved to ember")
    run.add_argument("script", help="the Python file to run as __main__")
    run.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script (sys.argv[1:])")
    args = parser.parse_args(argv)
    if args.command == "run":
        return run_script(args.script, args.args)
    if args.command == "demo":
        return _train_mnist(None, args.epochs, args.batch_size, args.out, args.device)
    if args.command == "train":
        return _train_mnist(args.data, args.epochs, args.batch_size, args.out, args.device)
    if args.command == "bench":
        from ember.graph.showcase import showcase

        showcase()
        return 0
    two_layer_demo(args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
