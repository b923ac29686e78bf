"""backend='gloo': ember's socket engine against torch.distributed's gloo, in the same processes.

``python benchmarks/bench_gloo.py [-n 2] [--rounds 7]`` starts N ranks itself (no MPI). Each rank joins an ember
'gloo' group and a torch 'gloo' group (two ports) and runs both side by side in alternating rounds; a
contender's time for a round is the slowest rank's, and each figure is the median round.

Measured: all_reduce (SUM) of float32 buffers from 4 KiB to 64 MiB, and one DistributedDataParallel step of
an MLP (784-1024-1024-10, batch 128 per rank, SGD). BLAS and torch use one thread per rank.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n: int, rounds: int) -> int:
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""), WORLD_SIZE=str(n),
               EMBER_PORT=str(_port()), TORCH_PORT=str(_port()), ROUNDS=str(rounds))
    procs = [subprocess.Popen([sys.executable, "-u", __file__, "--worker"], env=dict(env, RANK=str(r)))
             for r in range(n)]
    return max(p.wait() for p in procs)


def worker() -> None:
    import numpy as np
    import torch
    import torch.distributed as tdist

    import ember
    import ember.distributed as dist

    torch.set_num_threads(1)
    rank, n, rounds = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["ROUNDS"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['EMBER_PORT']}", rank=rank,
                            world_size=n)
    tdist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                             world_size=n)

    def slowest(seconds: float) -> float:
        t = ember.tensor([seconds])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.item()

    def timed(fn) -> float:
        dist.barrier()
        tdist.barrier()
        start = time.perf_counter()
        fn()
        return slowest(time.perf_counter() - start)

    rows = []
    for nbytes in (4 << 10, 1 << 20, 16 << 20, 64 << 20):
        count = nbytes // 4
        ours, theirs = ember.ones(count), torch.ones(count)
        reps = max(1, min(50, (8 << 20) // nbytes))
        o, t = [], []
        for _ in range(rounds):
            o.append(timed(lambda: [dist.all_reduce(ours) for _ in range(reps)]) / reps)
            t.append(timed(lambda: [tdist.all_reduce(theirs) for _ in range(reps)]) / reps)
        rows.append((f"all_reduce {nbytes >> 10} KiB", statistics.median(o), statistics.median(t)))

    rng = np.random.default_rng(rank)
    x, y = rng.standard_normal((128, 784)).astype(np.float32), rng.integers(0, 10, 128)

    def mlp(lib):
        return lib.nn.Sequential(lib.nn.Linear(784, 1024), lib.nn.ReLU(), lib.nn.Linear(1024, 1024), lib.nn.ReLU(),
                                 lib.nn.Linear(1024, 10))

    def stepper(lib, ddp_cls):
        model = ddp_cls(mlp(lib))
        opt = lib.optim.SGD(model.parameters(), lr=0.01)
        xb, yb = lib.tensor(x), lib.tensor(y)

        def step():
            opt.zero_grad()
            lib.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        return step

    ours = stepper(ember, ember.nn.parallel.DistributedDataParallel)
    theirs = stepper(torch, torch.nn.parallel.DistributedDataParallel)
    ours(), theirs()
    o, t = [], []
    for _ in range(rounds):
        o.append(timed(lambda: [ours() for _ in range(3)]) / 3)
        t.append(timed(lambda: [theirs() for _ in range(3)]) / 3)
    rows.append(("DDP step MLP 784-1024-1024-10, batch 128/rank", statistics.median(o), statistics.median(t)))
    if rank == 0:
        print(f"{n} ranks, median of {rounds} rounds (slowest rank per round)")
        print("| benchmark | ember (gloo) | torch (gloo) | ratio |\n| --- | --- | --- | --- |")
        for name, a, b in rows:
            print(f"| {name} | {a * 1e3:.3f} ms | {b * 1e3:.3f} ms | {a / b:.2f}x |")
    dist.destroy_process_group()
    tdist.destroy_process_group()


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        parser = argparse.ArgumentParser()
        parser.add_argument("-n", type=int, default=2)
        parser.add_argument("--rounds", type=int, default=7)
        opts = parser.parse_args()
        raise SystemExit(launch(opts.n, opts.rounds))
