"""A process group on the socket mesh (``backend="gloo"``): ordering, async work, timeouts that name ranks.

Each collective gets the next number on its group (the same on every rank, since every rank issues the
group's collectives in the same order). ``async_op=True`` queues it on the group's worker thread, which
runs the group's operations one after another (as torch's gloo does); a blocking call first waits for
the group's queued work, then runs in the calling thread. Messages of collective #k are named by k, so
nothing of one collective can be taken for another's.

A wait past the group's timeout asks the other ranks where they are (their reader threads answer even
while they compute) and raises :class:`DistBackendError` naming the ranks that did not arrive.

Example (after ``init_process_group("gloo", ...)``):
    >>> g = ember.distributed.GroupMember.WORLD   # doctest: +SKIP
    >>> g.rank(), g.size(), g.backend             # doctest: +SKIP
    (0, 2, 'gloo')
"""
from __future__ import annotations

import os
import queue
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Sequence

from ember.distributed.collectives import Work
from ember.distributed.gloo.mesh import COLLECTIVE, Mesh
from ember.distributed.process_group import ProcessGroup
from ember.distributed.watchdog import DistBackendError


class GlooWork(Work):
    """An operation queued on a gloo group: ``wait()`` blocks until it ran (and re-raises its error)."""

    def __init__(self, name: str, run: Callable[[], Any], result: Sequence[Any] = ()) -> None:
        super().__init__([], None, result)
        self.name = name
        self._run = run
        self._event = threading.Event()
        self._error: BaseException | None = None

    def execute(self) -> None:
        try:
            self._value = self._run()
        except BaseException as error:  # noqa: BLE001 - handed to whoever waits
            self._error = error
        finally:
            self._run = None
            self._event.set()

    def wait(self, timeout: Any = None) -> bool:
        limit = None if timeout is None else (timeout.total_seconds() if isinstance(timeout, timedelta)
                                              else float(timeout))
        if not self._event.wait(limit):
            raise DistBackendError(f"{self.name}: Work.wait(timeout={timeout}) expired before the operation finished")
        self._done = True
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        if self._event.is_set():
            self._done = True
        return self._done

    def is_success(self) -> bool:
        return self._event.is_set() and self._error is None

    def exception(self) -> BaseException | None:
        return self._error

    def __repr__(self) -> str:
        return f"GlooWork({self.name}, completed={self._event.is_set()})"


class Call:
    """One collective on one group: send to / receive from group ranks, by step, under the group's timeout."""

    def __init__(self, group: "GlooGroup", name: str, seq: int) -> None:
        self.group, self.name, self.seq = group, name, seq
        self.deadline = time.monotonic() + group.timeout.total_seconds()

    def where(self) -> str:
        return f"{self.name} (collective #{self.seq} on {self.group.describe()})"

    def send(self, to: int, step: int, payload: Any) -> None:
        g = self.group
        g.mesh.send(g.world_ranks[to], COLLECTIVE, g.wire_id, self.seq, step, payload, self.where())

    def receive(self, frm: int, step: int, nbytes: int | None = None) -> bytearray:
        g = self.group
        src = g.world_ranks[frm]
        g.waiting.append(self)
        try:
            payload = g.mesh.receive(src, COLLECTIVE, g.wire_id, self.seq, step, self.deadline,
                                     lambda: g.report_timeout(self), self.where())
        finally:
            g.waiting.remove(self)
        if nbytes is not None and len(payload) != nbytes:
            raise DistBackendError(f"{self.where()}: rank {src} sent {len(payload)} bytes where this rank expects "
                                   f"{nbytes}; the ranks' tensors differ in shape or dtype")
        return payload


