"""What ember's TorchScript interpreter costs: a ``torch.jit.save`` archive run by ``ember.jit.load`` (the AST walked
per call) against the same module traced into an ember graph (``ember.jit.trace`` of the loaded module: the same ember
ops, no interpretation) and against torch running the archive. Forward only, no grad, one thread.

    .venv/bin/python benchmarks/bench_torchscript_interpreter.py --rounds 5

Needs torch (the archives are written by it into a temporary folder). Rounds alternate the contenders; the table
gives medians and ratios to the traced ember graph. Run it alone: timings on a shared machine are noisy.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

import ember  # noqa: E402
from _timing import fmt, median_time  # noqa: E402


def _models() -> dict:
    nn = torch.nn

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(64, 128), nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.relu(self.fc1(x)))

    cnn = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(32, 10)).eval()
    layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()
    return {"MLP (scripted)": (MLP(), torch.randn(32, 64)), "CNN+BN (scripted)": (cnn, torch.randn(8, 3, 32, 32)),
            "Transformer layer (scripted)": (layer, torch.randn(4, 16, 64))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"CPU: {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        for name, (module, x) in _models().items():
            path = os.path.join(folder, "m.pt")
            torch.jit.save(torch.jit.script(module), path)
            theirs = torch.jit.load(path)
            ours = ember.jit.load(path).eval()
            ex = ember.tensor(x.numpy())
            with ember.no_grad():
                traced = ember.jit.trace(ours, ex)
            times: dict[str, list[float]] = {"ember interpreted": [], "ember traced graph": [], "torch jit": []}
            for _ in range(args.rounds):
                with ember.no_grad():
                    times["ember interpreted"].append(median_time(lambda: ours(ex), repeats=3, min_time=0.3))
                    times["ember traced graph"].append(median_time(lambda: traced(ex), repeats=3, min_time=0.3))
                with torch.no_grad():
                    times["torch jit"].append(median_time(lambda: theirs(x), repeats=3, min_time=0.3))
            base = statistics.median(times["ember traced graph"])
            print(f"\n{name}, input {tuple(x.shape)}")
            for label, values in times.items():
                value = statistics.median(values)
                print(f"  {label:20s} {fmt(value)}  {value / base:6.2f}x ember traced graph")


if __name__ == "__main__":
    main()
