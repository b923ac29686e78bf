"""Every convolution layer of the ResNet-18 (CIFAR-shaped, batch 128) and MNIST CNN (batch 64)
workloads, and of two DCGANs (the count column: a GAN step runs the discriminator twice), one by one: ember's forward, input gradient and weight gradient against PyTorch's
(oneDNN), timed in interleaved rounds in one process, with the ratio ember / torch.

    python benchmarks/bench_conv_layers.py                 # all layers
    python benchmarks/bench_conv_layers.py --only resnet   # or: mnist, gan (PyTorch-GAN's dcgan), dcgan64
    python benchmarks/bench_conv_layers.py --rounds 9 --min-time 0.5
    python benchmarks/bench_conv_layers.py --threads 1 --clock cpu   # one thread, CPU time per call
    python benchmarks/bench_conv_layers.py --clock process  # CPU time of all threads (spinning included)

On a shared machine wall-clock times of two-thread libraries are mostly noise (a descheduled BLAS
worker stalls every barrier); ``--threads 1 --clock cpu`` compares the algorithms themselves: both
libraries on one thread, each call timed by ``time.thread_time`` (CPU time of the calling thread).

Each row names the algorithm ember picked (``conv.algorithm``: Winograd F(m), dense, per-image
or channels-last im2col) and sums forward and backward per layer (``fwd+bwd``).

The weighted total multiplies each layer by how often the model runs it per step, so it is the
share of a training step's time that convolutions take. Ratios < 1 mean ember is faster.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

if __name__ == "__main__" and "--threads" in sys.argv:  # before NumPy and torch load their thread pools
    os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]
    os.environ["EMBER_CPU_THREADS"] = sys.argv[sys.argv.index("--threads") + 1]  # ember's own pool too

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
from ember.ops import conv as ember_conv  # noqa: E402
from _timing import environment_line, interleaved_medians  # noqa: E402
from bench_workloads import cpu_model  # noqa: E402

import torch  # noqa: E402

# (name, count per step, N, C, H, W, O, k, stride, padding)
LAYERS = {
    "resnet": [
        ("stem 7x7/2 3->64 32x32", 1, 128, 3, 32, 32, 64, 7, 2, 3),
        ("layer1 3x3 64 8x8", 4, 128, 64, 8, 8, 64, 3, 1, 1),
        ("layer2.0 3x3/2 64->128", 1, 128, 64, 8, 8, 128, 3, 2, 1),
        ("layer2.0 down 1x1/2", 1, 128, 64, 8, 8, 128, 1, 2, 0),
        ("layer2 3x3 128 4x4", 3, 128, 128, 4, 4, 128, 3, 1, 1),
        ("layer3.0 3x3/2 128->256", 1, 128, 128, 4, 4, 256, 3, 2, 1),
        ("layer3.0 down 1x1/2", 1, 128, 128, 4, 4, 256, 1, 2, 0),
        ("layer3 3x3 256 2x2", 3, 128, 256, 2, 2, 256, 3, 1, 1),
        ("layer4.0 3x3/2 256->512", 1, 128, 256, 2, 2, 512, 3, 2, 1),
        ("layer4.0 down 1x1/2", 1, 128, 256, 2, 2, 512, 1, 2, 0),
        ("layer4 3x3 512 1x1", 3, 128, 512, 1, 1, 512, 3, 1, 1),
    ],
    "mnist": [
        ("conv1 3x3 1->32 28x28", 1, 64, 1, 28, 28, 32, 3, 1, 1),
        ("conv2 3x3 32->64 14x14", 1, 64, 32, 14, 14, 64, 3, 1, 1),
    ],
    # PyTorch-GAN's dcgan (MNIST, 32x32, batch 64): the generator's convolutions after each upsampling, its
    # one-channel output layer, and the discriminator's stride-2 layers from one input channel (a GAN step
    # runs the discriminator's first layer's input gradient too: the generator trains through it)
    "gan": [
        ("G 3x3 128->128 16x16", 1, 64, 128, 16, 16, 128, 3, 1, 1),
        ("G 3x3 128->64 32x32", 1, 64, 128, 32, 32, 64, 3, 1, 1),
        ("G 3x3 64->1 32x32", 1, 64, 64, 32, 32, 1, 3, 1, 1),
        ("D 3x3/2 1->16 32x32", 2, 64, 1, 32, 32, 16, 3, 2, 1),
        ("D 3x3/2 16->32 16x16", 2, 64, 16, 16, 16, 32, 3, 2, 1),
        ("D 3x3/2 32->64 8x8", 2, 64, 32, 8, 8, 64, 3, 2, 1),
    ],
    # pytorch/examples' dcgan (64x64, batch 64): discriminator layers (their input gradients are the
    # generator's transposed convolutions' shapes, mirrored)
    "dcgan64": [
        ("D 4x4/2 3->64 64x64", 2, 64, 3, 64, 64, 64, 4, 2, 1),
        ("D 4x4/2 64->128 32x32", 2, 64, 64, 32, 32, 128, 4, 2, 1),
        ("D 4x4/2 128->256 16x16", 2, 64, 128, 16, 16, 256, 4, 2, 1),
    ],
}
# Layers whose input gradient a training step also needs, though they come first in their list.
NEEDS_INPUT_GRAD = {"gan", "dcgan64"}


def layer_fns(n, c, h, w, o, k, s, p, first: bool) -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wt = rng.standard_normal((o, c, k, k), dtype=np.float32) * 0.1
    ex, ew = ember.tensor(x), ember.tensor(wt)
    tx, tw = torch.from_numpy(x), torch.from_numpy(wt)
    out = torch.nn.functional.conv2d(tx, tw, stride=s, padding=p)
    g = rng.standard_normal(tuple(out.shape), dtype=np.float32)
    eg, tg = ember.tensor(g), torch.from_numpy(g)
    geo = dict(stride=(s, s), padding=(p, p, p, p), dilation=(1, 1), groups=1)
    fns = {
        "ember fwd": lambda: ember_conv.conv2d_raw(ex, ew, **geo),
        "torch fwd": lambda: torch.nn.functional.conv2d(tx, tw, stride=s, padding=p),
        "ember bwd-in": lambda: ember_conv.conv2d_input_grad(eg, ew, (n, c, h, w), **geo),
        "torch bwd-in": lambda: torch.ops.aten.convolution_backward(
            tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, False, False]),
        "ember bwd-w": lambda: ember_conv.conv2d_weight_grad(ex, eg, (o, c, k, k), **geo),
        "torch bwd-w": lambda: torch.ops.aten.convolution_backward(
            tg, tx, tw, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [False, True, False]),
    }
    if first:  # the first layer of a network needs no input gradient
        del fns["ember bwd-in"], fns["torch bwd-in"]
    return fns


def algorithm(n, c, h, w, o, k, s, p) -> str:
    """The algorithm ember's conv.py picks for this layer's forward (float32); "?" for an older
    ember without ``conv.algorithm`` (when comparing checkouts)."""
    if not hasattr(ember_conv, "algorithm"):
        return "?"
    return ember_conv.algorithm(np, (n, c, h, w), (o, c, k, k), (s, s), (p, p, p, p), (1, 1), 1, np.float32)


def check(fns: dict) -> None:
    """ember and torch must agree before their times mean anything."""
    for part in ("fwd", "bwd-in", "bwd-w"):
        if f"ember {part}" not in fns:
            continue
        e = fns[f"ember {part}"]()
        t = fns[f"torch {part}"]()
        e = e.numpy() if hasattr(e, "numpy") else np.asarray(e)
        t = (t if isinstance(t, torch.Tensor) else next(v for v in t if v is not None)).numpy()
        scale = max(1.0, float(np.abs(t).max()))
        err = float(np.abs(e - t).max()) / scale
        if err > 1e-3:
            raise AssertionError(f"{part}: ember and torch differ by {err:.2e} (relative to the largest value)")


def _interleaved(fns: dict, rounds: int, min_time: float, clock: Any) -> dict:
    """The shared interleaved timer (benchmarks/_timing.py) with this benchmark's warm-up."""
    return interleaved_medians(fns, rounds, min_time, warmup=1, clock=clock)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=sorted(LAYERS), help="one model's layers")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--min-time", type=float, default=0.3, help="seconds per contender per layer")
    parser.add_argument("--threads", type=int, help="BLAS/OpenMP/torch threads (default: the libraries' own)")
    parser.add_argument("--clock", choices=("wall", "cpu", "process"), default="wall",
                        help="cpu: time.thread_time, meaningful with --threads 1 only; process: "
                             "time.process_time, the CPU time of every thread (a spinning BLAS or OpenMP "
                             "worker counts)")
    args = parser.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu counts the calling thread only: use it with --threads 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    clock = {"cpu": time.thread_time, "process": time.process_time, "wall": time.perf_counter}[args.clock]
    print(f"{cpu_model()}; {environment_line()}; OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads); clock: {args.clock}")
    models = [args.only] if args.only else list(LAYERS)
    for model in models:
        print(f"\n{model}: ms per call (ember / torch)")
        print(f"  {'layer':<26}{'x':>3} {'algorithm':<14}{'forward':>22} {'input grad':>22} {'weight grad':>22}"
              f" {'fwd+bwd':>22}")
        totals = {"ember": 0.0, "torch": 0.0}
        for index, (name, count, *shape) in enumerate(LAYERS[model]):
            with ember.no_grad():
                fns = layer_fns(*shape, first=index == 0 and model not in NEEDS_INPUT_GRAD)
                check(fns)
                t = _interleaved(fns, args.rounds, args.min_time, clock)
            cells, layer = [], {"ember": 0.0, "torch": 0.0}
            for part in ("fwd", "bwd-in", "bwd-w"):
                if f"ember {part}" not in t:
                    cells.append(f"{'-':>22}")
                    continue
                e, p = t[f"ember {part}"], t[f"torch {part}"]
                layer["ember"] += e
                layer["torch"] += p
                cells.append(f"{e * 1e3:7.2f}/{p * 1e3:6.2f} {e / p:5.2f}x")
            e, p = layer["ember"], layer["torch"]
            totals["ember"] += count * e
            totals["torch"] += count * p
            cells.append(f"{e * 1e3:7.2f}/{p * 1e3:6.2f} {e / p:5.2f}x")
            print(f"  {name:<26}{count:>3} {algorithm(*shape):<14}" + " ".join(cells), flush=True)
        e, p = totals["ember"], totals["torch"]
        print(f"  {'weighted total per step':<30}{e * 1e3:9.2f} ms / {p * 1e3:.2f} ms = {e / p:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
