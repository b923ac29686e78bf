"""Run under mpiexec -n 2: DistributedDataParallel against torch trained on the whole batch in one process."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np
import torch

import ember
import ember.distributed as dist
from ember.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
X = rng.standard_normal((8 * size, 6))
Y = rng.standard_normal((8 * size, 2))
mine = slice(8 * rank, 8 * (rank + 1))


def ember_net(seed):
    ember.manual_seed(seed)
    return ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.BatchNorm1d(16), ember.nn.Tanh(),
                               ember.nn.Linear(16, 2)).double()


def torch_twin(net):
    t = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.Tanh(),
                            torch.nn.Linear(16, 2)).double()
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in net.state_dict().items()})
    return t


# 1. replicas start different; DDP copies rank 0's weights; 3 SGD steps equal torch on the full batch
# (BatchNorm in eval mode: batch statistics are per replica in DDP, unlike a single full-batch process)
net = ember_net(seed=100 + rank)
model = DDP(net, bucket_cap_mb=0.0005)  # tiny buckets: several all-reduces in flight
assert len(model._buckets) > 1
params0 = [p.detach().numpy().copy() for p in net.parameters()]
everyone = [None] * size
dist.all_gather_object(everyone, params0)
for theirs in everyone:
    for a, b in zip(theirs, params0):
        np.testing.assert_array_equal(a, b)
net.eval()
torch_net = torch_twin(net).eval()
opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
topt = torch.optim.SGD(torch_net.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    opt.zero_grad()
    loss = ember.nn.functional.mse_loss(model(ember.tensor(X[mine])), ember.tensor(Y[mine]))
    loss.backward()
    topt.zero_grad()
    torch.nn.functional.mse_loss(torch_net(torch.from_numpy(X)), torch.from_numpy(Y)).backward()
    for (name, p), tp in zip(net.named_parameters(), torch_net.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    opt.step()
    topt.step()
for p, tp in zip(net.parameters(), torch_net.parameters()):
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-10, atol=1e-12)

# 2. state_dict keys carry the "module." prefix, as torch's DDP
assert all(k.startswith("module.") for k in model.state_dict())

# 3. no_sync: two local accumulations then one synced step == the full-batch gradient of both halves
net.train()
for m in net.modules():
    if isinstance(m, ember.nn.BatchNorm1d):
        m.eval()  # keep the comparison free of per-replica batch statistics
opt.zero_grad()
half = slice(8 * rank, 8 * rank + 4), slice(8 * rank + 4, 8 * rank + 8)
with model.no_sync():
    ember.nn.functional.mse_loss(model(ember.tensor(X[half[0]])), ember.tensor(Y[half[0]]), reduction="sum").backward()
local = [p.grad.numpy().copy() for p in net.parameters()]
ember.nn.functional.mse_loss(model(ember.tensor(X[half[1]])), ember.tensor(Y[half[1]]), reduction="sum").backward()
torch_net.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in net.state_dict().items()})
torch_net.eval()
torch_net.zero_grad()
torch.nn.functional.mse_loss(torch_net(torch.from_numpy(X)), torch.from_numpy(Y), reduction="sum").backward()
for p, tp in zip(net.parameters(), torch_net.parameters()):
    np.testing.assert_allclose(p.grad.numpy() * size, tp.grad.numpy(), rtol=1e-10, atol=1e-12)
gathered = [None] * size
dist.all_gather_object(gathered, local)
assert any(not np.allclose(a, b) for a, b in zip(gathered[0], gathered[-1])) or size == 1, \
    "inside no_sync the gradients must stay local"


# 4. unused parameters: an error that names them, or zeros/None with find_unused_parameters
class TwoHeads(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = ember.nn.Linear(3, 1)
        self.b = ember.nn.Linear(3, 1)

    def forward(self, x, use_b):
        return self.b(x) if use_b else self.a(x)


ember.manual_seed(0)
strict = DDP(TwoHeads())
try:
    strict(ember.ones(2, 3), False).sum().backward()
except RuntimeError as error:
    assert "find_unused_parameters=True" in str(error) and "b.weight" in str(error), error
else:
    raise AssertionError("a parameter without gradient must be reported")
heads = TwoHeads()
loose = DDP(heads, find_unused_parameters=True)
x = ember.full((2, 3), float(rank + 1))
loose(x, rank == 1).sum().backward()  # rank 0 uses head a, rank 1 head b
if size == 2:
    np.testing.assert_allclose(heads.a.weight.grad.numpy(), [[1.0, 1.0, 1.0]])  # (2*1 + 0) / 2
    np.testing.assert_allclose(heads.b.weight.grad.numpy(), [[2.0, 2.0, 2.0]])  # (0 + 2*2) / 2
heads.zero_grad()
loose(x, False).sum().backward()  # nobody uses b: its grad stays None
assert heads.b.weight.grad is None and heads.a.weight.grad is not None

# 5. buffers follow rank 0 at each forward (broadcast_buffers=True)
bn = ember.nn.BatchNorm1d(2)
bmodel = DDP(bn)
bmodel(ember.tensor(rng.standard_normal((4, 2)) + rank))
bmodel(ember.zeros(4, 2))
stats = [None] * size
dist.all_gather_object(stats, bn.running_mean.numpy().tolist())
assert stats[0] == stats[-1]

# 6. DistributedSampler + DataLoader: disjoint shares that cover the dataset, same length everywhere
data = ember.data.TensorDataset(ember.arange(21))
sampler = ember.data.DistributedSampler(data, shuffle=True, seed=3)
sampler.set_epoch(2)
seen = [int(v) for (batch,) in ember.data.DataLoader(data, batch_size=4, sampler=sampler) for v in batch]
shares = [None] * size
dist.all_gather_object(shares, seen)
assert len({len(s) for s in shares}) == 1
flat = sorted(v for s in shares for v in s)
assert set(flat) == set(range(21)) and len(flat) == sampler.total_size

dist.destroy_process_group()
print(f"rank {rank}: ddp ok")
