"""``spawn(fn, args, nprocs)``: start ``nprocs`` processes running ``fn(i, *args)``, as torch.multiprocessing.spawn.

When one process fails, the others are terminated and the failure is raised in the parent:
:class:`ProcessRaisedException` with the child's traceback, or :class:`ProcessExitedException` for a
child that died (signal, ``os._exit``).

Example (``fn`` must be importable by the children: defined at module level):
    >>> import ember.multiprocessing as mp          # doctest: +SKIP
    >>> def work(i, scale): print(i * scale)         # doctest: +SKIP
    >>> mp.spawn(work, args=(10,), nprocs=2)         # doctest: +SKIP
"""
from __future__ import annotations

import multiprocessing
import signal
import sys
import traceback
from multiprocessing import connection
from typing import Any, Callable


class ProcessException(Exception):
    """A process started by spawn() failed."""

    def __init__(self, msg: str, error_index: int, pid: int) -> None:
        super().__init__(msg)
        self.msg = msg
        self.error_index = error_index
        self.pid = pid

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A spawned process raised; the message holds its traceback."""


class ProcessExitedException(ProcessException):
    """A spawned process exited with a non-zero code or was killed by a signal."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None) -> None:
        super().__init__(msg, error_index, error_pid)
        self.exit_code = exit_code
        self.signal_name = signal_name

    def __reduce__(self) -> tuple:
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn: Callable, i: int, args: tuple, error_queue: Any) -> None:
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent was interrupted too and reports it
    except Exception:
        error_queue.put(traceback.format_exc())
        sys.exit(1)


class ProcessContext:
    """The processes of one spawn(): ``join()`` until all end, raising the first failure."""

    def __init__(self, processes: list, error_queues: list) -> None:
        self.processes = processes
        self.error_queues = error_queues
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self) -> list:
        return [p.pid for p in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait up to ``timeout`` for one process to end; True once all have ended successfully."""
        if not self.sentinels:
            return True
        ready = connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            process = self.processes[i]
            process.join()
            if process.exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            return not self.sentinels
        for process in self.processes:  # one failed: stop the others, as torch does
            if process.is_alive():
                process.terminate()
        for process in self.processes:
            process.join(grace_period if grace_period is not None else 5.0)
            if process.is_alive():
                process.kill()
                process.join()
        self.sentinels.clear()
        process = self.processes[failed]
        if not self.error_queues[failed].empty():
            original = self.error_queues[failed].get()
            raise ProcessRaisedException(f"\n\n-- Process {failed} terminated with the following error:\n{original}",
                                         failed, process.pid)
        code = process.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            raise ProcessExitedException(f"process {failed} terminated with signal {name}", failed, process.pid,
                                         code, name)
        raise ProcessExitedException(f"process {failed} terminated with exit code {code}", failed, process.pid, code)


def start_processes(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn") -> ProcessContext | None:
    """Start ``nprocs`` processes of ``fn(i, *args)`` with ``start_method``; join them unless ``join=False``."""
    if nprocs < 1:
        raise ValueError(f"spawn: nprocs must be >= 1, got {nprocs}")
    context = multiprocessing.get_context(start_method)
    processes, queues = [], []
    for i in range(nprocs):
        errors = context.SimpleQueue()
        process = context.Process(target=_wrap, args=(fn, i, args, errors), daemon=daemon)
        process.start()
        processes.append(process)
        queues.append(errors)
    job = ProcessContext(processes, queues)
    if not join:
        return job
    while not job.join():
        pass
    return None


def spawn(fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn") -> ProcessContext | None:
    """torch.multiprocessing.spawn: ``start_processes`` with the 'spawn' start method by default."""
    return start_processes(fn, args, nprocs, join, daemon, start_method)
