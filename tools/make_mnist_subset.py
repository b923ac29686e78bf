"""Build ember/data/assets/mnist_subset.npz: a class-balanced MNIST subset shipped inside the package.

Reads the four published IDX .gz files (MD5-checked) from ../shared/data/mnist (or --data), picks
--per-class-train / --per-class-test images of each digit with a fixed seed, and writes them with
np.savez_compressed (no pickle). Run: ``.venv/bin/python tools/make_mnist_subset.py``.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ember.data.datasets.mnist import CARRIED_MNIST, MNIST  # noqa: E402


def stratified(labels: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """``per_class`` indices of each label, drawn without replacement, returned in original order."""
    picks = [rng.choice(np.flatnonzero(labels == c), per_class, replace=False) for c in range(10)]
    return np.sort(np.concatenate(picks))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=str(ROOT / ".." / "shared" / "data" / "mnist"))
    parser.add_argument("--per-class-train", type=int, default=1200)
    parser.add_argument("--per-class-test", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(CARRIED_MNIST))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    arrays = {}
    for split, train, per_class in (("train", True, args.per_class_train), ("test", False, args.per_class_test)):
        images, labels = MNIST(args.data, train=train).arrays()
        keep = stratified(labels, per_class, rng)
        arrays[f"{split}_images"] = images[keep]
        arrays[f"{split}_labels"] = labels[keep].astype(np.uint8)
        print(f"{split}: {len(keep)} images, per class {np.bincount(labels[keep]).tolist()}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
