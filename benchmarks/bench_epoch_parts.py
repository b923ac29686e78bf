"""The parts of a CNN training epoch outside the convolutions, and the whole steps they sit in.

Cases: the MNIST CNN step on real MNIST batches (the data pipeline of ``bench_workloads.py``
included: index, scale, normalize, wrap), the ResNet-18 step (128 x 3x32x32, SGD momentum), and the
non-convolution ops of those steps at their shapes: relu, relu's backward, max pool 2x2 and 3x3/2
(forward + backward), a conv bias's gradient (``sum_to``), cross entropy (forward + backward),
linear, and SGD momentum's update.

    python benchmarks/bench_epoch_parts.py                                 # this checkout
    python benchmarks/bench_epoch_parts.py --ab ../main --cpu-time         # old vs new, one thread, CPU time
    python benchmarks/bench_epoch_parts.py --ab ../main --cpu-time --only step

``--cpu-time`` is the figure that means something on a shared machine (docs/cpu-performance.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
import workload_models as models  # noqa: E402
from _ab import main  # noqa: E402


def _mnist_step() -> object:
    from bench_workloads import mnist_arrays  # noqa: PLC0415 - reads the data only when this case runs

    images, labels, _ = mnist_arrays()
    order = np.random.default_rng(0).permutation(len(images))
    ember.manual_seed(0)
    model = models.mnist_cnn(ember)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    state = {"offset": 0}

    def step() -> None:
        start = state["offset"] if state["offset"] + 64 <= len(order) else 0
        state["offset"] = start + 64
        idx = order[start:start + 64]
        x = (images[idx].astype(np.float32) / 255.0 - 0.1307) / 0.3081
        loss = F.cross_entropy(model(ember.from_numpy(x.reshape(64, 1, 28, 28))), ember.from_numpy(labels[idx]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    return step


def _resnet_step() -> object:
    rng = np.random.default_rng(0)
    x = ember.from_numpy(rng.standard_normal((128, 3, 32, 32), dtype=np.float32))
    y = ember.from_numpy(rng.integers(0, 10, 128))
    ember.manual_seed(0)
    model = models.resnet18(ember)
    opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)

    def step() -> None:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    return step


def _train(fn, *shapes: tuple, seed: int = 0) -> object:
    """fn(*inputs) forward and backward (a ones cotangent) on float32 inputs of ``shapes``."""
    rng = np.random.default_rng(seed)
    inputs = [ember.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]
    return lambda: fn(*inputs).sum().backward()


def _cross_entropy() -> object:
    rng = np.random.default_rng(0)
    logits = ember.tensor(rng.standard_normal((64, 10)).astype(np.float32), requires_grad=True)
    target = ember.tensor(rng.integers(0, 10, 64))
    return lambda: F.cross_entropy(logits, target).backward()


def _sgd_momentum() -> object:
    model = models.mnist_cnn(ember)
    opt = ember.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for p in model.parameters():
        p.grad = ember.ones_like(p)
    return opt.step


def _relu_fwd() -> object:
    x = ember.randn(64, 32, 28, 28)
    return lambda: ember.relu(x)


def _bias_grad() -> object:
    g = ember.randn(64, 32, 28, 28)
    return lambda: g.sum_to_size(32, 1, 1)


def cases() -> dict:
    return {
        "step mnist (real data)": _mnist_step(),
        "step resnet18": _resnet_step(),
        "relu fwd 64x32x28x28": _relu_fwd(),
        "relu fwd+bwd 64x32x28x28": _train(F.relu, (64, 32, 28, 28)),
        "max_pool 2x2 fwd+bwd": _train(lambda x: F.max_pool2d(x, 2), (64, 32, 28, 28)),
        "max_pool 3x3/2 fwd+bwd": _train(lambda x: F.max_pool2d(x, 3, 2, 1), (128, 64, 16, 16)),
        "bias grad sum_to 64x32x28x28": _bias_grad(),
        "cross_entropy 64x10 fwd+bwd": _cross_entropy(),
        "linear 3136->10 fwd+bwd": _train(lambda x, w: F.linear(x, w), (64, 3136), (10, 3136)),
        "sgd momentum (mnist cnn)": _sgd_momentum(),
    }


if __name__ == "__main__":
    main(__file__, cases, __doc__)
