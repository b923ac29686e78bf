"""One rank of a torchrun-style job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment) that runs
the same program under torch or ember: ``python worker_gloo_vs_torch.py torch|ember OUT_PREFIX``.

It runs collectives on seeded data and trains a small model with DistributedDataParallel and
DistributedSampler on backend 'gloo', then saves every result to OUT_PREFIX<rank>.npz; the test compares
ember's files with torch's.
"""
import sys

import numpy as np

LIB, OUT = sys.argv[1], sys.argv[2]
if LIB == "torch":
    import torch as lib
else:
    import ember as lib
import importlib

dist = lib.distributed
data = importlib.import_module(f"{LIB}.utils.data")
DDP = lib.nn.parallel.DistributedDataParallel

dist.init_process_group("gloo")  # env://
rank, world = dist.get_rank(), dist.get_world_size()
out = {}
rng = np.random.default_rng(100 + rank)


def t(array):
    return lib.tensor(np.array(array))


# ---- collectives ---------------------------------------------------------------------------------------------
floats = rng.standard_normal(70_000).astype(np.float32)  # 280 KB: the split algorithm with 3 ranks
for name in ("SUM", "PRODUCT", "MIN", "MAX"):
    for label, values in (("small", floats[:37]), ("large", floats)):
        x = t(values)
        dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
        out[f"all_reduce_{name}_{label}"] = x.numpy()
ints = rng.integers(-1000, 1000, 50).astype(np.int64)
for name in ("SUM", "MIN", "MAX", "BAND", "BOR", "BXOR", "PRODUCT"):
    x = t(ints % 7 + 1 if name == "PRODUCT" else ints)
    dist.all_reduce(x, op=getattr(dist.ReduceOp, name))
    out[f"all_reduce_int_{name}"] = x.numpy()
x = t(rng.standard_normal((3, 4)))  # float64, 2-d
dist.all_reduce(x)
out["all_reduce_f64"] = x.numpy()
work = dist.all_reduce(t(floats[:100]), async_op=True)
work.wait()

b = t(rng.standard_normal(5).astype(np.float32))
dist.broadcast(b, src=world - 1)
out["broadcast"] = b.numpy()

mine = t(np.arange(4, dtype=np.float32) + 10 * rank)
gathered = [lib.zeros(4) for _ in range(world)]
dist.all_gather(gathered, mine)
out["all_gather"] = np.stack([g.numpy() for g in gathered])
into = lib.zeros(4 * world)
dist.all_gather_into_tensor(into, mine)
out["all_gather_into_tensor"] = into.numpy()

rs_in = t(rng.standard_normal(3 * world).astype(np.float32))
rs_out = lib.zeros(3)
dist.reduce_scatter_tensor(rs_out, rs_in)
out["reduce_scatter_tensor"] = rs_out.numpy()

red = t(rng.standard_normal(6))
dist.reduce(red, dst=0)
if rank == 0:
    out["reduce"] = red.numpy()

splits_in = [r + 1 for r in range(world)]  # rank r sends r+1 rows... to each rank: uneven
a2a_in = t(np.arange(sum(splits_in), dtype=np.float32) + 100 * rank)
splits_out = [rank + 1] * world
a2a_out = lib.zeros(sum(splits_out))
dist.all_to_all_single(a2a_out, a2a_in, output_split_sizes=splits_out, input_split_sizes=splits_in)
out["all_to_all_single"] = a2a_out.numpy()

sc = lib.zeros(2)
dist.scatter(sc, [t(np.array([r, -r], np.float32)) for r in range(world)] if rank == 0 else None, src=0)
out["scatter"] = sc.numpy()
g_list = [lib.zeros(2) for _ in range(world)] if rank == 0 else None
dist.gather(t(np.array([rank, rank * rank], np.float32)), g_list, dst=0)
if rank == 0:
    out["gather"] = np.stack([g.numpy() for g in g_list])

objects = [None] * world
dist.all_gather_object(objects, {"rank": rank, "values": [rank, 2.5]})
out["all_gather_object"] = np.array([o["rank"] + o["values"][1] for o in objects])
dist.barrier()

# ---- DDP with DistributedSampler ----------------------------------------------------------------------------
data_rng = np.random.default_rng(7)
X = data_rng.standard_normal((96, 8)).astype(np.float32)
Y = data_rng.integers(0, 3, 96)
model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.Tanh(), lib.nn.Linear(16, 3))
init_rng = np.random.default_rng(1000 + rank)  # different on each rank: DDP must start from rank 0's
with lib.no_grad():
    for p in model.parameters():
        p.copy_(t(init_rng.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
ddp = DDP(model)
opt = lib.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
dataset = data.TensorDataset(t(X), t(Y))
sampler = data.DistributedSampler(dataset, shuffle=True, seed=3)
indices = []
for epoch in range(3):
    sampler.set_epoch(epoch)
    indices.append(list(sampler))
    for xb, yb in data.DataLoader(dataset, batch_size=8, sampler=sampler):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
out["sampler_indices"] = np.array(indices)
for i, p in enumerate(model.parameters()):
    out[f"ddp_param_{i}"] = p.detach().numpy()
np.savez(f"{OUT}{rank}.npz", **out)
dist.destroy_process_group()
print(f"rank {rank}: done", flush=True)
