"""DataLoader worker processes seen from the main process: start them, hand out batches, collect them in
order, notice a worker that died, and shut down without leaving processes or shared memory behind.

Each worker has its own task queue (main -> worker) and its own result pipe (worker -> main). The main
process waits on all result pipes *and* all worker sentinels at once
(``multiprocessing.connection.wait``), so a worker that dies is noticed the moment it dies, not at
the next poll. Map-style batches are handed out round-robin, at most ``prefetch_factor`` per worker
in flight, and yielded in sampler order, so the result equals ``num_workers=0``. An IterableDataset
runs in every worker (each has its own copy: shard it with ``get_worker_info()``, as in PyTorch);
batch ``i`` is asked of worker ``i % num_workers`` among those not yet exhausted.

Example:
    >>> import ember
    >>> from ember.data import DataLoader, TensorDataset
    >>> loader = DataLoader(TensorDataset(ember.arange(6.0)), batch_size=4, num_workers=2)
    >>> [b[0].tolist() for b in loader]
    [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0]]
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing import connection
from typing import Any, Iterator

from ember.data import shared_batch
from ember.data.worker_process import Fetcher, WorkerError, worker_loop

JOIN_S = 5.0  # how long shutdown waits for a worker to stop before terminating it
ERROR_GRACE_S = 0.5  # the same after an error (timeout, a dead or failing worker)
START_METHODS = ("fork", "spawn", "forkserver")


def get_context(spec: Any) -> Any:
    """The multiprocessing context for ``multiprocessing_context`` (None, a start method name, or a context)."""
    if spec is None:
        return multiprocessing.get_context()
    if isinstance(spec, str):
        if spec not in multiprocessing.get_all_start_methods():
            raise ValueError(f"DataLoader: multiprocessing_context={spec!r} is not a start method on this platform; "
                             f"use one of {multiprocessing.get_all_start_methods()}")
        return multiprocessing.get_context(spec)
    if not hasattr(spec, "Process") or not hasattr(spec, "get_start_method"):
        raise TypeError("DataLoader: multiprocessing_context must be a start method name ('fork', 'spawn', "
                        f"'forkserver') or a multiprocessing context, got {type(spec).__name__}")
    return spec


class WorkerPool:
    """``num_workers`` processes serving one DataLoader (for one epoch, or for all with persistent_workers)."""

    def __init__(self, loader: Any, base_seed: int) -> None:
        from multiprocessing import resource_tracker

        # Started here so that every worker shares it: blocks a worker made but nobody read are removed at exit.
        resource_tracker.ensure_running()
        context = get_context(loader.multiprocessing_context)
        self.num_workers = loader.num_workers
        self.iterable = loader._iterable
        fetcher = Fetcher(loader.dataset, loader.collate_fn, loader._auto_collation, loader._user_collate,
                          loader.batch_size, loader.drop_last)
        self.tasks, self.readers, self.processes = [], [], []
        self.epoch = -1
        self.closed = False
        try:
            for worker_id in range(self.num_workers):
                tasks = context.Queue()
                reader, writer = context.Pipe(duplex=False)
                process = context.Process(
                    target=worker_loop, name=f"ember-dataloader-{worker_id}", daemon=True,
                    args=(fetcher, self.iterable, worker_id, self.num_workers, base_seed, loader.worker_init_fn,
                          tasks, writer, os.getpid()))
                process.start()
                writer.close()  # the worker holds the writing end; EOF here then means it is gone
                self.tasks.append(tasks)
                self.readers.append(reader)
                self.processes.append(process)
        except BaseException:
            self.shutdown()
            raise

    def start_epoch(self, batch_seed: int) -> int:
        self.epoch += 1
        for tasks in self.tasks:
            tasks.put(("epoch", self.epoch, batch_seed))
        return self.epoch

    def ask(self, worker_id: int, index: int, indices: Any) -> None:
        self.tasks[worker_id].put(("batch", self.epoch, index, indices))

    def receive(self, timeout: float | None) -> list:
        """Messages that arrived (waiting up to ``timeout``, None: forever); raises if a worker died."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            live = [r for r in self.readers if r is not None]
            sentinels = [p.sentinel for p in self.processes]
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = connection.wait(live + sentinels, timeout=left)
            messages = []
            for reader in live:
                if reader in ready:
                    try:
                        data = reader.recv_bytes()
                    except EOFError:  # the worker closed its pipe (it is exiting): the sentinel tells why
                        continue
                    messages.append(shared_batch.loads(data))
            if messages:
                return messages
            self._check_alive()
            if deadline is not None and time.monotonic() >= deadline:
                return []

    def _check_alive(self) -> None:
        dead = [p for p in self.processes if not p.is_alive()]
        if not dead or self.closed:
            return
        details = ", ".join(_death(p) for p in dead)
        pids = ", ".join(str(p.pid) for p in dead)
        self.shutdown(grace=ERROR_GRACE_S)
        raise RuntimeError(f"DataLoader worker (pid(s) {pids}) exited unexpectedly: {details}. A worker can be "
                           "killed by the out-of-memory killer, a signal, a crash in native code or os._exit; "
                           "run with num_workers=0 to see the error in the main process")

    def shutdown(self, grace: float = JOIN_S) -> None:
        """Stop the workers (join for ``grace`` seconds, then terminate stragglers), free unread batches,
        close the pipes. Error paths pass a short grace: a worker stuck in a slow item should not delay
        the error."""
        if self.closed:
            return
        self.closed = True
        for tasks in self.tasks:
            try:
                tasks.put(None)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + grace
        for process in self.processes:
            while process.is_alive() and time.monotonic() < deadline:
                self._drain()  # a worker blocked writing a batch to a full pipe must be read to finish
                process.join(timeout=0.01)
            if process.is_alive():
                process.terminate()
                process.join(timeout=JOIN_S)
        self._drain()
        for reader in self.readers:
            if reader is not None:
                reader.close()
        self.readers = [None] * len(self.readers)
        for tasks in self.tasks:
            tasks.cancel_join_thread()
            tasks.close()
        for process in self.processes:
            try:
                process.close()
            except ValueError:  # still running (terminate failed): leave it to the OS
                pass

    def _drain(self) -> None:
        """Read and free every batch waiting in the pipes (their shared blocks go with them)."""
        for i, reader in enumerate(self.readers):
            while reader is not None:
                try:
                    if not reader.poll():
                        break
                    shared_batch.release(reader.recv_bytes())
                except (EOFError, OSError):
                    reader.close()
                    self.readers[i] = reader = None

    def __del__(self) -> None:
        try:
            self.shutdown()
        except Exception:
            pass


