"""Quantization speed: ember (NumPy) vs torch 2.13's fbgemm/x86 kernels on the same inputs, and the results
checked equal before timing.

Contenders, timed in alternating rounds (benchmarks/_timing.py), medians printed with ratios to torch:
``quantize_per_tensor`` of 1M floats; quantized Linear (64 x 512 -> 512, per-channel weights); quantized Conv2d
(8 x 32 x 28 x 28, 64 3x3 filters); dynamic Linear (64 x 512 -> 512).

Run: ``.venv/bin/python benchmarks/bench_quantization.py [--rounds 5]``
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import environment_line, fmt, interleaved_medians  # noqa: E402

import ember  # noqa: E402
from ember.ao.nn import quantized as nnq  # noqa: E402

warnings.filterwarnings("ignore")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown CPU"


def main() -> None:
    import torch
    import torch.ao.nn.quantized as tnnq

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    cases = {}

    x = rng.standard_normal(1_000_000).astype(np.float32)
    ex, tx = ember.tensor(x), torch.from_numpy(x)
    assert np.array_equal(ember.quantize_per_tensor(ex, 0.02, 128, ember.quint8).int_repr().numpy(),
                          torch.quantize_per_tensor(tx, 0.02, 128, torch.quint8).int_repr().numpy())
    cases["quantize_per_tensor 1M"] = (lambda: ember.quantize_per_tensor(ex, 0.02, 128, ember.quint8),
                                       lambda: torch.quantize_per_tensor(tx, 0.02, 128, torch.quint8))

    w = (rng.standard_normal((512, 512)) * 0.05).astype(np.float32)
    scales, zeros = rng.uniform(0.001, 0.003, 512), np.zeros(512, np.int64)
    qw_e = ember.quantize_per_channel(ember.tensor(w), ember.tensor(scales), ember.tensor(zeros), 0, ember.qint8)
    qw_t = torch.quantize_per_channel(torch.from_numpy(w), torch.from_numpy(scales), torch.from_numpy(zeros), 0,
                                      torch.qint8)
    bias = rng.standard_normal(512).astype(np.float32)
    lin_e, lin_t = nnq.Linear(512, 512), tnnq.Linear(512, 512)
    lin_e.set_weight_bias(qw_e, ember.tensor(bias))
    lin_t.set_weight_bias(qw_t, torch.from_numpy(bias))
    lin_e.scale = lin_t.scale = 0.05
    lin_e.zero_point = lin_t.zero_point = 100
    a = rng.standard_normal((64, 512)).astype(np.float32)
    qa_e = ember.quantize_per_tensor(ember.tensor(a), 0.03, 128, ember.quint8)
    qa_t = torch.quantize_per_tensor(torch.from_numpy(a), 0.03, 128, torch.quint8)
    assert np.array_equal(lin_e(qa_e).int_repr().numpy(), lin_t(qa_t).int_repr().numpy())
    cases["quantized Linear 64x512->512"] = (lambda: lin_e(qa_e), lambda: lin_t(qa_t))

    cw = (rng.standard_normal((64, 32, 3, 3)) * 0.05).astype(np.float32)
    cs, cz = rng.uniform(0.001, 0.003, 64), np.zeros(64, np.int64)
    conv_e, conv_t = nnq.Conv2d(32, 64, 3, padding=1), tnnq.Conv2d(32, 64, 3, padding=1)
    conv_e.set_weight_bias(ember.quantize_per_channel(ember.tensor(cw), ember.tensor(cs), ember.tensor(cz), 0,
                                                      ember.qint8), None)
    conv_t.set_weight_bias(torch.quantize_per_channel(torch.from_numpy(cw), torch.from_numpy(cs),
                                                      torch.from_numpy(cz), 0, torch.qint8), None)
    conv_e.scale = conv_t.scale = 0.1
    img = rng.standard_normal((8, 32, 28, 28)).astype(np.float32)
    qi_e = ember.quantize_per_tensor(ember.tensor(img), 0.03, 128, ember.quint8)
    qi_t = torch.quantize_per_tensor(torch.from_numpy(img), 0.03, 128, torch.quint8)
    assert np.array_equal(conv_e(qi_e).int_repr().numpy(), conv_t(qi_t).int_repr().numpy())
    cases["quantized Conv2d 8x32x28x28"] = (lambda: conv_e(qi_e), lambda: conv_t(qi_t))

    dyn_e, dyn_t = nnq.dynamic.Linear(512, 512), torch.ao.nn.quantized.dynamic.Linear(512, 512)
    dyn_e.set_weight_bias(qw_e, ember.tensor(bias))
    dyn_t.set_weight_bias(qw_t, torch.from_numpy(bias))
    fa_e, fa_t = ember.tensor(a), torch.from_numpy(a)
    assert np.array_equal(dyn_e(fa_e).numpy(), dyn_t(fa_t).numpy())
    cases["dynamic Linear 64x512->512"] = (lambda: dyn_e(fa_e), lambda: dyn_t(fa_t))

    print(f"{_cpu_model()}; {environment_line()}; torch {torch.__version__} (1 thread), load "
          f"{os.getloadavg()[0]:.1f}; results equal to torch's before timing")
    for name, (ours, theirs) in cases.items():
        times = interleaved_medians({"ember": ours, "torch": theirs}, rounds=args.rounds)
        print(f"  {name:<32} ember {fmt(times['ember'])}  torch {fmt(times['torch'])}  "
              f"ratio {times['ember'] / times['torch']:.2f}x")


if __name__ == "__main__":
    main()
