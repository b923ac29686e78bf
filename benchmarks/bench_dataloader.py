"""DataLoader prefetching: epoch time with num_workers=0 versus background threads.

The dataset sleeps per item (standing in for file reads/JPEG decoding, which release the GIL) and
each batch is followed by a compute step (an ember MLP training step). With num_workers=0 the epoch
costs load + compute; with threads, loading overlaps compute (and several threads also load in
parallel), so the epoch approaches max(load / threads, compute). Also checks that every setting yields the same batches.

Run: ``.venv/bin/python benchmarks/bench_dataloader.py [--items 2048 --decode-ms 0.5]``
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import ember
import ember.optim
from ember import nn
from ember.data import DataLoader, Dataset


class SlowDataset(Dataset):
    """Synthetic 784-feature samples that take ``delay`` seconds each to "decode"."""

    def __init__(self, n: int, delay: float) -> None:
        self.n, self.delay = n, delay
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((n, 784)).astype(np.float32)
        self.y = rng.integers(0, 10, n)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        time.sleep(self.delay)
        return self.x[i], int(self.y[i])


def epoch_time(loader: DataLoader, step) -> tuple[float, float]:
    """(seconds for one epoch, checksum of the labels seen in order)."""
    start = time.perf_counter()
    checksum = 0.0
    for k, (x, y) in enumerate(loader):
        step(x, y)
        checksum += float((y.numpy() * (k + 1)).sum())
    return time.perf_counter() - start, checksum


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--decode-ms", type=float, default=0.5, help="sleep per item (ms)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2, 4])
    args = parser.parse_args()

    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = ember.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y) -> None:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()

    dataset = SlowDataset(args.items, args.decode_ms / 1000)
    prebuilt = list(DataLoader(SlowDataset(args.items, 0.0), batch_size=args.batch_size))
    step(*prebuilt[0])  # warm up
    start = time.perf_counter()
    for x, y in prebuilt:
        step(x, y)
    compute = time.perf_counter() - start
    load, _ = epoch_time(DataLoader(dataset, batch_size=args.batch_size), lambda x, y: None)
    print(f"{args.items} items, batch {args.batch_size}, {args.decode_ms} ms/item: loading alone {load:.2f}s/epoch, "
          f"compute alone {compute:.2f}s/epoch")
    results = {}
    for workers in args.workers:
        loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=workers,
                            generator=ember.Generator().manual_seed(1))
        seconds, checksum = epoch_time(loader, step)
        results[workers] = (seconds, checksum)
    base = results[args.workers[0]][0]
    for workers, (seconds, checksum) in results.items():
        same = "same batches" if checksum == results[args.workers[0]][1] else "DIFFERENT batches"
        print(f"num_workers={workers}: {seconds:6.2f}s/epoch  speedup x{base / seconds:4.2f}  ({same})")
    print(f"serial sum ~{load + compute:.2f}s/epoch; ideal with full overlap ~{max(load, compute):.2f}s/epoch")


if __name__ == "__main__":
    main()
