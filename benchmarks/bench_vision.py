"""Issue 12 benchmark: ResNet-18 and MobileNetV2 at batch 32, 224x224 (ImageNet) and 32x32 (CIFAR):
inference (eval, no grad) and one training step (train mode, cross-entropy, SGD with momentum),
ember eager and ``ember.compile`` side by side with PyTorch eager in one run, alternating rounds.

Both libraries run torchvision's architecture with the same weights (copied from the torch model).

    .venv/bin/python benchmarks/bench_vision.py                  # everything (~10-20 min on 2 cores)
    .venv/bin/python benchmarks/bench_vision.py --sizes 32 --rounds 3
"""
from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vision"))
from _timing import environment_line, interleaved_medians, print_table  # noqa: E402

import ember  # noqa: E402
import ember.vision  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def torch_models():
    """torchvision's builders when torchvision imports, else ember's builders cannot be compared."""
    try:
        from torchvision_ref import import_torchvision

        return import_torchvision().models
    except ImportError:
        return None


def inference(lib, model, x):
    def run():
        with lib.no_grad():
            return model(x)
    return run


def train_step(lib, model, optimizer, x, target):
    def step():
        optimizer.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        return loss
    return step


def workload(name: str, size: int, batch: int, rounds: int, tvm) -> None:
    import torch

    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, 3, size, size)).astype(np.float32)
    t_np = rng.integers(0, 10, batch)
    torch.manual_seed(0)
    reference = getattr(tvm, name)(num_classes=10)
    state = {k: ember.from_numpy(v.detach().numpy().copy()) for k, v in reference.state_dict().items()}
    models = {}
    for key in ("eager", "compiled"):
        models[key] = getattr(ember.vision.models, name)(num_classes=10)
        models[key].load_state_dict(state)
    tx, tt = torch.from_numpy(x_np), torch.from_numpy(t_np)
    ex, et = ember.from_numpy(x_np), ember.from_numpy(t_np)

    reference.eval(), models["eager"].eval(), models["compiled"].eval()
    fns = {"torch eager": inference(torch, reference, tx), "ember eager": inference(ember, models["eager"], ex),
           "ember compiled": ember.compile(inference(ember, models["compiled"], ex))}
    rows = interleaved_medians(fns, rounds=rounds, min_time=0.0, warmup=2)
    print_table(f"{name} inference, batch {batch}, {size}x{size}", rows, "torch eager")

    reference.train(), models["eager"].train(), models["compiled"].train()
    sgd = {"lr": 0.01, "momentum": 0.9}
    fns = {"torch eager": train_step(torch, reference, torch.optim.SGD(reference.parameters(), **sgd), tx, tt),
           "ember eager": train_step(ember, models["eager"], ember.optim.SGD(models["eager"].parameters(), **sgd),
                                     ex, et),
           "ember compiled": ember.compile(train_step(ember, models["compiled"],
                                                      ember.optim.SGD(models["compiled"].parameters(), **sgd), ex, et))}
    rows = interleaved_medians(fns, rounds=rounds, min_time=0.0, warmup=2)
    print_table(f"{name} training step (SGD momentum), batch {batch}, {size}x{size}", rows, "torch eager")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet18,mobilenet_v2")
    parser.add_argument("--sizes", default="224,32")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("bench_vision needs torch as the reference (pip install 'ember[test]')")
        return
    tvm = torch_models()
    if tvm is None:
        print("bench_vision needs torchvision as the reference (pip install 'ember[test]')")
        return
    print("ember vision benchmarks;", environment_line())
    print(f"CPU: {cpu_model()}; torch {torch.__version__}, threads={torch.get_num_threads()}")
    for size in (int(s) for s in args.sizes.split(",")):
        for name in args.models.split(","):
            workload(name, size, args.batch, args.rounds, tvm)


if __name__ == "__main__":
    main()
