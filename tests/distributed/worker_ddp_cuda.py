"""Run under mpiexec -n 2 with a CUDA device (a GPU, or the stand-in: EMBER_CUDA_STANDIN=1):
DistributedDataParallel on 'cuda' tensors against torch trained on the whole batch in one process,
and dist.all_reduce/broadcast of 'cuda' tensors. Ranks sharing one GPU (or the stand-in) use host
staging; one GPU per rank uses NCCL (``EXPECT_COMM`` names the path the test expects)."""
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
assert ember.cuda.is_available(), "needs a CUDA device or the stand-in (EMBER_CUDA_STANDIN=1)"
device = "cuda"
rng = np.random.default_rng(0)
X = rng.standard_normal((8 * size, 6))
Y = rng.standard_normal((8 * size, 2))
mine = slice(8 * rank, 8 * (rank + 1))

# 1. all_reduce / broadcast of device tensors (staged through the host)
t = ember.tensor(np.arange(5.0) * (rank + 1), device=device)
dist.all_reduce(t)
np.testing.assert_array_equal(t.cpu().numpy(), np.arange(5.0) * sum(r + 1 for r in range(size)))
b = ember.tensor(np.full(3, float(rank)), device=device)
dist.broadcast(b, src=1)
np.testing.assert_array_equal(b.cpu().numpy(), np.full(3, 1.0))
w = dist.all_reduce(ember.ones(4, device=device), async_op=True)
w.wait()

# 2. DDP on the device: replicas start different, DDP copies rank 0's weights, 3 SGD steps equal torch
ember.manual_seed(100 + rank)
net = ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.Tanh(), ember.nn.Linear(16, 2)).double()
torch_net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2)).double()
net = net.to(device)
model = DDP(net, bucket_cap_mb=0.0005)  # tiny buckets: several all-reduces in flight
assert model.comm_kind == os.environ.get("EXPECT_COMM", "host"), model.comm_kind
assert len(model._buckets) > 1
torch_net.load_state_dict({k: torch.from_numpy(v.cpu().numpy().copy()) for k, v in net.state_dict().items()})
opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
topt = torch.optim.SGD(torch_net.parameters(), lr=0.1, momentum=0.9)
for step in range(3):
    opt.zero_grad()
    loss = ember.nn.functional.mse_loss(model(ember.tensor(X[mine], device=device)),
                                        ember.tensor(Y[mine], device=device))
    loss.backward()
    topt.zero_grad()
    torch.nn.functional.mse_loss(torch_net(torch.from_numpy(X)), torch.from_numpy(Y)).backward()
    for (name, p), tp in zip(net.named_parameters(), torch_net.parameters()):
        assert p.grad.device.type == "cuda", name
        np.testing.assert_allclose(p.grad.cpu().numpy(), tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)
    opt.step()
    topt.step()
if rank == 0:
    print(f"ddp cuda ok ({model.comm_kind})")
