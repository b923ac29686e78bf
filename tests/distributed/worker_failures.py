"""Run under mpiexec -n 2 with a mode as argv[1]: rank 1 fails in one way (raise, sys.exit, SIGKILL, too slow)
in a plain DDP loop, in Model.fit, or in point-to-point traffic. Rank 0 must not hang: the job ends within
seconds with a non-zero exit code (tests/distributed/test_no_hang_on_rank_failure.py checks how).
No abort_on_error() here: init_process_group alone must do it."""
import os
import signal
import sys
import time
from datetime import timedelta

import numpy as np

import ember
import ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP

mode = sys.argv[1]
if mode == "pre_init_raise" and os.environ.get("PMI_RANK") == "1":
    raise ValueError("rank 1 broke before init_process_group")  # rank 0 waits in MPI_Init: the launcher ends it
timeout = timedelta(seconds=1) if mode == "timeout" else None
dist.init_process_group("mpi", timeout=timeout)
rank = dist.get_rank()


def fail(where):
    """Rank 1 fails the way ``mode`` says."""
    if rank != 1:
        return
    print(f"rank 1: failing ({mode}) at {where}", flush=True)
    if mode.endswith("osexit0"):  # no atexit handlers, no flush: the rank just disappears
        os._exit(0)
    if mode.endswith("osexit3"):
        os._exit(3)
    if mode.endswith("raise"):
        raise ValueError(f"rank 1 broke at {where}")
    if mode.endswith("exit0"):
        sys.exit(0)
    if mode.endswith("exit3"):
        sys.exit(3)
    if mode.endswith("kill"):
        os.kill(os.getpid(), signal.SIGKILL)
    if mode.endswith("term"):
        os.kill(os.getpid(), signal.SIGTERM)
    if mode.endswith("segv"):
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "timeout":
        time.sleep(4)


if mode.startswith("ddp") or mode == "timeout":
    ember.manual_seed(0)
    model = DDP(ember.nn.Linear(4, 2))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(8, 4), ember.randn(8, 2)
    for step in range(5):
        if step == 2:
            fail(f"step {step}")
        opt.zero_grad()
        ember.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
elif mode.startswith("fit"):
    from ember.train import DataParallelStrategy, LambdaCallback, Model

    strategy = DataParallelStrategy()
    with strategy.scope():
        model = Model(ember.nn.Linear(4, 2))
        model.configure("sgd", "mse", lr=0.1)
    X, Y = ember.randn(64, 4), ember.randn(64, 2)
    model.fit(X, Y, batch_size=4, epochs=2, verbose=0,
              callbacks=[LambdaCallback(on_batch_end=lambda batch, logs: fail(f"batch {batch}") if batch == 3 else None)])
elif mode.startswith("p2p"):
    buffer = ember.zeros(3)
    if rank == 0:
        dist.recv(buffer, src=1)
    else:
        fail("before send")
elif mode.startswith("object"):
    fail("before all_gather_object")
    gathered = [None, None]
    dist.all_gather_object(gathered, {"rank": rank})
elif mode.startswith("loader"):
    # DataLoader worker processes forked from a rank must not act for it (no leave notice at their exit);
    # an error in rank 1's worker reaches rank 1's main process and aborts the job
    from ember.data import DataLoader, Dataset, DistributedSampler

    class Items(Dataset):
        def __len__(self):
            return 40

        def __getitem__(self, i):
            if mode == "loader_raise" and i == 21:
                raise ValueError("rank 1 broke at item 21 in a DataLoader worker")
            return np.float64(i)

    total = ember.zeros(1, dtype=ember.float64)
    for _ in range(2):
        for batch in DataLoader(Items(), batch_size=4, sampler=DistributedSampler(Items(), shuffle=False),
                                num_workers=2):
            total += batch.sum()
        dist.all_reduce(total)
    assert float(total[0]) == 3 * sum(range(40)), float(total[0])
elif mode == "wait_timeout":
    # the group keeps torch's 30-minute default; Work.wait(timeout=...) bounds this one wait
    if rank == 1:
        time.sleep(4)
    work = dist.all_reduce(ember.ones(2), async_op=True)
    work.wait(timeout=timedelta(seconds=1))
elif mode == "pre_init_raise":
    dist.all_reduce(ember.ones(1))
elif mode in ("clean_early_exit", "clean_early_osexit"):
    # rank 1 leaves after the last collective while rank 0 still works: a normal end, exit code 0
    t = ember.ones(2)
    dist.all_reduce(t)
    if rank == 1:
        sys.stdout.flush()
        os._exit(0) if mode == "clean_early_osexit" else sys.exit(0)
    time.sleep(0.5)
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0])
else:
    raise SystemExit(f"unknown mode {mode}")
print(f"rank {rank}: finished", flush=True)
