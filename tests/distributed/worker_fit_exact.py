"""Run under mpiexec -n 2: Model.fit/evaluate/predict under DataParallelStrategy against a single-process
Model on the equivalent global batches (per-replica batch b on 2 ranks == batch 2b, mean loss, SGD, float64)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np

import ember
from ember.data import DataLoader, TensorDataset
from ember.data.sampler import Sampler
from ember.train import DataParallelStrategy, LambdaCallback, Model

strategy = DataParallelStrategy(seed=7)
rank, size = strategy.rank, strategy.num_replicas_in_sync
assert size == 2 and strategy.is_chief == (rank == 0)
rng = np.random.default_rng(0)
B, N = 4, 40  # 5 global batches of 8 per epoch
X = ember.from_numpy(rng.standard_normal((N, 5)))
Y = ember.from_numpy(rng.standard_normal((N, 3)))
XE = ember.from_numpy(rng.standard_normal((13, 5)))  # odd: shards of 7 and 6, uneven batch counts
YE = ember.from_numpy(rng.standard_normal((13, 3)))


def net():
    ember.manual_seed(3)
    return ember.nn.Sequential(ember.nn.Linear(5, 16), ember.nn.Tanh(), ember.nn.Linear(16, 3)).double()


def recorder(model, weights, batch_losses):
    return LambdaCallback(
        on_epoch_end=lambda epoch, logs: weights.append([p.detach().numpy().copy() for p in model.module.parameters()]),
        on_train_batch_end=lambda batch, logs: batch_losses.append((logs["loss"], logs["mae"], logs["size"])))


def close(a, b, what):
    np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-13, err_msg=f"rank {rank}: {what}")


# 1. no shuffle: fit with batch_size=B per replica == one process with batch 2B
ref = Model(net())
ref.configure("sgd", "mse", ["mae"], lr=0.2, momentum=0.5)
ref_w, ref_b = [], []
ref_hist = ref.fit(X, Y, batch_size=2 * B, epochs=3, shuffle=False, verbose=0, callbacks=[recorder(ref, ref_w, ref_b)])

# Replicas start different (rank 1 from another seed): the strategy must broadcast rank 0's weights.
ember.manual_seed(3 if rank == 0 else 101)
with strategy.scope():
    model = Model(ember.nn.Sequential(ember.nn.Linear(5, 16), ember.nn.Tanh(), ember.nn.Linear(16, 3)).double())
    model.configure("sgd", "mse", ["mae"], lr=0.2, momentum=0.5)
assert model.strategy is strategy and Model(net()).strategy is None  # the scope is closed again
for a, t in zip(model.module.parameters(), net().parameters()):
    np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
w, b = [], []
hist = model.fit(X, Y, batch_size=B, epochs=3, shuffle=False, verbose=0, callbacks=[recorder(model, w, b)])
assert len(w) == len(ref_w) == 3
for epoch, (mine, theirs) in enumerate(zip(w, ref_w)):
    for i, (a, t) in enumerate(zip(mine, theirs)):
        close(a, t, f"epoch {epoch} parameter {i}")
assert len(b) == len(ref_b) == 15
for (loss, mae, n), (rloss, rmae, rn) in zip(b, ref_b):
    close(loss, rloss, "batch loss")
    close(mae, rmae, "batch mae")
    assert n == rn == 2 * B, (n, rn)
for key in ("loss", "mae"):
    close(hist.history[key], ref_hist.history[key], f"history {key}")

# 2. evaluate and predict: global figures / full ordered predictions on every rank
got = model.evaluate(XE, YE, batch_size=4, verbose=0, return_dict=True)
want = ref.evaluate(XE, YE, batch_size=4, verbose=0, return_dict=True)
assert sorted(got) == sorted(want) == ["loss", "mae"]
for key in got:
    close(got[key], want[key], f"evaluate {key}")
pred = model.predict(XE, batch_size=4)
assert tuple(pred.shape) == (13, 3) and pred.dtype == ember.float64
close(pred.numpy(), ref.predict(XE, batch_size=4).numpy(), "predict")
val = model.fit(X, Y, batch_size=B, epochs=1, shuffle=False, verbose=0, validation_data=(XE, YE))
ref_val = ref.fit(X, Y, batch_size=2 * B, epochs=1, shuffle=False, verbose=0, validation_data=(XE, YE))
for key in ("loss", "val_loss", "val_mae"):
    close(val.history[key], ref_val.history[key], f"fit with validation: {key}")

# a second Model around the same network (explicit strategy=) reuses its DDP wrapper: no double all-reduce
again = Model(model.module, strategy=strategy)
assert again.strategy is strategy and again._net is model._net


# 3. shuffle through a user DataLoader (re-wrapped with a DistributedSampler, set_epoch every epoch)
#    == one process reading the same permutation (seed + epoch) in batches of 2B
class Permutation(Sampler):
    epoch = 0

    def __iter__(self):
        generator = ember.Generator()  # DistributedSampler's shuffle: torch's randperm seeded seed + epoch
        generator.manual_seed(7 + Permutation.epoch)
        return iter(ember.randperm(N, generator=generator).tolist())

    def __len__(self):
        return N


def set_epoch(epoch, logs):
    Permutation.epoch = epoch


ref2 = Model(net())
ref2.configure("sgd", "mse", ["mae"], lr=0.1)
ref2_w, ref2_b = [], []
ref2.fit(DataLoader(TensorDataset(X, Y), batch_size=2 * B, sampler=Permutation()), epochs=3, verbose=0,
         callbacks=[LambdaCallback(on_epoch_begin=set_epoch), recorder(ref2, ref2_w, ref2_b)])
with strategy.scope():
    model2 = Model(net())
    model2.configure("sgd", "mse", ["mae"], lr=0.1)
w2, b2 = [], []
model2.fit(DataLoader(TensorDataset(X, Y), batch_size=B, shuffle=True), epochs=3, verbose=0,
           callbacks=[recorder(model2, w2, b2)])
for epoch, (mine, theirs) in enumerate(zip(w2, ref2_w)):
    for i, (a, t) in enumerate(zip(mine, theirs)):
        close(a, t, f"shuffled epoch {epoch} parameter {i}")
close([x[0] for x in b2], [x[0] for x in ref2_b], "shuffled batch losses")
assert not np.allclose(w2[0][0], w[0][0])  # the shuffle did change the run

# 4. a DataLoader whose sampler cannot be sharded is refused with the fix (on every rank: no hang)
try:
    model2.fit(DataLoader(TensorDataset(X, Y), batch_size=B, sampler=Permutation()), verbose=0)
except ValueError as error:
    assert "DistributedSampler" in str(error), error
else:
    raise AssertionError("a custom sampler was accepted")

everyone = strategy.group.comm.allgather([p.detach().numpy() for p in model2.module.parameters()])
for a, t in zip(everyone[0], everyone[1]):
    np.testing.assert_array_equal(a, t)
print(f"rank {rank}: fit exact ok", flush=True)
