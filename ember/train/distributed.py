"""``DataParallelStrategy``: Keras-style multi-process data parallelism for ``ember.train.Model``.

ember's answer to ``tf.distribute.MirroredStrategy``: one process per replica, on MPI. Launch the
script with ``python -m ember.distributed.run -n N script.py`` (or ``mpiexec -n N python script.py``);
every process runs the whole script, and the strategy makes ``fit``/``evaluate``/``predict`` cooperate.

Design (one rule): a ``Model`` belongs to the strategy that was current when it was *built*, either
``with strategy.scope(): model = Model(net)`` (Keras's spelling) or ``Model(net, strategy=strategy)``;
an explicit ``strategy=`` wins over the scope. Building the Model wraps the network in
``DistributedDataParallel`` at once (rank 0's weights are broadcast), so every rank must build its
Models in the same order. ``model.module`` stays the plain network (checkpoints have no ``module.``
prefix and load in a single process).

What ``fit`` does under the strategy:

* ``batch_size`` is the **per-replica** batch (PyTorch's DDP convention; Keras divides a global batch):
  the global batch is ``batch_size * strategy.num_replicas_in_sync``. Scale the learning rate yourself.
* Each epoch's training data is sharded with ``DistributedSampler`` (seeded by ``seed``; ``set_epoch``
  every epoch, so a resumed run reshuffles exactly as the original). A short last shard is padded by
  wrapping around, as torch does, so every rank takes the same number of steps.
* A ``DataLoader`` you pass is re-wrapped: its dataset, batch size, collate_fn, workers and drop_last
  are kept, its ``SequentialSampler``/``RandomSampler`` becomes an unshuffled/shuffled
  ``DistributedSampler``; one that already has a ``DistributedSampler`` is used as is. A custom sampler,
  batch_sampler or an ``IterableDataset`` cannot be sharded safely and raises a ``ValueError``.
* Loss and metrics are all-reduced after every training batch, so every rank's logs (batch and epoch)
  are the global figures; callbacks therefore decide alike, and ``stop_training`` is OR-ed across
  ranks after every batch and epoch, so a stop on one rank stops all (a rank-local stop would hang
  the others in the next all-reduce).
* Progress bars, ``TensorBoard``, ``ModelCheckpoint`` and ``CSVLogger`` (callbacks with
  ``chief_only = True``) run on rank 0 only; ``Model.save_checkpoint`` writes on rank 0 only; other
  ranks' stdout is silenced during fit/evaluate/predict (``silence_workers=False`` to keep it).

``evaluate`` splits the data into contiguous, unpadded shards and all-reduces the loss/metric sums:
the result is the global figure on every rank. ``predict`` returns the full predictions, in input
order, on **every** rank. Under both, ``steps`` counts per-replica batches.

Example (``python -m ember.distributed.run -n 2 train.py``):
    >>> import ember                                                    # doctest: +SKIP
    >>> from ember.train import DataParallelStrategy, Model             # doctest: +SKIP
    >>> strategy = DataParallelStrategy()                               # doctest: +SKIP
    >>> with strategy.scope():                                          # doctest: +SKIP
    ...     model = Model(ember.nn.Linear(4, 2))
    ...     _ = model.configure("sgd", "cross_entropy", ["accuracy"])
    >>> model.fit(x, y, batch_size=32, epochs=3)   # 32 per replica      # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import functools
import io
import os
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from ember import distributed as dist
from ember.creation import from_numpy
from ember.data import DataLoader, DistributedSampler
from ember.data.sampler import BatchSampler, RandomSampler, SequentialSampler
from ember.distributed.process_group import default_group
from ember.nn.modules.module import Module
from ember.nn.parallel import DistributedDataParallel

_CURRENT: list["DataParallelStrategy"] = []


def get_strategy() -> "DataParallelStrategy | None":
    """The strategy whose ``scope()`` is open, or None."""
    return _CURRENT[-1] if _CURRENT else None


class _ShardSampler:
    """Contiguous, unpadded block ``rank`` of ``range(n)`` split into ``replicas`` parts (evaluate/predict)."""

    def __init__(self, n: int, replicas: int, rank: int) -> None:
        # array_split's rule: the first n % replicas blocks get one more sample
        sizes = [n // replicas + (1 if r < n % replicas else 0) for r in range(replicas)]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        self.start, self.stop = int(bounds[rank]), int(bounds[rank + 1])

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.stop))

    def __len__(self) -> int:
        return self.stop - self.start


class DataParallelStrategy:
    """Synchronous data parallelism across the processes of an MPI job (Keras's ``MirroredStrategy`` role).

    ``seed`` seeds the per-epoch shuffle of the training shards (the same on every rank).
    ``silence_workers`` hides non-chief ranks' stdout during fit/evaluate/predict. ``abort_on_error``
    is kept for compatibility: ``init_process_group`` always makes an uncaught exception on any rank
    abort the whole job, and a rank that ends early an error on the others (ember.distributed.watchdog). ``bucket_cap_mb`` and
    ``find_unused_parameters`` go to ``DistributedDataParallel``.

    The process group is joined if it is not already: ``'gloo'`` by env:// under a torchrun-style launcher
    (RANK and MASTER_ADDR set, no MPI launcher), else ``'mpi'``.
    """

    def __init__(self, seed: int = 0, silence_workers: bool = True, abort_on_error: bool = True,
                 bucket_cap_mb: float = 25.0, find_unused_parameters: bool = False) -> None:

        if not dist.is_initialized():
            # a torchrun-style launch (RANK and MASTER_ADDR, no MPI launcher) joins by env://, else MPI
            env = os.environ
            torchrun = "RANK" in env and "MASTER_ADDR" in env and not env.get("PMI_RANK")
            dist.init_process_group("gloo" if torchrun else "mpi")
        self.group = default_group(None, "DataParallelStrategy")
        self.seed = int(seed)
        self.silence_workers = silence_workers
        self.bucket_cap_mb = bucket_cap_mb
        self.find_unused_parameters = find_unused_parameters
        self._replicas: dict[int, Any] = {}

    # ---- who am I ---------------------------------------------------------------------------------
    @property
    def num_replicas_in_sync(self) -> int:
        """The number of replicas (processes) training together (Keras's name)."""
        return self.group.size()

    @property
    def rank(self) -> int:
        """This process's replica index, 0 .. num_replicas_in_sync - 1."""
        return self.group.rank()

    @property
    def is_chief(self) -> bool:
        """True on rank 0, the replica that prints, logs and writes checkpoints."""
        return self.rank == 0

    def __repr__(self) -> str:
        return f"DataParallelStrategy(rank={self.rank}, num_replicas_in_sync={self.num_replicas_in_sync})"

    @contextlib.contextmanager
    def scope(self) -> Iterator["DataParallelStrategy"]:
        """Models built inside this block train under the strategy."""
        _CURRENT.append(self)
        try:
            yield self
        finally:
            _CURRENT.remove(self)

    # ---- model --------------------------------------------------------------------------------------
    def wrap_module(self, module: Any) -> Any:
        """``DistributedDataParallel(module)``: broadcasts rank 0's weights; gradients get averaged."""

        if not isinstance(module, Module):
            raise TypeError(f"DataParallelStrategy: the Model's network must be an ember.nn.Module to be "
                            f"replicated, got {type(module).__name__}")
        # One DDP per network: DDP's gradient hooks live on the parameters, so a second wrapper of the
        # same network (a second Model around it) would all-reduce every gradient twice.
        known = self._replicas.get(id(module))
        if known is not None and known.module is module:
            return known
        ddp = DistributedDataParallel(module, process_group=self.group, bucket_cap_mb=self.bucket_cap_mb,
                                      find_unused_parameters=self.find_unused_parameters)
        self._replicas[id(module)] = ddp
        return ddp

    # ---- data ---------------------------------------------------------------------------------------
    def distribute_loader(self, loader: Any, train: bool) -> Any:
        """This rank's share of ``loader``: a padded, optionally shuffled ``DistributedSampler`` for
        training, a contiguous unpadded block for evaluation/prediction."""

        if isinstance(loader.sampler, DistributedSampler):
            return loader
        where = "fit" if train else "evaluate/predict"
        if loader._iterable:
            raise ValueError(f"Model.{where} under DataParallelStrategy: an IterableDataset cannot be sharded "
                             "automatically; pass a map-style Dataset, or shard the stream per rank yourself "
                             "(strategy.rank, strategy.num_replicas_in_sync) and wrap it in a DataLoader with a "
                             "DistributedSampler")
        sampler_ok = type(loader.sampler) in (SequentialSampler, RandomSampler) and \
            not getattr(loader.sampler, "replacement", False)
        if not sampler_ok or type(loader.batch_sampler) is not BatchSampler:
            raise ValueError(
                f"Model.{where} under DataParallelStrategy: the DataLoader uses a custom "
                f"{'sampler ' + type(loader.sampler).__name__ if not sampler_ok else 'batch_sampler'}, which "
                "cannot be sharded across replicas safely; build the DataLoader with "
                "sampler=ember.data.DistributedSampler(dataset) (then it is used as is), or with "
                "shuffle=True/False only")
        dataset = loader.dataset
        if train:
            sampler: Any = DistributedSampler(dataset, self.num_replicas_in_sync, self.rank,
                                              shuffle=isinstance(loader.sampler, RandomSampler), seed=self.seed)
        else:
            sampler = _ShardSampler(len(dataset), self.num_replicas_in_sync, self.rank)
        return DataLoader(dataset, batch_size=loader.batch_size, sampler=sampler, num_workers=loader.num_workers,
                          collate_fn=loader.collate_fn if loader._user_collate else None,
                          drop_last=loader.drop_last, generator=loader.generator,
                          worker_init_fn=loader.worker_init_fn, pin_memory=loader.pin_memory)

    @staticmethod
    def set_epoch(loader: Any, epoch: int) -> None:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)

    # ---- reductions ---------------------------------------------------------------------------------
    def all_sum(self, values: Sequence[float]) -> np.ndarray:
        """Element-wise sum of a float64 vector over the replicas (every rank gets the result)."""

        buffer = np.array(values, dtype=np.float64)
        if self.num_replicas_in_sync > 1:  # through ember's collective: watched, never a hang
            dist.all_reduce(from_numpy(buffer), group=self.group)
        return buffer

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is True on any rank."""
        return bool(self.all_sum([1.0 if flag else 0.0])[0] > 0)

    def reduce_logs(self, loss_mean: Any, metrics: Sequence[Any], seen: int, size: int) -> tuple[dict, int]:
        """Global running loss/metrics from each rank's running sums, and the global batch size.

        A metric contributes its additive ``state()``; one without (a custom ``Metric``) contributes
        its running result weighted by the samples this rank saw, which is exact for per-sample means.
        """
        parts: list[float] = [float(size), float(seen), loss_mean.total, float(loss_mean.count)]
        layout: list[tuple[Any, int, bool]] = []
        for metric in metrics:
            state = metric.state()
            fallback = state is None
            if fallback:
                state = [metric.result() * seen if seen else 0.0, float(seen)]
            layout.append((metric, len(state), fallback))
            parts.extend(float(v) for v in state)
        total = self.all_sum(parts)
        logs = {"loss": total[2] / total[3] if total[3] else float("nan")}
        offset = 4
        for metric, n, fallback in layout:
            state = total[offset:offset + n]
            offset += n
            if fallback:
                logs[metric.name] = float(state[0] / state[1]) if state[1] else float("nan")
            else:
                logs[metric.name] = float(metric.result_from_state(state))
        return {k: float(v) for k, v in logs.items()}, int(total[0])

    def gather_outputs(self, outputs: list) -> Any:
        """Concatenate this rank's batch outputs, gather every rank's block and join them in rank order
        (contiguous shards, so this is input order); every rank gets the whole result."""
        def host(items: list) -> np.ndarray | None:
            return np.concatenate([np.asarray(o.detach().cpu()) for o in items]) if items else None

        tupled = bool(outputs) and isinstance(outputs[0], (tuple, list))
        kind = type(outputs[0]) if tupled else None
        mine = [host([o[i] for o in outputs]) for i in range(len(outputs[0]))] if tupled else host(outputs)

        everyone: list = [None] * self.num_replicas_in_sync
        dist.all_gather_object(everyone, (tupled, kind, mine), group=self.group)
        shapes = [entry for entry in everyone if entry[2] is not None]
        if not shapes:
            raise ValueError("Model.predict: no batches on any replica (empty input)")
        tupled, kind = shapes[0][0], shapes[0][1]
        if tupled:
            width = len(shapes[0][2])
            return kind(from_numpy(np.concatenate([e[2][i] for e in shapes])) for i in range(width))
        return from_numpy(np.concatenate([e[2] for e in shapes]))

    def barrier(self) -> None:
        dist.barrier(group=self.group)

    @contextlib.contextmanager
    def worker_output(self) -> Iterator[None]:
        """Silence stdout on non-chief ranks (when ``silence_workers``)."""
        if self.is_chief or not self.silence_workers:
            yield
            return
        with contextlib.redirect_stdout(io.StringIO()):
            yield


def quiet_on_workers(method: Callable) -> Callable:
    """Decorator for Model methods: run with non-chief ranks' stdout silenced under a strategy."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        strategy = getattr(self, "strategy", None)
        if strategy is None:
            return method(self, *args, **kwargs)
        with strategy.worker_output():
            return method(self, *args, **kwargs)

    return wrapper