def _death(process: Any) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"worker {process.name} (pid {process.pid}) was killed by signal: {signal.Signals(-code).name}"
        except ValueError:
            return f"worker {process.name} (pid {process.pid}) was killed by signal {-code}"
    return f"worker {process.name} (pid {process.pid}) exited with code {code}"


class ProcessIter:
    """One epoch of a DataLoader with worker processes."""

    def __init__(self, loader: Any, pool: WorkerPool, batch_seed: int, owns_pool: bool) -> None:
        self._loader = loader
        self._pool = pool
        self._owns_pool = owns_pool
        self._epoch = pool.start_epoch(batch_seed)
        self._timeout = loader.timeout or None
        self._index_iter: Iterator | None = None if loader._iterable else iter(loader._index_sampler)
        self._active = list(range(pool.num_workers))  # workers not exhausted (IterableDataset)
        self._cycle = 0
        self._owner: dict = {}  # batch index -> worker asked for it
        self._results: dict = {}
        self._sent = 0
        self._next = 0  # the next batch index to yield (in order)
        self._consumed = 0  # batches yielded or skipped
        self._exhausted = False
        self._done = False
        for _ in range(pool.num_workers * loader.prefetch_factor):
            self._send_next()

    def _send_next(self) -> None:
        if self._exhausted or not self._active:
            return
        if self._index_iter is not None:
            try:
                indices = next(self._index_iter)
            except StopIteration:
                self._exhausted = True
                return
        else:
            indices = None
        worker = self._pick_worker()
        self._pool.ask(worker, self._sent, indices)
        self._owner[self._sent] = worker
        self._sent += 1

    def _pick_worker(self) -> int:
        """Round-robin over the workers that still have data (torch's order for streams)."""
        n = self._pool.num_workers
        while True:
            worker = self._cycle % n
            self._cycle += 1
            if worker in self._active:
                return worker

    def __iter__(self) -> "ProcessIter":
        return self

    def __len__(self) -> int:
        return len(self._loader)

    def __next__(self) -> Any:
        while True:
            if self._done or (self._consumed >= self._sent and (self._exhausted or not self._active)):
                self._finish()
                raise StopIteration
            key = self._ready_key()
            if key is None:
                self._collect()
                continue
            status, payload = self._results.pop(key)
            self._owner.pop(key, None)
            self._consumed += 1
            if status == "end":
                continue  # that worker's stream ran out before this batch: torch skips it too
            if status == "error":
                self._finish(grace=ERROR_GRACE_S)
                assert isinstance(payload, WorkerError)
                payload.reraise()
            self._send_next()
            return self._loader._finish(payload)

    def _ready_key(self) -> int | None:
        """The batch to yield now: the next in order, or (in_order=False) any that has arrived."""
        if self._loader.in_order:
            if self._next in self._results:
                self._next += 1
                return self._next - 1
            return None
        return min(self._results) if self._results else None

    def _collect(self) -> None:
        messages = self._pool.receive(self._timeout)
        if not messages:
            self._finish(grace=ERROR_GRACE_S)
            raise RuntimeError(f"DataLoader timed out after {self._loader.timeout} seconds waiting for batch "
                               f"{self._next} from worker {self._owner.get(self._next)}")
        for epoch, index, status, payload in messages:
            if epoch != self._epoch:
                continue  # left over from an epoch that was stopped early (persistent workers)
            if status == "end" and self._index_iter is None:
                worker = self._owner.get(index)
                if worker in self._active:
                    self._active.remove(worker)
                self._exhausted = not self._active
            self._results[index] = (status, payload)

    def _finish(self, grace: float = JOIN_S) -> None:
        if self._done:
            return
        self._done = True
        self._results.clear()
        if self._owns_pool or grace < JOIN_S:  # after an error even persistent workers are restarted
            self._pool.shutdown(grace)

    close = _finish

    def __del__(self) -> None:  # a ``break`` out of the loop drops the iterator: stop the workers
        try:
            self._finish()
        except Exception:
            pass
