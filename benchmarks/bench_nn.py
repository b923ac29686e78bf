"""Issue 3 benchmarks: training steps of W2 (MLP 784-512-10, batch 256, Adam, cross-entropy),
W3 (small CNN, batch 64, SGD) and W4 (pre-LN Transformer encoder block, batch 16, seq 128,
d_model 256, 4 heads, MLP 1024), ember eager side by side with PyTorch eager in one run.

The same model code runs on both libraries (`lib` is `ember` or `torch`); weights are copied so
both do identical work. Run alone:  .venv/bin/python benchmarks/bench_nn.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment_line, interleaved_medians, print_table  # noqa: E402

import ember  # noqa: E402

try:
    import torch
except ImportError:
    torch = None


def copy_weights(source, target) -> None:
    """Load ``source`` (torch module) weights into ``target`` (ember module) via NumPy."""
    state = {k: ember.tensor(v.detach().numpy()) for k, v in source.state_dict().items()}
    target.load_state_dict(state)


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10))


def cnn(lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 10),
    )


def transformer_block(lib):
    return lib.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True, norm_first=True)


def make_step(lib, model, optimizer, x, target, loss_kind: str):
    functional = lib.nn.functional

    def step() -> None:
        out = model(x)
        loss = functional.cross_entropy(out, target) if loss_kind == "ce" else (out * out).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def workload(name: str, build, x_np: np.ndarray, target_np: np.ndarray | None, optim: str, loss_kind: str,
             target_ratio: float) -> None:
    steps = {}
    reference = None
    if torch is not None:
        torch.manual_seed(0)
        reference = build(torch)
        opt = torch.optim.Adam(reference.parameters(), 1e-3) if optim == "adam" else torch.optim.SGD(
            reference.parameters(), 0.01)
        tx = torch.from_numpy(x_np)
        tt = torch.from_numpy(target_np) if target_np is not None else None
        steps["torch eager"] = make_step(torch, reference, opt, tx, tt, loss_kind)
    model = build(ember)
    if reference is not None:
        copy_weights(reference, model)
    opt = ember.optim.Adam(model.parameters(), 1e-3) if optim == "adam" else ember.optim.SGD(model.parameters(), 0.01)
    ex = ember.from_numpy(x_np)
    et = ember.from_numpy(target_np) if target_np is not None else None
    steps["ember eager"] = make_step(ember, model, opt, ex, et, loss_kind)
    rows = interleaved_medians(steps, rounds=9, min_time=3.0)
    print_table(f"{name}  [target: ember eager <= {target_ratio}x torch eager]", rows,
                "torch eager" if torch is not None else "ember eager")


def main() -> None:
    print("ember nn benchmarks;", environment_line())
    if torch is not None:
        print(f"torch {torch.__version__}, threads={torch.get_num_threads()}")
    rng = np.random.default_rng(0)
    workload("W2: MLP 784-512-10, batch 256, Adam, cross-entropy", mlp,
             rng.standard_normal((256, 784)).astype(np.float32), rng.integers(0, 10, 256), "adam", "ce", 1.2)
    workload("W3: CNN conv32-pool-conv64-pool-linear, batch 64, SGD", cnn,
             rng.standard_normal((64, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, 64), "sgd", "ce", 1.5)
    workload("W4: pre-LN Transformer block, batch 16, seq 128, d 256, 4 heads, MLP 1024", transformer_block,
             rng.standard_normal((16, 128, 256)).astype(np.float32), None, "adam", "mean-square", 1.3)


if __name__ == "__main__":
    main()
