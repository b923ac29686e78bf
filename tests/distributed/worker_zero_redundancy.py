"""Run under mpiexec -n 2 (or 3): ZeroRedundancyOptimizer against torch's plain AdamW in one process.

Every rank sees the same gradients (as after DDP's all-reduce); after each step every rank's parameters
must equal torch's AdamW run on all parameters, the partition must be torch's (computed by torch's own
partition method), each rank must hold state for its shard only, and the consolidated state_dict must
equal torch's AdamW state_dict; loading it into a fresh ZeroRedundancyOptimizer continues identically.
"""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.distributed.optim import ZeroRedundancyOptimizer as TorchZeRO  # noqa: E402

import ember  # noqa: E402
import ember.distributed as dist  # noqa: E402
from ember.distributed.optim import ZeroRedundancyOptimizer  # noqa: E402

dist.init_process_group("mpi")
rank, size = dist.get_rank(), dist.get_world_size()
SHAPES = [(7, 5), (3,), (11, 2), (4, 4), (9,), (2, 2, 2), (6,), (1,)]
init = [np.random.default_rng(i).standard_normal(s) for i, s in enumerate(SHAPES)]


def groups(params):
    return [{"params": params[:5], "weight_decay": 0.1}, {"params": params[5:], "weight_decay": 0.0}]


e_params = [ember.tensor(a.copy(), requires_grad=True) for a in init]
t_params = [torch.tensor(a.copy(), requires_grad=True) for a in init]
zero = ZeroRedundancyOptimizer(groups(e_params), optimizer_class=ember.optim.AdamW, lr=1e-2, betas=(0.9, 0.95))
ref = torch.optim.AdamW(groups(t_params), lr=1e-2, betas=(0.9, 0.95))

# the partition, by torch's own method run on torch's twins of the parameters
fake = types.SimpleNamespace(world_size=size, param_groups=ref.param_groups, _partition_parameters_cache=[])
fake._get_min_index = lambda values, disallowed=None: TorchZeRO._get_min_index(fake, values, disallowed)
fake._partition_param_group = lambda g, p: TorchZeRO._partition_param_group(fake, g, p)
t_index = {id(p): i for i, p in enumerate(t_params)}
e_index = {id(p): i for i, p in enumerate(e_params)}
want = [[[t_index[id(p)] for p in g["params"]] for g in r] for r in TorchZeRO._partition_parameters(fake)]
got = [[[e_index[id(p)] for p in g["params"]] for g in r] for r in zero._partition_parameters()]
assert got == want, (got, want)
mine = [i for g in want[rank] for i in g]


def train(steps, seed, zero, e_params):
    rng = np.random.default_rng(seed)  # the same gradients on every rank
    for step in range(steps):
        grads = [rng.standard_normal(s) for s in SHAPES]
        for e, t, g in zip(e_params, t_params, grads):
            e.grad = ember.tensor(g.copy())
            t.grad = torch.tensor(g.copy())
        if step == 1:  # a schedule sets lr on the wrapper's groups; the shards must follow
            zero.param_groups[0]["lr"] = ref.param_groups[0]["lr"] = 5e-3
        zero.step()
        ref.step()
        for e, t in zip(e_params, t_params):
            np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-12, atol=1e-14)


train(3, 10, zero, e_params)
assert sorted(e_index[id(p)] for p in zero.optim.state) == sorted(mine)  # state for the shard only

# consolidated state == torch's plain AdamW state_dict (indices, hyperparameters, moments, step)
zero.consolidate_state_dict(to=0)
if rank == 0:
    sd, tsd = zero.state_dict(), ref.state_dict()
    assert sorted(sd["state"]) == sorted(tsd["state"]) == list(range(len(SHAPES)))
    for i in tsd["state"]:
        for key in ("exp_avg", "exp_avg_sq", "step"):
            np.testing.assert_allclose(np.asarray(sd["state"][i][key].numpy()), tsd["state"][i][key].numpy(),
                                       rtol=1e-12, atol=1e-15)
    for g, tg in zip(sd["param_groups"], tsd["param_groups"]):
        assert g["params"] == tg["params"]
        for key in ("lr", "weight_decay", "betas", "eps", "amsgrad"):
            assert g[key] == tg[key], key
else:
    try:
        zero.state_dict()
    except RuntimeError as error:
        assert f"consolidate_state_dict(to={rank})" in str(error)
    else:
        raise AssertionError("state_dict() without consolidation on this rank must raise")
    sd = None
box = [sd]
dist.broadcast_object_list(box, src=0)

# a fresh optimizer over copies of the parameters loads the whole state and continues like torch
e_params2 = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in e_params]
zero2 = ZeroRedundancyOptimizer(groups(e_params2), optimizer_class=ember.optim.AdamW, lr=1.0)
zero2.load_state_dict(box[0])
assert zero2.param_groups[0]["lr"] == 5e-3 and zero2.optim.param_groups[0]["lr"] == 5e-3
e_index2 = {id(p): i for i, p in enumerate(e_params2)}
assert sorted(e_index2[id(p)] for p in zero2.optim.state) == sorted(mine)
train(2, 11, zero2, e_params2)

# every rank holds the same parameters
everyone = [None] * size
dist.all_gather_object(everyone, [p.detach().numpy() for p in e_params2])
for theirs in everyone:
    for a, b in zip(theirs, everyone[0]):
        np.testing.assert_array_equal(a, b)

# add_param_group: a new group is sharded too, the earlier groups keep their owners
extra = ember.tensor(np.ones(5), requires_grad=True)
zero2.add_param_group({"params": [extra], "lr": 0.1})
assert len(zero2.param_groups) == 3 and len(zero2.optim.param_groups) == 3
owners = zero2._param_to_rank()
assert all(owners[p] == r for r, gs in enumerate(want) for g in gs for p in [e_params2[i] for i in g])
print(f"rank {rank}: zero ok")
