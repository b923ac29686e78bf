"""``DataLoader``: batches from a dataset, optionally prepared by worker processes.

``num_workers > 0`` starts that many worker *processes*, as PyTorch does (``process_pool.py``,
``worker_process.py``): Python-heavy per-item work runs in parallel, and batches come back through
shared memory (``shared_batch.py``). At most ``num_workers * prefetch_factor`` batches are in flight.
Batches come back in sampler order, so the result equals ``num_workers=0`` exactly (random
transforms included, see ``worker.py``). A worker's exception is re-raised in the main process with
the worker's traceback in its message; a worker that dies is a RuntimeError naming its pid.

``multiprocessing_context="thread"`` (an ember extension) uses threads instead: no pickling of the
dataset and no start-up cost, which suits loading that releases the GIL (NumPy, file I/O) and
datasets that cannot be pickled.

Example:
    >>> import ember
    >>> from ember.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(ember.arange(10.0)), batch_size=4, num_workers=2)
    >>> [b[0].tolist() for b in loader]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]]
"""
from __future__ import annotations

import queue
import sys
import threading
import traceback
from typing import Any, Callable, Generic, Iterator, TypeVar

import numpy as np

from ember.data.collate import default_collate, default_convert
from ember.data.dataset import Dataset, IterableDataset
from ember.data.sampler import BatchSampler, RandomSampler, SequentialSampler
from ember.data.worker import WorkerInfo, _set_batch_seed, _set_worker_info, get_worker_info  # noqa: F401
from ember.data.worker_process import Fetcher
from ember import random as ember_random
from ember.profiler import _recorder

_PIN_MEMORY_HOOK: Callable[[Any, str], Any] | None = None


def set_pin_memory_hook(hook: Callable[[Any, str], Any] | None) -> None:
    """Install the function that pins a batch (``hook(batch, device) -> batch``); GPU backends fill it.

    Without a hook ``pin_memory=True`` is a no-op, which is right on CPU-only machines.
    """
    global _PIN_MEMORY_HOOK
    _PIN_MEMORY_HOOK = hook


class _ExceptionWrapper:
    """An exception caught in a loader thread, with its traceback text, to re-raise in the main thread."""

    def __init__(self, where: str) -> None:
        exc_type, exc, _ = sys.exc_info()
        self.exc_type = exc_type
        self.message = "".join(traceback.format_exception(*sys.exc_info()))
        self.where = where
        self.original = exc

    def reraise(self) -> None:
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.message}"
        if self.exc_type is KeyError:  # KeyError would repr() the message and mangle the newlines
            raise RuntimeError(msg) from self.original
        try:
            exception = self.exc_type(msg)
        except Exception:
            raise RuntimeError(msg) from self.original
        raise exception from self.original


T_co = TypeVar("T_co", covariant=True)


