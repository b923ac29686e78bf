"""Checkpoint load/save time: ember vs torch on the same PyTorch zip file (a ResNet-50-sized state dict).

Contenders, each timed in alternating rounds (benchmarks/_timing.py), medians printed with ratios:

* load: ``torch.load(weights_only=True)``, ``ember.load`` (file read once, tensors view it),
  ``ember.load(mmap=True)`` (copy-on-write mapping: no read at all until touched), and
  ``ember.load`` of the same state dict as safetensors;
* save: ``torch.save`` and ``ember.save`` (zip format, atomic: temp file + fsync + rename).

The file lives in a temporary folder (the page cache is warm after the first round, as when a
training job reloads its checkpoint). Values loaded by ember are checked equal to torch's.

Run: ``.venv/bin/python benchmarks/bench_serialization.py [--mb 100 --rounds 5]``
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _timing import environment_line, fmt, interleaved_medians  # noqa: E402

import ember  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="state dict size in MB (float32)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import torch

    rng = np.random.default_rng(0)
    n_tensors = 160  # about ResNet-50's number of parameters and buffers
    per = int(args.mb * 2**20 / 4 / n_tensors)
    state = {f"layer{k}.weight": torch.from_numpy(rng.standard_normal(per, dtype=np.float32)) for k in range(n_tensors)}
    folder = tempfile.mkdtemp()
    torch_path, ember_path = os.path.join(folder, "t.pt"), os.path.join(folder, "e.pt")
    st_path = os.path.join(folder, "s.safetensors")
    torch.save(state, torch_path)
    ember_state = {k: ember.tensor(v.numpy()) for k, v in state.items()}
    ember.save(ember_state, st_path, format="safetensors")
    loaded = ember.load(torch_path)
    assert all(np.array_equal(loaded[k].numpy(), v.numpy()) for k, v in state.items())
    print(f"{platform.processor() or platform.machine()}; {environment_line()}; torch {torch.__version__}; "
          f"{n_tensors} float32 tensors, {args.mb:.0f} MB")
    loads = interleaved_medians({
        "torch.load(weights_only=True)": lambda: torch.load(torch_path, weights_only=True),
        "ember.load": lambda: ember.load(torch_path),
        "ember.load(mmap=True)": lambda: ember.load(torch_path, mmap=True),
        "ember.load (safetensors file)": lambda: ember.load(st_path),
    }, rounds=args.rounds, min_time=0.5, warmup=1)
    saves = interleaved_medians({
        "torch.save": lambda: torch.save(state, torch_path),
        "ember.save": lambda: ember.save(ember_state, ember_path),
    }, rounds=args.rounds, min_time=0.5, warmup=1)
    for title, rows, base in (("load", loads, "torch.load(weights_only=True)"), ("save", saves, "torch.save")):
        print(f"\n{title}")
        for name, value in rows.items():
            print(f"  {name:32s} {fmt(value)}  {value / rows[base]:6.2f}x {base}")


if __name__ == "__main__":
    main()
