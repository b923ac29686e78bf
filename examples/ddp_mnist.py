"""Data-parallel training of the MNIST CNN with ember's Keras-style API, on the MNIST subset carried
inside ember (offline). TensorFlow's lecture version is

    strategy = tf.distribute.MirroredStrategy()
    with strategy.scope():
        model = ...; model.compile(...)
    model.fit(...)

and ember's is the same shape, with one process per replica:

    python -m ember.distributed.run -n 2 examples/ddp_mnist.py            # 2 replicas
    python -m ember.distributed.run -n 2 examples/ddp_mnist.py --limit 512 --epochs 1   # a quick run
    python examples/ddp_mnist.py                                          # 1 replica works too

``--batch-size`` is per replica (the global batch is batch_size * replicas), so the learning rate is
scaled by the number of replicas. Rank 0 prints the progress, writes the checkpoint and TensorBoard logs.
"""
import argparse
import tempfile
from pathlib import Path

import ember
import ember.distributed as dist
from ember.data import Subset
from ember.train import DataParallelStrategy, LearningRateScheduler, Model, ModelCheckpoint, TensorBoard
from ember.train.mnist import build_cnn, load_data

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64, help="per replica (default 64)")
parser.add_argument("--lr", type=float, default=1e-3, help="for one replica; scaled by the replica count")
parser.add_argument("--limit", type=int, default=None, help="train/test on the first N images only")
parser.add_argument("--steps", type=int, default=None, help="at most this many steps per epoch (per replica)")
parser.add_argument("--out", default=None, help="run folder (default: a temporary one)")
args = parser.parse_args()

strategy = DataParallelStrategy()  # joins the MPI job that ember.distributed.run started
ember.manual_seed(0)  # the same initial weights everywhere (the strategy also broadcasts rank 0's)
train_set, test_set = load_data()
if args.limit:
    train_set = Subset(train_set, range(min(args.limit, len(train_set))))
    test_set = Subset(test_set, range(min(args.limit, len(test_set))))
# One run folder for the job: rank 0 picks it (only rank 0 writes into it) and tells the others.
folder = [args.out or (tempfile.mkdtemp(prefix="ddp_mnist-") if strategy.is_chief else None)]
dist.broadcast_object_list(folder, src=0)
out = Path(folder[0])
replicas = strategy.num_replicas_in_sync
lr = args.lr * replicas  # the global batch grows with the replicas: scale the step size with it

with strategy.scope():
    model = Model(build_cnn())
    model.configure(optimizer="adam", loss="cross_entropy", metrics=["accuracy"], lr=lr)

if strategy.is_chief:
    print(f"{replicas} replica(s), {len(train_set)} training images, global batch {args.batch_size * replicas}")
model.fit(train_set, batch_size=args.batch_size, epochs=args.epochs, steps_per_epoch=args.steps, verbose=2,
          validation_data=test_set, validation_batch_size=250,
          callbacks=[ModelCheckpoint(out / "checkpoint.ember"), TensorBoard(out / "tensorboard"),
                     LearningRateScheduler(lambda epoch: lr * 0.5 ** epoch)])
results = model.evaluate(test_set, batch_size=250, verbose=0, return_dict=True)  # the same on every rank
if strategy.is_chief:
    print(f"test loss {results['loss']:.4f}")
    print(f"test accuracy {results['accuracy']:.4f}")
    print(f"checkpoint and TensorBoard logs in {out}")