class GlooGroup(ProcessGroup):
    """A group of world ranks communicating over the job's socket mesh."""

    def __init__(self, mesh: Mesh, world_ranks: Sequence[int], timeout: timedelta, wire_id: int,
                 store: Any = None, is_world: bool = False) -> None:
        self.comm = None
        self.backend = "gloo"
        self.mesh = mesh
        self.world_ranks = tuple(world_ranks)
        self.timeout = timeout
        self.wire_id = wire_id
        self.gid = f"gloo{wire_id}"
        self.is_world = is_world
        self.store = store
        self._rank = self.world_ranks.index(mesh.rank)
        self.started = 0  # collectives issued on this group (the next one's number minus one)
        self.waiting: list = []  # Calls this rank waits in now (for the others' queries)
        self._queue: queue.Queue | None = None
        self._inflight: list[GlooWork] = []
        self._lock = threading.Lock()
        self.subgroups = 0  # new_group calls made on the world (every rank counts every group)

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return len(self.world_ranks)

    def __repr__(self) -> str:
        return f"ProcessGroup(backend='gloo', rank={self.rank()}, size={self.size()})"

    # ---- running operations ----------------------------------------------------------------------------
    def run(self, name: str, body: Callable[[Call], Any], async_op: bool, result: Sequence[Any] = ()) -> Any:
        """Issue collective ``name`` (numbered now), run ``body(call)`` in order; a Work when ``async_op``."""
        with self._lock:
            self.started += 1
            call = Call(self, name, self.started)
        work = GlooWork(name, lambda: body(call), result)
        if async_op:
            with self._lock:
                if self._queue is None:
                    self._queue = queue.Queue()
                    threading.Thread(target=self._worker, name=f"ember-gloo-{self.gid}", daemon=True).start()
                self._inflight.append(work)
            self._queue.put((work, call))
            return work
        for earlier in list(self._inflight):  # the group's operations run in the order they were issued
            earlier._event.wait()
        call.deadline = time.monotonic() + self.timeout.total_seconds()
        work.execute()
        work.wait()
        return work._value

    def _worker(self) -> None:
        assert self._queue is not None
        while True:
            work, call = self._queue.get()
            call.deadline = time.monotonic() + self.timeout.total_seconds()  # the clock starts when it runs
            work.execute()
            with self._lock:
                self._inflight.remove(work)

    # ---- errors ----------------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"started": self.started, "waiting": [c.where() for c in self.waiting]}

    def report_timeout(self, call: Call) -> None:
        """Raise the timeout error for ``call``, naming the ranks that have not issued it and what they do."""
        others = [r for r in self.world_ranks if r != self.mesh.rank]
        answers = self.mesh.ask(others, wait_s=3.0)  # returns as soon as all answered; a loaded machine is slow
        missing, notes = [], []
        for r in others:
            peer = self.mesh.peers[r]
            answer = answers.get(r) or (peer.left if peer is not None else None)  # a leave notice has its counts
            mine = (answer or {}).get("groups", {}).get(str(self.wire_id))
            if answer is None:
                missing.append(r)
                gone = peer is None or peer.closed or peer.left is not None
                notes.append(f"rank {r} {'has ended' if gone else 'did not answer (stuck outside Python?)'}")
            elif mine is None or mine["started"] < call.seq:
                missing.append(r)
                done = 0 if mine is None else mine["started"]
                doing = (mine or {}).get("waiting") or []
                notes.append(f"rank {r} has issued {done} collective(s) on this group"
                             + (f" and waits in {doing[0]}" if doing else " and is not communicating on it"))
        who = f"rank(s) {', '.join(map(str, missing))} did not arrive" if missing else "every rank arrived"
        raise DistBackendError(
            f"{call.where()} timed out after {self.timeout} on rank {self.mesh.rank}: {who}"
            f"{': ' + '; '.join(notes) if notes else ''}. Every rank must run the same collectives in the same "
            "order; if a rank legitimately takes longer, raise init_process_group(timeout=timedelta(...)).")


class World:
    """This process's mesh, its groups (for the answers to queries) and the store, while a gloo job is up."""

    def __init__(self, mesh: Mesh, store: Any) -> None:
        self.mesh = mesh
        self.store = store
        self.groups: dict[int, GlooGroup] = {}
        self.failure = ""  # the uncaught exception that ends this rank, for its leave notice
        mesh.state = self.state

    def state(self) -> dict:
        return {"groups": {str(k): g.state() for k, g in self.groups.items()}, "pid": os.getpid(),
                "failure": self.failure}
