"""Run under mpiexec -n 2: model parallelism (pipeline stages, tensor-parallel layers) against torch."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np
import torch

import ember
import ember.distributed as dist
from ember.distributed.nn import functional as dF
from ember.distributed.pipeline import Pipeline

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
assert size == 2, "this worker splits models in two"
rng = np.random.default_rng(1)
X = rng.standard_normal((12, 8))
Y = rng.standard_normal((12, 3))

# The whole model, identical on both ranks, and its torch twin as the reference.
ember.manual_seed(0)
full = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.GELU(), ember.nn.Linear(16, 8), ember.nn.Tanh(),
                           ember.nn.Linear(8, 3)).double()
twin = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8), torch.nn.Tanh(),
                           torch.nn.Linear(8, 3)).double()
twin.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in full.state_dict().items()})
torch_loss = torch.nn.functional.mse_loss(twin(torch.from_numpy(X)), torch.from_numpy(Y))
torch_loss.backward()
torch_grads = {k: p.grad.numpy() for k, p in twin.named_parameters()}

# 1. Pipeline: rank 0 runs layers 0-1, rank 1 layers 2-4; 4 micro-batches
stage = full[:2] if rank == 0 else full[2:]
loss = Pipeline(stage, chunks=4).step(ember.tensor(X), ember.tensor(Y), ember.nn.MSELoss())
if rank == 1:
    np.testing.assert_allclose(loss.item(), torch_loss.item(), rtol=1e-12)
else:
    assert loss is None
for name, p in stage.named_parameters():  # a slice of a Sequential keeps the layer names
    np.testing.assert_allclose(p.grad.numpy(), torch_grads[name], rtol=1e-10, atol=1e-13, err_msg=name)

# 2. Tensor parallelism (Megatron-style MLP): first weight split by output columns, second by input rows;
# each rank computes a partial product, a differentiable all_reduce sums them.
W1, b1 = full[0].weight.detach().numpy(), full[0].bias.detach().numpy()
W2, b2 = full[2].weight.detach().numpy(), full[2].bias.detach().numpy()
cols = slice(8 * rank, 8 * (rank + 1))
w1 = ember.tensor(W1[cols].copy(), requires_grad=True)
c1 = ember.tensor(b1[cols].copy(), requires_grad=True)
w2 = ember.tensor(W2[:, cols].copy(), requires_grad=True)
x = ember.tensor(X, requires_grad=True)
h = ember.nn.functional.gelu(x @ w1.t() + c1)
out = dF.all_reduce(h @ w2.t()) + ember.tensor(b2)
tx = torch.from_numpy(X).requires_grad_()
tout = twin[2](twin[1](twin[0](tx)))
np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
G = rng.standard_normal(out.shape)  # the same on both ranks (same seed)
# As in torch, all_reduce's backward sums the output gradients of all ranks, so the objective is the sum
# of the ranks' objectives: seeding each rank with G / size makes it <out, G>, the full model's.
out.backward(ember.tensor(G / size))
tout.backward(torch.from_numpy(G))
# the weight shards' gradients are the matching slices of the full gradients
twin.zero_grad()
tout = twin[2](twin[1](twin[0](torch.from_numpy(X))))
tout.backward(torch.from_numpy(G))
np.testing.assert_allclose(w1.grad.numpy(), twin[0].weight.grad.numpy()[cols], rtol=1e-10, atol=1e-12)
np.testing.assert_allclose(c1.grad.numpy(), twin[0].bias.grad.numpy()[cols], rtol=1e-10, atol=1e-12)
np.testing.assert_allclose(w2.grad.numpy(), twin[2].weight.grad.numpy()[:, cols], rtol=1e-10, atol=1e-12)
x_grad = x.grad.clone()
dist.all_reduce(x_grad)  # the replicated input's gradient is the sum of the shards' contributions
np.testing.assert_allclose(x_grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)

# 3. all_gather's backward returns each rank the gradient of its own piece
piece = ember.tensor(np.full(3, rank + 1.0), requires_grad=True)
parts = dF.all_gather(piece)
np.testing.assert_array_equal(np.stack([p.detach().numpy() for p in parts]), [[1.0] * 3, [2.0] * 3])
(parts[0] * 10 + parts[1] * 100).sum().backward()  # every rank contributes to each piece's gradient
np.testing.assert_allclose(piece.grad.numpy(), np.full(3, (10.0 if rank == 0 else 100.0) * size))

# 4. differentiable broadcast: the source's input receives the sum of all copies' gradients
src_in = ember.tensor(np.full(2, 5.0 + rank), requires_grad=True)
copy = dF.broadcast(src_in, src=0)
np.testing.assert_array_equal(copy.detach().numpy(), [5.0, 5.0])
(copy * (rank + 1)).sum().backward()
np.testing.assert_allclose(src_in.grad.numpy(), [3.0, 3.0] if rank == 0 else [0.0, 0.0])

dist.destroy_process_group()
print(f"rank {rank}: model parallel ok")
