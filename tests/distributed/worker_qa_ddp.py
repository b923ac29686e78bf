"""Run under mpiexec -n 2: DistributedDataParallel edge cases against torch trained on the full batch in one
process (tied and frozen parameters, a layer used twice, two dtypes, no_sync accumulation, a second backward,
autocast, GradScaler with an inf on one rank, ember.compile of the wrapped model, state_dict round trip)."""
import os
import sys
import warnings

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
B = 6
X = rng.standard_normal((3 * B * size, 5)).astype(np.float32)
Y = rng.standard_normal((3 * B * size, 2))


def shard(a, micro=0):
    """Rank ``rank``'s share of micro-batch ``micro`` (the full batch of that micro-step is a[micro*B*size:...])."""
    start = micro * B * size + rank * B
    return a[start:start + B]


def full(a, micro=0):
    return a[micro * B * size:(micro + 1) * B * size]


def make(lib, seed):
    nn = lib.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(5, 5)
            self.b = nn.Linear(5, 5, bias=False)
            self.b.weight = self.a.weight  # tied: one Parameter reached from two modules
            self.frozen = nn.Linear(5, 5)
            self.frozen.weight.requires_grad_(False)
            self.head = nn.Linear(5, 2).double()  # a second dtype: a bucket of its own

        def forward(self, x):
            h = lib.tanh(self.a(x))
            h = lib.tanh(self.a(h))  # the same layer twice: its gradient has two contributions
            h = self.b(h) + self.frozen(h)
            return self.head(h.double())

    lib.manual_seed(seed)
    return Net()


def twin(net):
    t = make(torch, 0)
    t.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in net.state_dict().items()})
    return t


def tgrads(tnet):
    return {n: p.grad.numpy().copy() for n, p in tnet.named_parameters() if p.grad is not None}


def check_grads(net, expected, what, rtol=1e-5, atol=1e-6):
    got = {n: p.grad.numpy() for n, p in net.named_parameters() if p.grad is not None}
    assert set(got) == set(expected), (what, sorted(got), sorted(expected))
    for n in expected:
        np.testing.assert_allclose(got[n], expected[n], rtol=rtol, atol=atol, err_msg=f"{what}: {n}")


def same_on_all_ranks(arrays, what):
    everyone = [None] * size
    dist.all_gather_object(everyone, [np.asarray(a) for a in arrays])
    for theirs in everyone:
        for a, b in zip(theirs, everyone[0]):
            np.testing.assert_array_equal(a, b, err_msg=what)


mse = "mse_loss"

# 1. tied + frozen + reused + float32/float64 parameters: grads equal torch's full-batch grads, 2 SGD steps
net = make(ember, 10 + rank)  # replicas start different: DDP copies rank 0's weights
model = DDP(net)
assert len(model._buckets) >= 2 and {b.buffer.dtype for b in model._buckets} == {np.dtype("float32"),
                                                                                   np.dtype("float64")}
