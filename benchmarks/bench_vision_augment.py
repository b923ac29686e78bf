"""Data-augmentation throughput: ember.vision.transforms against torchvision on torch, one 3x224x224 uint8
image (the per-sample cost a DataLoader worker pays), in alternating rounds, with the CPU model printed.

    .venv/bin/python benchmarks/bench_vision_augment.py              # ~1-2 min
    .venv/bin/python benchmarks/bench_vision_augment.py --rounds 3
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "vision"))
from _timing import environment_line, interleaved_medians, print_table  # noqa: E402
from bench_vision import cpu_model  # noqa: E402

import ember  # noqa: E402
from ember.vision.transforms import autoaugment as ember_aa  # noqa: E402
from ember.vision.transforms import functional as EF  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()
    import torch
    from torchvision_ref import import_torchvision

    tv = import_torchvision()
    TF = tv.transforms.functional
    torch.set_num_threads(1)  # one DataLoader worker's view
    print(f"CPU: {cpu_model()}; {environment_line()}; torch {torch.__version__} (1 thread)")
    array = np.random.default_rng(0).integers(0, 256, (3, args.size, args.size), dtype=np.uint8)
    mine, theirs = ember.from_numpy(array.copy()), torch.from_numpy(array.copy())
    bilinear, tv_bilinear = EF.InterpolationMode.BILINEAR, tv.transforms.InterpolationMode.BILINEAR
    cases = {
        "rotate 30 deg, nearest": (lambda: EF.rotate(mine, 30.0), lambda: TF.rotate(theirs, 30.0)),
        "rotate 30 deg, bilinear, fill": (lambda: EF.rotate(mine, 30.0, bilinear, fill=[1.0, 2.0, 3.0]),
                                          lambda: TF.rotate(theirs, 30.0, tv_bilinear, fill=[1.0, 2.0, 3.0])),
        "affine (shear, scale), nearest": (lambda: EF.affine(mine, 10.0, [3, 2], 1.1, [5.0, 0.0]),
                                           lambda: TF.affine(theirs, 10.0, [3, 2], 1.1, [5.0, 0.0])),
        "gaussian_blur 9x9": (lambda: EF.gaussian_blur(mine, 9, 2.0), lambda: TF.gaussian_blur(theirs, 9, 2.0)),
        "equalize": (lambda: EF.equalize(mine), lambda: TF.equalize(theirs)),
        "adjust_sharpness": (lambda: EF.adjust_sharpness(mine, 2.0), lambda: TF.adjust_sharpness(theirs, 2.0)),
        "autocontrast": (lambda: EF.autocontrast(mine), lambda: TF.autocontrast(theirs)),
        "AutoAugment op Solarize+Posterize": (
            lambda: ember_aa._apply_op(ember_aa._apply_op(mine, "Solarize", 100.0, bilinear, None), "Posterize",
                                       4.0, bilinear, None),
            lambda: tv.transforms.autoaugment._apply_op(tv.transforms.autoaugment._apply_op(
                theirs, "Solarize", 100.0, tv_bilinear, None), "Posterize", 4.0, tv_bilinear, None)),
    }
    for title, (ember_fn, torch_fn) in cases.items():
        rows = interleaved_medians({"torchvision": torch_fn, "ember": ember_fn}, rounds=args.rounds)
        print_table(f"{title} ({args.size}x{args.size} uint8)", rows, baseline="torchvision")


if __name__ == "__main__":
    main()
