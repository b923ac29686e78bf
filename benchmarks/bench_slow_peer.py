"""A 64 MiB all-reduce whose peer arrives 1.5 s late: ember's polling wait vs raw MPI_Allreduce.

ember waits by polling (and, after 2 ms, sleeping between polls) so that a failed or missing rank can
be reported instead of hanging. This checks that the sleeping does not slow the transfer once the late
peer arrives: rank 0's time should equal raw MPI's (about the 1.5 s delay plus the transfer).

Run: ``.venv/bin/python benchmarks/bench_slow_peer.py`` (starts itself under mpiexec with 2 ranks).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

DELAY_S = 1.5


def worker() -> None:
    import numpy as np
    from mpi4py import MPI

    import ember
    import ember.distributed as dist

    dist.init_process_group("mpi")
    rank = dist.get_rank()
    n = (64 << 20) // 4
    tensor, raw = ember.ones(n), np.ones(n, np.float32)
    times: dict = {"ember all_reduce": [], "raw MPI Allreduce": []}
    for _ in range(3):
        for name, call in (("ember all_reduce", lambda: dist.all_reduce(tensor)),
                           ("raw MPI Allreduce", lambda: MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, raw))):
            dist.barrier()
            if rank == 1:
                time.sleep(DELAY_S)
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    if rank == 0:
        for name, values in times.items():
            print(f"rank 0 (waits {DELAY_S} s for rank 1), {name:<18}: median {statistics.median(values):.3f} s")


def main() -> int:
    if "--worker" in sys.argv:
        worker()
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from ember.distributed.run import find_mpiexec

    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.call([find_mpiexec(), "-n", "2", sys.executable, "-u", __file__, "--worker"], env=env)


if __name__ == "__main__":
    raise SystemExit(main())
