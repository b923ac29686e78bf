"""The body of a DataLoader worker process: seed, run ``worker_init_fn``, then build batches on request.

The main process sends tasks on the worker's own queue: ``("epoch", epoch, batch_seed)`` starts an
epoch (an IterableDataset restarts its iterator), ``("batch", epoch, index, indices)`` asks for one
batch, ``None`` stops. Each answer goes back on the worker's pipe as bytes from
:mod:`ember.data.shared_batch` (big arrays in shared memory): ``(epoch, index, "ok", batch)``,
``(epoch, index, "end", None)`` when an IterableDataset ran out, or ``(epoch, index, "error", error)``.

Seeding follows PyTorch: the worker's seed is ``base_seed + worker_id``, and Python's ``random``,
NumPy's global generator and ember's default generator are seeded from it before
``worker_init_fn`` runs. Random transforms that draw through ``ember.data.worker.data_rng`` get a
stream per batch instead (seeded by the epoch's seed and the batch index), so augmentations are the
same for any ``num_workers``.
"""
from __future__ import annotations

import os
import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ember.data import shared_batch
from ember.data.worker import WorkerInfo, _set_batch_seed, _set_worker_info
from ember import random as ember_random

PARENT_CHECK_S = 1.0  # how often an idle worker checks that the main process is still there


@dataclass
class Fetcher:
    """How a batch is made from a dataset: what a worker needs of the DataLoader (and nothing else)."""

    dataset: Any
    collate_fn: Callable
    auto_collation: bool
    user_collate: bool
    batch_size: int | None
    drop_last: bool

    def fetch(self, indices: Any) -> Any:
        """Collate the samples at ``indices`` (a batch) or the one sample at ``indices``."""
        dataset = self.dataset
        if not self.auto_collation:
            return self.collate_fn(dataset[indices])
        if not self.user_collate and hasattr(dataset, "get_batch"):
            return dataset.get_batch(np.asarray(indices, dtype=np.int64))
        if hasattr(dataset, "__getitems__"):
            return self.collate_fn(dataset.__getitems__(list(indices)))
        return self.collate_fn([dataset[i] for i in indices])

    def stream_batches(self) -> Iterator[Any]:
        """Collated batches of an IterableDataset, in order."""
        if not self.auto_collation:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch: list = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)


class WorkerError:
    """A worker's exception, as text plus its type, re-raised in the main process as torch does."""

    def __init__(self, where: str) -> None:
        kind, value, tb = sys.exc_info()
        self.exc_type = kind
        self.message = "".join(traceback.format_exception(kind, value, tb))
        self.where = where

    def reraise(self) -> None:
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.message}"
        if self.exc_type is KeyError:  # KeyError would repr() the message and mangle the newlines
            raise RuntimeError(msg)
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from None
        raise exception


def seed_worker(seed: int, worker_id: int, base_seed: int) -> None:
    """Seed Python, NumPy's global generator and ember, as torch's workers do."""
    random.seed(seed)
    ember_random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))


def _send(conn: Any, message: tuple) -> None:
    try:
        data = shared_batch.dumps(message)
    except Exception:  # e.g. a batch holding something that cannot be pickled: report it, don't die
        epoch, index = message[0], message[1]
        data = shared_batch.dumps((epoch, index, "error", WorkerError(
            f"in DataLoader worker process while sending batch {index} to the main process (it must be "
            "picklable)")))
    conn.send_bytes(data)


def worker_loop(fetcher: Fetcher, iterable: bool, worker_id: int, num_workers: int, base_seed: int,
                worker_init_fn: Callable[[int], None] | None, tasks: Any, conn: Any, parent_pid: int) -> None:
    """Run in the worker process until told to stop or the main process is gone."""
    try:
        seed = base_seed + worker_id
        seed_worker(seed, worker_id, base_seed)
        _set_worker_info(WorkerInfo(worker_id, num_workers, seed, fetcher.dataset))
        failed_init = None
        try:
            if worker_init_fn is not None:
                worker_init_fn(worker_id)
        except Exception:
            failed_init = picklable_error(WorkerError(f"in worker_init_fn of DataLoader worker process {worker_id}"))
        epoch, batch_seed, stream = -1, 0, None
        while True:
            try:
                task = tasks.get(timeout=PARENT_CHECK_S)
            except queue.Empty:
                if os.getppid() != parent_pid:  # the main process died: nobody will read our batches
                    return
                continue
            if task is None:
                return
            if task[0] == "epoch":
                _, epoch, batch_seed = task
                stream = None
                continue
            _, task_epoch, index, indices = task
            if failed_init is not None:
                _send(conn, (task_epoch, index, "error", failed_init))
                continue
            try:
                _set_batch_seed(batch_seed, index)
                if iterable:
                    if stream is None:
                        stream = fetcher.stream_batches()
                    try:
                        batch = next(stream)
                    except StopIteration:
                        _send(conn, (task_epoch, index, "end", None))
                        continue
                else:
                    batch = fetcher.fetch(indices)
                message: tuple = (task_epoch, index, "ok", batch)
            except Exception:
                message = (task_epoch, index, "error",
                           picklable_error(WorkerError(f"in DataLoader worker process {worker_id}")))
            finally:
                _set_batch_seed(None, 0)
            _send(conn, message)
            del message
    except KeyboardInterrupt:  # Ctrl-C reaches every process of the group: the main process reports it
        return
    finally:
        try:
            conn.close()
        except OSError:
            pass


def picklable_error(error: WorkerError) -> WorkerError:
    """``error`` with a type the main process can unpickle (a local exception class becomes RuntimeError)."""
    try:
        pickle.loads(pickle.dumps(error.exc_type))  # noqa: S301 - our own object
    except Exception:
        error.exc_type = RuntimeError
    return error
