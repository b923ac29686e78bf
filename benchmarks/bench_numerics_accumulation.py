"""What issue 10's numerics fixes cost: float32 var/std accumulated in float64 (torch's), and group_norm /
instance_norm run through the layer_norm primitive, each against the float32 composite it replaced
(kept here, in ember ops, only as the baseline). Forward + backward, medians of alternating rounds.

    .venv/bin/python benchmarks/bench_numerics_accumulation.py
"""
from __future__ import annotations

import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ember  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.ops import elementwise as ew, reductions as red  # noqa: E402

from _timing import environment_line, interleaved_medians, print_table  # noqa: E402


def old_var(x: ember.Tensor) -> ember.Tensor:
    """The float32 two-pass composite var used before (squares overflow above 1.8e19; 1e7 + [0..3] gives 2.0)."""
    centered = x - red.mean(x, -1, keepdim=True)
    return red.sum(centered * centered, -1) / (x.shape[-1] - 1)


def old_group_norm(x: ember.Tensor, groups: int) -> ember.Tensor:
    n, c = x.shape[:2]
    grouped = x.reshape(n, groups, -1)
    centered = grouped - red.mean(grouped, 2, keepdim=True)
    return (centered * ew.rsqrt(red.mean(centered * centered, 2, keepdim=True) + 1e-5)).reshape(tuple(x.shape))


def old_instance_norm(x: ember.Tensor) -> ember.Tensor:
    dims = tuple(range(2, x.ndim))
    centered = x - red.mean(x, dims, keepdim=True)
    return centered * ew.rsqrt(red.mean(centered * centered, dims, keepdim=True) + 1e-5)


def forward_backward(fn, x0):  # noqa: ANN001, ANN201
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
    print(f"forward + backward, float32, {cpu}")
    print(environment_line())
    rows = ember.randn(256, 1024)
    images = ember.randn(32, 64, 28, 28)
    cases = {
        "var, 256 x 1024 along dim -1": (old_var, lambda x: x.var(-1), rows),
        "std, 256 x 1024 along dim -1": (lambda x: ew.sqrt(old_var(x)), lambda x: x.std(-1), rows),
        "group_norm(32 groups), 32x64x28x28": (lambda x: old_group_norm(x, 32), lambda x: F.group_norm(x, 32), images),
        "instance_norm, 32x64x28x28": (old_instance_norm, F.instance_norm, images),
    }
    for name, (before, now, x0) in cases.items():
        medians = interleaved_medians({"before (float32 composite)": forward_backward(before, x0),
                                       "now": forward_backward(now, x0)}, rounds=5)
        print_table(name, medians, "before (float32 composite)")


if __name__ == "__main__":
    main()
