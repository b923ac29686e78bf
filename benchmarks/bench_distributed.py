"""Distributed: ember on MPI against torch.distributed (gloo) and raw mpi4py, in the same processes.

`python benchmarks/bench_distributed.py` starts itself under mpiexec with 2 ranks (``-n N`` for more).
Each rank runs ember, torch and raw MPI side by side in alternating rounds; a contender's time for
a round is the slowest rank's (collectives finish together), and each figure is the median round.
BLAS and torch use one thread per rank so that 2 ranks fit 2 cores without oversubscription.

Measured:
  * all_reduce of float32 buffers from 4 KiB to 64 MiB: time and bus bandwidth
    (2 (n-1)/n * bytes / time, the NCCL convention).
  * one data-parallel training step of an MLP (784-1024-1024-10, batch 128 per rank, SGD):
    ember DistributedDataParallel vs torch DistributedDataParallel (gloo), and each framework's
    step without the DDP wrapper (what communication costs).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def launch(n: int) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ember.distributed.run import find_mpiexec

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.call([find_mpiexec(), "-n", str(n), sys.executable, "-u", __file__, "--worker"], env=env)


def worker() -> None:
    import numpy as np
    import torch
    import torch.distributed as tdist
    from mpi4py import MPI

    import ember
    import ember.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("mpi")
    rank, size = dist.get_rank(), dist.get_world_size()
    tdist.init_process_group("gloo", init_method="tcp://127.0.0.1:29517", rank=rank, world_size=size)
    comm = MPI.COMM_WORLD

    def rounds(contenders: dict, calls: int, repeats: int = 7) -> dict:
        samples: dict = {name: [] for name in contenders}
        for fn in contenders.values():  # warm-up
            fn()
        for _ in range(repeats):
            for name, fn in contenders.items():
                comm.Barrier()
                start = time.perf_counter()
                for _ in range(calls):
                    fn()
                mine = (time.perf_counter() - start) / calls
                samples[name].append(comm.allreduce(mine, op=MPI.MAX))
        return {name: statistics.median(v) for name, v in samples.items()}

    def say(text: str) -> None:
        if rank == 0:
            print(text, flush=True)

    import numpy

    say(f"{size} ranks on one machine, MPICH {MPI.Get_library_version().split()[2]}, torch {torch.__version__} "
        f"(gloo), numpy {numpy.__version__}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}")
    say("\nall_reduce (sum, float32)            ember         torch gloo    raw mpi4py    ember/torch  ember bus GB/s")
    for nbytes in (4 << 10, 1 << 20, 16 << 20, 64 << 20):
        n = nbytes // 4
        e = ember.ones(n)
        t = torch.ones(n)
        raw = np.ones(n, np.float32)
        calls = max(1, int(2e6 // max(nbytes, 1 << 16)))
        res = rounds({"ember": lambda: dist.all_reduce(e), "torch": lambda: tdist.all_reduce(t),
                      "mpi": lambda: comm.Allreduce(MPI.IN_PLACE, raw)}, calls)
        bus = 2 * (size - 1) / size * nbytes / res["ember"] / 1e9
        say(f"  {nbytes / 1024:>8.0f} KiB                  {res['ember'] * 1e3:9.3f} ms  {res['torch'] * 1e3:9.3f} ms  "
            f"{res['mpi'] * 1e3:9.3f} ms   {res['ember'] / res['torch']:8.2f}x   {bus:8.2f}")

    # ---- a DDP training step -------------------------------------------------------------------------
    rng = np.random.default_rng(rank)
    x_np = rng.standard_normal((128, 784)).astype(np.float32)
    y_np = rng.integers(0, 10, 128)

    ember.manual_seed(0)
    e_net = ember.nn.Sequential(ember.nn.Linear(784, 1024), ember.nn.ReLU(), ember.nn.Linear(1024, 1024),
                                ember.nn.ReLU(), ember.nn.Linear(1024, 10))
    t_net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                                torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    t_net.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in e_net.state_dict().items()})
    e_ddp = ember.nn.parallel.DistributedDataParallel(e_net)
    t_ddp = torch.nn.parallel.DistributedDataParallel(t_net)
    e_x, e_y = ember.tensor(x_np), ember.tensor(y_np)
    t_x, t_y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    e_opt = ember.optim.SGD(e_net.parameters(), lr=0.01)
    t_opt = torch.optim.SGD(t_net.parameters(), lr=0.01)

    def step(model, opt, loss_fn, x, y):
        def run():
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        return run

    res = rounds({
        "ember DDP": step(e_ddp, e_opt, ember.nn.functional.cross_entropy, e_x, e_y),
        "torch DDP (gloo)": step(t_ddp, t_opt, torch.nn.functional.cross_entropy, t_x, t_y),
        "ember local step": step(e_net, e_opt, ember.nn.functional.cross_entropy, e_x, e_y),
        "torch local step": step(t_net, t_opt, torch.nn.functional.cross_entropy, t_x, t_y),
    }, calls=5)
    say("\nDDP training step, MLP 784-1024-1024-10 (1.86 M parameters), batch 128 per rank, SGD")
    for name, value in res.items():
        say(f"  {name:<24}{value * 1e3:9.3f} ms")
    say(f"  ember DDP / torch DDP: {res['ember DDP'] / res['torch DDP (gloo)']:.2f}x;  communication share: "
        f"ember {1 - res['ember local step'] / res['ember DDP']:.0%}, torch {1 - res['torch local step'] / res['torch DDP (gloo)']:.0%}")
    tdist.destroy_process_group()
    dist.destroy_process_group()


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker()
    else:
        count = int(sys.argv[sys.argv.index("-n") + 1]) if "-n" in sys.argv else 2
        sys.exit(launch(count))