class DataLoader(Generic[T_co]):  # Generic as PyTorch's (DataLoader[Tensor] in type hints)
    """Iterate a dataset in batches: ``for x, y in DataLoader(ds, batch_size=64, shuffle=True): ...``.

    Matches ``torch.utils.data.DataLoader``'s arguments and behaviour: ``num_workers`` processes
    started with ``multiprocessing_context`` (None: the platform default, a start method name or a
    context; ``"thread"`` for threads), seeded ``base_seed + worker_id`` (``get_worker_info()``),
    kept across epochs with ``persistent_workers``. ``pin_memory`` is a no-op on CPU.
    """

    def __init__(self, dataset: Dataset, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False, drop_last: bool = False,
                 timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Any = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "", in_order: bool = True) -> None:
        if num_workers < 0:
            raise ValueError("DataLoader: num_workers option should be non-negative; use num_workers=0 to load "
                             "in the main thread")
        if timeout < 0:
            raise ValueError("DataLoader: timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified with num_workers > 0")
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError(f"DataLoader: prefetch_factor should be >= 1, got {prefetch_factor}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if num_workers > 0 and multiprocessing_context != "thread":
            from ember.data.process_pool import get_context

            get_context(multiprocessing_context)  # a bad start method is refused here, not in the first epoch
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if prefetch_factor is None and num_workers > 0 else prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.persistent_workers = persistent_workers
        self.in_order = in_order
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        self._pool: Any = None  # persistent worker processes, made on the first epoch

        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler/batch_sampler")
        elif shuffle not in (None, False) and sampler is not None:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._user_collate = collate_fn is not None and collate_fn is not default_collate
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self.batch_sampler is not None else self.sampler

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self._index_sampler)

    def __iter__(self) -> Iterator[Any]:
        # One draw per epoch, as torch draws _base_seed (before the sampler draws its own seed on the first
        # batch): seeds the per-batch streams of random transforms and keeps the default stream in step with torch.
        base_seed = ember_random.draw_seed(self.generator)
        batches = self._batches(base_seed)

        if _recorder.CURRENT is not None:  # inside a profile: each wait for a batch becomes an event
            return _recorder.timed_batches(batches)
        return batches

    def _batches(self, base_seed: int) -> Iterator[Any]:
        if self.num_workers == 0:
            return self._serial_iter(base_seed)
        if self.multiprocessing_context == "thread":
            return _ThreadedStreamIter(self, base_seed) if self._iterable else _ThreadedMapIter(self, base_seed)
        from ember.data.process_pool import ProcessIter, WorkerPool

        if not self.persistent_workers:
            return ProcessIter(self, WorkerPool(self, base_seed), base_seed, owns_pool=True)
        if self._pool is None or self._pool.closed:
            self._pool = WorkerPool(self, base_seed)  # worker seeds come from the first epoch, as in torch
        return ProcessIter(self, self._pool, base_seed, owns_pool=False)

    def __del__(self) -> None:
        pool = self.__dict__.get("_pool")
        if pool is not None:
            try:
                pool.shutdown()
            except Exception:
                pass

    # ---- building one batch (runs in the main thread or a loader thread) -------------------------
    def _fetcher(self) -> Fetcher:
        return Fetcher(self.dataset, self.collate_fn, self._auto_collation, self._user_collate, self.batch_size,
                       self.drop_last)

    def _fetch(self, indices: Any) -> Any:
        """Collate the samples at ``indices`` (a batch) or the one sample at ``indices``."""
        return self._fetcher().fetch(indices)

    def _finish(self, batch: Any) -> Any:
        if self.pin_memory and _PIN_MEMORY_HOOK is not None:
            return _PIN_MEMORY_HOOK(batch, self.pin_memory_device)
        return batch

    def _stream_batches(self) -> Iterator[Any]:
        """Collated batches of an IterableDataset, in order."""
        return self._fetcher().stream_batches()

    def _serial_iter(self, base_seed: int) -> Iterator[Any]:
        # Without workers, transforms draw from the default generator, as in PyTorch (``base_seed`` seeds
        # only the workers' per-batch generators).
        if self._iterable:
            yield from (self._finish(batch) for batch in self._stream_batches())
            return
        for indices in self._index_sampler:
            yield self._finish(self._fetch(indices))

    def __repr__(self) -> str:
        return (f"DataLoader(dataset={type(self.dataset).__name__}, batch_size={self.batch_size}, "
                f"num_workers={self.num_workers})")


def _init_worker(loader: DataLoader, worker_id: int, base_seed: int) -> None:
    _set_worker_info(WorkerInfo(worker_id, loader.num_workers, base_seed + worker_id, loader.dataset))
    if loader.worker_init_fn is not None:
        loader.worker_init_fn(worker_id)


def _map_worker(loader: DataLoader, worker_id: int, base_seed: int, tasks: queue.Queue, results: dict,
                cond: threading.Condition, stop: threading.Event) -> None:
    """Take (batch index, indices) tasks, build the batch, file it under its index."""
    try:
        _init_worker(loader, worker_id, base_seed)
    except BaseException:
        with cond:
            results[-1] = (False, _ExceptionWrapper(f"in worker_init_fn of DataLoader worker thread {worker_id}"))
            cond.notify_all()
        return
    while True:
        task = tasks.get()
        if task is None or stop.is_set():
            break
        index, indices = task
        try:
            _set_batch_seed(base_seed, index)
            out = (True, loader._finish(loader._fetch(indices)))
        except BaseException:
            out = (False, _ExceptionWrapper(f"in DataLoader worker thread {worker_id}"))
        finally:
            _set_batch_seed(None, 0)
        with cond:
            results[index] = out
            cond.notify_all()
        del out  # don't keep the last batch alive while waiting for the next task