tnet = twin(net)
opt = ember.optim.SGD(model.parameters(), lr=0.1)
topt = torch.optim.SGD(tnet.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    ember.nn.functional.mse_loss(model(ember.tensor(shard(X, step))), ember.tensor(shard(Y, step))).backward()
    topt.zero_grad()
    torch.nn.functional.mse_loss(tnet(torch.from_numpy(full(X, step))), torch.from_numpy(full(Y, step))).backward()
    assert net.frozen.weight.grad is None and net.b.weight is net.a.weight
    check_grads(net, tgrads(tnet), f"step {step}")
    opt.step()
    topt.step()
same_on_all_ranks([p.detach().numpy() for p in net.parameters()], "weights after DDP steps")

# 2. gradient accumulation: two micro-steps under no_sync, a third synced one reduces the sum of all three
opt.zero_grad()
tnet = twin(net)
for micro in range(3):
    ctx = model.no_sync() if micro < 2 else warnings.catch_warnings()
    with ctx:
        loss = ember.nn.functional.mse_loss(model(ember.tensor(shard(X, micro))), ember.tensor(shard(Y, micro)),
                                            reduction="sum")
        loss.backward()
    if micro == 0:
        local = [p.grad.numpy().copy() for p in net.parameters() if p.grad is not None]
torch.nn.functional.mse_loss(tnet(torch.from_numpy(X)), torch.from_numpy(Y), reduction="sum").backward()
check_grads(net, {n: g / size for n, g in tgrads(tnet).items()}, "no_sync x3")
everyone = [None] * size
dist.all_gather_object(everyone, local)
assert any(not np.allclose(a, b) for a, b in zip(everyone[0], everyone[-1])), "no_sync must keep grads local"

# 3. a second backward of the same forward (retain_graph): as torch's DDP, only the first one is reduced
# (the reducer expects one backward per forward); the second accumulates this rank's own gradient
opt.zero_grad()
tnet = twin(net)
loss = ember.nn.functional.mse_loss(model(ember.tensor(shard(X))), ember.tensor(shard(Y)))
loss.backward(retain_graph=True)
loss.backward()
torch.nn.functional.mse_loss(tnet(torch.from_numpy(full(X))), torch.from_numpy(full(Y))).backward()
averaged = tgrads(tnet)
tnet.zero_grad()
torch.nn.functional.mse_loss(tnet(torch.from_numpy(shard(X))), torch.from_numpy(shard(Y))).backward()
check_grads(net, {n: averaged[n] + g for n, g in tgrads(tnet).items()}, "second backward")
# ... and the next forward + backward is reduced again
opt.zero_grad()
tnet = twin(net)
ember.nn.functional.mse_loss(model(ember.tensor(shard(X, 1))), ember.tensor(shard(Y, 1))).backward()
torch.nn.functional.mse_loss(tnet(torch.from_numpy(full(X, 1))), torch.from_numpy(full(Y, 1))).backward()
check_grads(net, tgrads(tnet), "after the second backward")

# 4. autocast bf16: parameter grads are float32 (float64 for the double head), averaged, close to torch's
opt.zero_grad()
tnet = twin(net)
with ember.autocast("cpu", dtype=ember.bfloat16):
    out = model(ember.tensor(shard(X)))
ember.nn.functional.mse_loss(out.double(), ember.tensor(shard(Y))).backward()
with torch.autocast("cpu", dtype=torch.bfloat16):
    tout = tnet(torch.from_numpy(full(X)))
torch.nn.functional.mse_loss(tout.double(), torch.from_numpy(full(Y))).backward()
assert net.a.weight.grad.dtype is ember.float32 and net.head.weight.grad.dtype is ember.float64
same_on_all_ranks([p.grad.numpy() for p in net.parameters() if p.grad is not None], "autocast grads")
check_grads(net, tgrads(tnet), "autocast bf16", rtol=3e-2, atol=3e-2)

# 5. GradScaler: an inf on one rank only reaches every rank through the all-reduce: all ranks skip the step
scaler = ember.amp.GradScaler("cpu", init_scale=256.0)
opt.zero_grad()
before = [p.detach().numpy().copy() for p in net.parameters()]
x = shard(X).copy()
if rank == size - 1:
    x[0, 0] = np.inf
with np.errstate(invalid="ignore", over="ignore"):
    scaler.scale(ember.nn.functional.mse_loss(model(ember.tensor(x)), ember.tensor(shard(Y)))).backward()
scaler.step(opt)
scaler.update()
assert scaler.get_scale() == 128.0, scaler.get_scale()
for p, b in zip(net.parameters(), before):
    np.testing.assert_array_equal(p.detach().numpy(), b, err_msg="a step with inf grads on one rank must be skipped")
# a finite step afterwards is taken everywhere, with averaged unscaled grads
opt.zero_grad()
tnet = twin(net)
scaler.scale(ember.nn.functional.mse_loss(model(ember.tensor(shard(X))), ember.tensor(shard(Y)))).backward()
scaler.unscale_(opt)
torch.nn.functional.mse_loss(tnet(torch.from_numpy(full(X))), torch.from_numpy(full(Y))).backward()
check_grads(net, tgrads(tnet), "GradScaler finite step")
scaler.step(opt)
scaler.update()
same_on_all_ranks([p.detach().numpy() for p in net.parameters()], "weights after scaler step")

# 6. ember.compile(ddp_model): gradients are still averaged (compiled or eager, never without the all-reduce)
compiled = ember.compile(model)
tnet = twin(net)
for step in range(3):
    opt.zero_grad()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(ember.tensor(shard(X, step)))
    if step == 1:  # the first call runs eagerly (warm-up); the second traces and must say it falls back
        assert any("DistributedDataParallel" in str(w.message) for w in caught), [str(w.message) for w in caught]
    ember.nn.functional.mse_loss(out, ember.tensor(shard(Y, step))).backward()
    tnet.zero_grad()
    torch.nn.functional.mse_loss(tnet(torch.from_numpy(full(X, step))), torch.from_numpy(full(Y, step))).backward()
    check_grads(net, tgrads(tnet), f"compiled step {step}")

# 7. state_dict round trip through DDP ("module." keys), into another DDP and into the bare module
state = model.state_dict()
assert all(k.startswith("module.") for k in state) and "module.b.weight" in state
other_net = make(ember, 99)
other = DDP(other_net)
other.load_state_dict(state)
for (n, p), q in zip(net.state_dict().items(), other_net.state_dict().values()):
    np.testing.assert_array_equal(p.numpy(), q.numpy(), err_msg=n)
assert other_net.b.weight is other_net.a.weight
bare = make(ember, 98)
bare.load_state_dict({k[len("module."):]: v for k, v in state.items()})
np.testing.assert_array_equal(bare.head.weight.detach().numpy(), net.head.weight.detach().numpy())

dist.destroy_process_group()
print(f"rank {rank}: qa ddp ok")
