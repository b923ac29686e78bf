"""Run under mpiexec -n 2 with a shared folder as argv[1]: rank-0-only checkpoints/TensorBoard/CSV/progress,
EarlyStopping that stops every rank at the epoch a single process stops at, and a rank-local stop request
that stops both ranks at the same batch."""
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from harness import abort_on_error  # noqa: E402

abort_on_error()
import numpy as np

import ember
from ember.train import (CSVLogger, DataParallelStrategy, EarlyStopping, LambdaCallback, Model, ModelCheckpoint,
                         TensorBoard)

strategy = DataParallelStrategy()
rank = strategy.rank
root = Path(sys.argv[1])
rng = np.random.default_rng(1)
X = ember.from_numpy(rng.standard_normal((32, 4)))
Y = ember.from_numpy(rng.standard_normal((32, 2)))
XV = ember.from_numpy(rng.standard_normal((10, 4)))
YV = ember.from_numpy(rng.standard_normal((10, 2)))


def net():
    ember.manual_seed(5)
    return ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2)).double()


# 1. files: each rank is pointed at its own folder, so a write by rank 1 would show
mine = root / f"rank{rank}"
with strategy.scope():
    model = Model(net())
    model.configure("sgd", "mse", lr=0.05)
print(f"rank {rank}: before fit", flush=True)
model.fit(X, Y, batch_size=4, epochs=2, verbose=2,
          callbacks=[ModelCheckpoint(mine / "ckpt{epoch}.ember"), CSVLogger(mine / "log.csv"),
                     TensorBoard(mine / "tb"), EarlyStopping(monitor="loss", patience=5, verbose=1)])
model.save_checkpoint(mine / "manual.ember")
strategy.barrier()
if rank == 0:
    assert sorted(p.name for p in (root / "rank0").iterdir()) == ["ckpt1.ember", "ckpt2.ember", "log.csv",
                                                                  "manual.ember", "tb"], list(mine.iterdir())
    assert not (root / "rank1").exists(), list((root / "rank1").rglob("*"))
    # the checkpoint holds the plain network's weights (no DDP "module." prefix): loads in one process
    single = Model(net())
    single.configure("sgd", "mse")
    single.load_checkpoint(root / "rank0" / "ckpt2.ember")
    for a, t in zip(single.module.parameters(), model.module.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), t.detach().numpy())
strategy.barrier()

# 2. EarlyStopping on val_loss with a step size that makes training diverge: every rank stops at the
#    epoch a single process (global batch 8) stops at
ref = Model(net())
ref.configure("sgd", "mse", lr=1.2)
ref_stop = EarlyStopping(monitor="val_loss", patience=1)
ref_hist = ref.fit(X, Y, batch_size=8, epochs=30, shuffle=False, verbose=0, validation_data=(XV, YV),
                   callbacks=[ref_stop])
with strategy.scope():
    model = Model(net())
    model.configure("sgd", "mse", lr=1.2)
stop = EarlyStopping(monitor="val_loss", patience=1)
hist = model.fit(X, Y, batch_size=4, epochs=30, shuffle=False, verbose=0, validation_data=(XV, YV), callbacks=[stop])
assert 0 < ref_stop.stopped_epoch < 29, ref_stop.stopped_epoch
assert stop.stopped_epoch == ref_stop.stopped_epoch, (rank, stop.stopped_epoch, ref_stop.stopped_epoch)
assert len(hist.epoch) == len(ref_hist.epoch)
np.testing.assert_allclose(hist.history["val_loss"], ref_hist.history["val_loss"], rtol=1e-10)

# 3. a callback that asks to stop on rank 1 only (a rank-local decision) stops both ranks at that batch
batches = []


def maybe_stop(batch, logs):
    batches.append(batch)
    if rank == 1 and batch == 2:
        model.stop_training = True


model.fit(X, Y, batch_size=4, epochs=3, verbose=0, callbacks=[LambdaCallback(on_train_batch_end=maybe_stop)])
assert batches == [0, 1, 2], (rank, batches)
print(f"rank {rank}: fit callbacks ok", flush=True)