class _ThreadedMapIter:
    """Batches of a map-style dataset built by ``num_workers`` threads, yielded in sampler order."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        self._loader = loader
        self._timeout = loader.timeout or None
        self._index_iter = iter(loader._index_sampler)
        self._tasks: queue.Queue = queue.Queue()
        self._results: dict = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._sent = 0
        self._received = 0
        self._exhausted = False
        self._shut = False
        self._threads = [
            threading.Thread(target=_map_worker, name=f"ember-dataloader-{i}", daemon=True,
                             args=(loader, i, base_seed, self._tasks, self._results, self._cond, self._stop))
            for i in range(loader.num_workers)
        ]
        for thread in self._threads:
            thread.start()
        for _ in range(loader.num_workers * loader.prefetch_factor):
            self._send_next()

    def _send_next(self) -> None:
        if self._exhausted:
            return
        try:
            indices = next(self._index_iter)
        except StopIteration:
            self._exhausted = True
            return
        self._tasks.put((self._sent, indices))
        self._sent += 1

    def __iter__(self) -> "_ThreadedMapIter":
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        if self._received >= self._sent:
            self._shutdown()
            raise StopIteration
        with self._cond:
            ready = (lambda: self._received in self._results or -1 in self._results) if self._loader.in_order \
                else (lambda: bool(self._results))
            if not self._cond.wait_for(ready, timeout=self._timeout):
                self._shutdown()
                raise RuntimeError(f"DataLoader timed out after {self._loader.timeout} seconds waiting for batch "
                                   f"{self._received}")
            key = -1 if -1 in self._results else (self._received if self._loader.in_order
                                                  else next(iter(self._results)))
            ok, payload = self._results.pop(key)
        self._received += 1
        if not ok:
            self._shutdown()
            payload.reraise()
        self._send_next()
        return payload

    def _shutdown(self) -> None:
        if self._shut:
            return
        self._shut = True
        self._stop.set()
        try:  # drop queued work so threads exit after their current batch
            while True:
                self._tasks.get_nowait()
        except queue.Empty:
            pass
        for _ in self._threads:
            self._tasks.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=5.0)

    close = _shutdown

    def __del__(self) -> None:  # a ``break`` out of the loop drops the iterator: stop the threads
        try:
            self._shutdown()
        except Exception:
            pass


def _stream_worker(loader: DataLoader, base_seed: int, out: queue.Queue, stop: threading.Event) -> None:
    """One producer thread for an IterableDataset (a stream has one order, so one reader)."""

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        _init_worker(loader, 0, base_seed)
        batches = loader._stream_batches()
        index = 0
        while not stop.is_set():
            _set_batch_seed(base_seed, index)
            try:
                batch = next(batches)
            except StopIteration:
                break
            index += 1
            if not put((True, loader._finish(batch))):
                return
            del batch
    except BaseException:
        put((False, _ExceptionWrapper("in DataLoader worker thread 0")))
        return
    finally:
        _set_batch_seed(None, 0)
    put(None)


class _ThreadedStreamIter:
    """An IterableDataset read ahead by one background thread into a bounded queue."""

    def __init__(self, loader: DataLoader, base_seed: int) -> None:
        self._loader = loader
        self._queue: queue.Queue = queue.Queue(maxsize=loader.num_workers * loader.prefetch_factor)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=_stream_worker, name="ember-dataloader-stream", daemon=True,
                                        args=(loader, base_seed, self._queue, self._stop))
        self._thread.start()

    def __iter__(self) -> "_ThreadedStreamIter":
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        try:
            item = self._queue.get(timeout=self._loader.timeout or None)
        except queue.Empty:
            self._shutdown()
            raise RuntimeError(f"DataLoader timed out after {self._loader.timeout} seconds") from None
        if item is None:
            self._shutdown()
            raise StopIteration
        ok, payload = item
        if not ok:
            self._shutdown()
            payload.reraise()
        return payload

    def _shutdown(self) -> None:
        self._done = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    close = _shutdown

    def __del__(self) -> None:
        try:
            self._shutdown()
        except Exception:
            pass
