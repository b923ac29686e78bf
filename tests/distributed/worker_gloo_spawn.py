"""``python worker_gloo_spawn.py INIT OUT``: ember.multiprocessing.spawn starts 2 ranks that join a 'gloo' group by
INIT (env, tcp or file) and train a model with DistributedDataParallel + DistributedSampler; the parent trains
the same model on the whole batch in one process. Prints "gloo spawn ok" when the replicas agree with it."""
import os
import socket
import sys

import numpy as np

import ember
import ember.distributed as dist
import ember.multiprocessing as mp
from ember.data import DataLoader, DistributedSampler, TensorDataset

STEPS, BATCH = 4, 16
rng = np.random.default_rng(0)
X = rng.standard_normal((STEPS * BATCH, 6)).astype(np.float32)
Y = rng.standard_normal((STEPS * BATCH, 2)).astype(np.float32)
W0 = [rng.standard_normal((5, 6)).astype(np.float32) * 0.4, np.zeros(5, np.float32),
      rng.standard_normal((2, 5)).astype(np.float32) * 0.4, np.zeros(2, np.float32)]


def make_model():
    model = ember.nn.Sequential(ember.nn.Linear(6, 5), ember.nn.Tanh(), ember.nn.Linear(5, 2))
    with ember.no_grad():
        for p, w in zip(model.parameters(), W0):
            p.copy_(ember.tensor(w))
    return model


def train(rank, world, init, out):
    kwargs = {} if init == "env" else {"init_method": init, "rank": rank, "world_size": world}
    if init == "env":
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    dist.init_process_group("gloo", **kwargs)
    assert dist.get_backend() == "gloo" and dist.get_world_size() == world and dist.get_rank() == rank
    model = dist_model = ember.nn.parallel.DistributedDataParallel(make_model())
    opt = ember.optim.SGD(dist_model.parameters(), lr=0.2)
    data = TensorDataset(ember.tensor(X), ember.tensor(Y))
    # rank r reads every other sample; ordered by step below, its batch is half of the parent's batch
    sampler = DistributedSampler(data, shuffle=False)
    for xb, yb in DataLoader(data, batch_size=BATCH // world, sampler=sampler):
        opt.zero_grad()
        ember.nn.functional.mse_loss(model(xb), yb).backward()
        opt.step()
    np.savez(os.path.join(out, f"rank{rank}.npz"), *[p.detach().numpy() for p in model.parameters()])
    dist.destroy_process_group()


if __name__ == "__main__":
    init, out = sys.argv[1], sys.argv[2]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    method = {"env": "env", "tcp": f"tcp://127.0.0.1:{port}", "file": "file://" + os.path.join(out, "store")}[init]
    mp.spawn(train, args=(2, method, out), nprocs=2)
    model = make_model()  # the same steps in one process: rank r's samples are r, r+2, ... (no shuffle)
    opt = ember.optim.SGD(model.parameters(), lr=0.2)
    order = np.concatenate([np.arange(r, len(X), 2) for r in range(2)]).reshape(2, STEPS, BATCH // 2)
    for step in range(STEPS):
        idx = np.concatenate([order[0, step], order[1, step]])
        opt.zero_grad()
        # DDP averages the two ranks' mean losses: the mean over the union of their samples
        ember.nn.functional.mse_loss(model(ember.tensor(X[idx])), ember.tensor(Y[idx])).backward()
        opt.step()
    expected = [p.detach().numpy() for p in model.parameters()]
    for rank in range(2):
        got = np.load(os.path.join(out, f"rank{rank}.npz"))
        for i, want in enumerate(expected):
            np.testing.assert_allclose(got[f"arr_{i}"], want, rtol=1e-5, atol=1e-6)
    print("gloo spawn ok")
