"""The activations and losses rewritten for PyTorch's gradients at special points, against the
composites they replaced (kept here, written in ember ops, only as the baseline) and against torch.

Forward + backward of 10^6 float32 elements, medians over repeats, rounds alternating in one process.

    .venv/bin/python benchmarks/bench_special_points.py
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.ops import elementwise as ew  # noqa: E402

from _timing import environment_line, interleaved_medians, print_table  # noqa: E402

N = 1_000_000
x0 = ember.randn(N)
t = (ember.rand(N) > 0.5).float()

# The composites before the special-point fixes (gradient 0 or 1 at the kinks, tails lost).
OLD = {
    "logsigmoid": lambda x: -(ew.log1p(ew.exp(-ew.abs(x))) + ew.relu(-x)),
    "bce_with_logits": lambda x: ((1 - t) * x + ew.log1p(ew.exp(-ew.abs(x))) + ew.relu(-x)).mean(),
    "relu6": lambda x: ew.clamp(x, 0.0, 6.0),
    "hardswish": lambda x: x * ew.clamp(x / 6.0 + 0.5, 0.0, 1.0),
    "sigmoid": lambda x: (ew.tanh(x * 0.5) + 1) * 0.5,
}
NEW = {"logsigmoid": F.logsigmoid, "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, t),
       "relu6": F.relu6, "hardswish": F.hardswish, "sigmoid": ember.sigmoid}


def forward_backward(fn):  # noqa: ANN001, ANN201
    def run() -> None:
        x = x0.detach().requires_grad_(True)
        fn(x).sum().backward()
    return run


def main() -> None:
    cpu = platform.processor() or "cpu"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"forward + backward, {N} float32 elements, {cpu}")
    print(environment_line())
    for name in NEW:
        rows = interleaved_medians({"before (composite)": forward_backward(OLD[name]),
                                    "now": forward_backward(NEW[name])}, rounds=5)
        print_table(name, rows, "before (composite)")

if __name__ == "__main__":
    main()
