"""No hang when one rank fails: every wait polls, a collective has a timeout, and a failing rank ends the job.

MPI's blocking calls wait forever for a rank that will never arrive. ember never makes one: each
communication is a non-blocking MPI call finished by :func:`wait`, which polls it and, while it waits,

* reads *leave notices* on a private control communicator. A rank whose script ends (normally or by
  ``sys.exit``) sends one to every other rank, saying how many collectives it started on each group
  and how many messages it sent to / receives it posted from each rank, then waits for the others to
  end before MPI finalizes. A rank waiting for something a departed rank never started raises
  :class:`DistBackendError` at once (and, uncaught, aborts the job as below);
* after the group's ``timeout`` (``init_process_group(timeout=...)``, 30 minutes by default as in
  torch.distributed), asks the group's other ranks where they are and raises
  :class:`DistBackendError` naming the collective and the ranks that did not arrive.

:func:`setup` (called by ``init_process_group``) also installs a ``sys.excepthook``: an uncaught
exception on any rank prints its traceback under a line naming the rank, records it for the
launcher (``python -m ember.distributed.run`` prints the first failure, as torchrun does) and calls
``MPI_Abort``, so ``mpiexec`` ends every rank within a second with a non-zero exit code. A rank
killed by a signal is noticed by ``mpiexec`` itself, which ends the others.

Example (under ``mpiexec -n 2``; rank 1 sleeps past the 1 s timeout):
    >>> from datetime import timedelta                         # doctest: +SKIP
    >>> dist.init_process_group("mpi", timeout=timedelta(seconds=1))  # doctest: +SKIP
    >>> dist.all_reduce(t)   # on rank 0                       # doctest: +SKIP
    DistBackendError: all_reduce (collective #1 on the default group) timed out after 0:00:01: rank 1 did not arrive ...
"""
from __future__ import annotations

import atexit
import json
import os
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable

from ember.distributed.bootstrap import ERROR_DIR_ENV, launcher_rank, record_failure  # noqa: F401

DEFAULT_TIMEOUT = timedelta(minutes=30)  # torch.distributed's default_pg_timeout (gloo / MPI)

_LEAVE, _QUERY, _STATE = 7001, 7002, 7003  # control-message tags
_SPIN_S = 0.002  # poll without sleeping this long first: most waits end here, at MPI's own latency
_MAX_SLEEP_S = 0.002  # then sleep between polls, at most this long (the latency a slow wait gains)
_ANSWER_WAIT_S = 1.0  # how long a timed-out rank waits for the others to say where they are
ABORT_DRAIN_SECONDS = 0.5  # pause between printing a traceback and MPI_Abort (see the excepthook)


class DistError(RuntimeError):
    """Base of ember.distributed's errors (torch.distributed.DistError)."""

    __module__ = "ember.distributed"


class DistBackendError(DistError):
    """A communication cannot complete: a rank left, or a wait passed the group's timeout."""

    __module__ = "ember.distributed"


@dataclass
class Pending:
    """What a wait is waiting for, for the messages and the leave checks."""

    op: str
    group: Any
    seq: int = 0  # collective number on the group (1-based); 0 for point to point
    peer: int | None = None  # world rank of the other side of a send / receive (None: any source)
    count: int = 0  # this rank's running message count towards / from ``peer``
    sending: bool = False
    limit: timedelta | None = None  # overrides the group's timeout

    def timeout(self) -> timedelta:
        return self.limit if self.limit is not None else self.group.timeout

    def where(self) -> str:
        if self.seq:
            return f"{self.op} (collective #{self.seq} on {self.group.describe()})"
        side = "to" if self.sending else "from"
        return f"{self.op} {side} {'any rank' if self.peer is None else f'rank {self.peer}'} (message #{self.count})"


@dataclass
class _State:
    control: Any = None  # a private duplicate of COMM_WORLD for control messages
    rank: int = 0
    size: int = 1
    started: dict = field(default_factory=dict)  # group id -> collectives started
    sent: dict = field(default_factory=dict)  # world rank -> messages sent to it
    posted: dict = field(default_factory=dict)  # world rank (or "any") -> receives posted from it
    left: dict = field(default_factory=dict)  # world rank -> its leave notice
    outbox: list = field(default_factory=list)  # (request, buffer) of control messages in flight
    waiting: list = field(default_factory=list)  # the Pending this rank waits on now (a stack)
    exiting: bool = False
    aborting: bool = False
    pid: int = 0  # the rank's process: a forked child (a DataLoader worker) must never act for it
    group_counter: int = 0


_STATE_ = _State()


def next_group_id() -> str:
    """A name for a new group, the same on every rank (groups are made by every rank in the same order)."""
    _STATE_.group_counter += 1
    return f"g{_STATE_.group_counter}"


# ---- setup ------------------------------------------------------------------------------------------
def setup(MPI: Any, timeout: timedelta) -> None:
    """Called by init_process_group on every rank: the control communicator, excepthook and exit handshake."""
    s = _STATE_
    if s.control is not None:
        return
    world = MPI.COMM_WORLD
    s.rank, s.size = world.Get_rank(), world.Get_size()
    s.pid = os.getpid()
    comm, request = world.Idup()
    wait_requests(MPI, [request], Pending("init_process_group", _WorldOnly(s.size, timeout), seq=1))
    s.control = comm
    _unlink_mpi_segments()  # every rank is past MPI_Init now (the Idup above needed them all)
    if s.size > 1:
        _install_excepthook(MPI)
        atexit.register(_leave, MPI)  # registered after mpi4py's MPI_Finalize hook, so it runs before it
        _wrap_os_exit(MPI)


@dataclass
class _WorldOnly:
    """Stands in for the world group before it exists (the wait inside init_process_group)."""

    n: int
    timeout: timedelta
    gid: str = "init"
    world_ranks: tuple = ()

    def __post_init__(self) -> None:
        self.world_ranks = tuple(range(self.n))

    def describe(self) -> str:
        return "the world"


def _install_excepthook(MPI: Any) -> None:
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        s = _STATE_
        if os.getpid() != s.pid:  # a forked child of the rank: not a rank itself
            previous(kind, value, tb)
            return
        sys.stderr.write(f"[rank {s.rank}] ember.distributed: uncaught {kind.__name__} on rank {s.rank} "
                         f"(pid {os.getpid()}); aborting the job so that the other {s.size - 1} rank(s) do not "
                         "wait forever:\n")
        previous(kind, value, tb)
        _record_error(kind, value, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        s.aborting = True
        _unlink_mpi_segments()
        # mpiexec kills every rank as soon as it hears of the abort; output still in its forwarding
        # pipes is then lost (the traceback arrived cut off under load). Give it a moment to drain.
        time.sleep(ABORT_DRAIN_SECONDS)
        MPI.COMM_WORLD.Abort(1)
        os._exit(1)  # MPICH's MPI_Abort can return after telling mpiexec: never run the exit handshake then

    sys.excepthook = hook


def _wrap_os_exit(MPI: Any) -> None:
    """Make ``os._exit`` in the rank's main process take part in the exit handshake, as ``sys.exit`` does.

    ``os._exit`` skips atexit handlers, so the rank would vanish without telling the others; MPICH's mpiexec
    then stops them and reports success (exit code 0 for a job that never finished). With the handshake the
    others either finish too (the rank had done its part) or raise, naming it, and abort the job. Forked
    children (DataLoader workers) and the abort path keep the plain ``os._exit``."""
    original = os._exit
    if getattr(original, "_ember_rank_exit", False):
        return

    def _exit(status: int) -> None:
        s = _STATE_
        if os.getpid() == s.pid and not s.aborting:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):  # a closed stream: nothing to keep
                    pass
            _leave(MPI)
        original(status)

    _exit._ember_rank_exit = True  # type: ignore[attr-defined]
    _exit.__doc__ = original.__doc__
    os._exit = _exit


def _unlink_mpi_segments() -> None:
    """Remove the names of MPICH's shared-memory segments this rank has mapped (Linux).

    MPICH removes them in MPI_Finalize, so a job that is aborted or killed leaves a few MB per job in
    /dev/shm forever. Once every rank of the machine has mapped them (after MPI_Init), the names are not
    needed: the mappings live on, and nothing is left behind however the job ends.
    """
    try:
        with open("/proc/self/maps") as maps:
            names = {line.split()[-1] for line in maps if "/dev/shm/mpich_shm_" in line}
    except OSError:  # not Linux: MPICH cleans up at MPI_Finalize as usual
        return
    for name in names:
        if name.startswith("/dev/shm/mpich_shm_") and not name.endswith("(deleted)"):
            try:
                os.unlink(name)
            except OSError:  # another rank of this machine removed it first
                pass


def _record_error(kind: Any, value: Any, tb: Any) -> None:
    """Write this rank's failure where the launcher reads it (like torchrun's error files)."""
    rank = _STATE_.rank if _STATE_.control is not None else launcher_rank()
    record_failure(rank, f"{kind.__name__}: {value}", "".join(traceback.format_exception(kind, value, tb)))


# ---- bookkeeping (called when an operation starts) ----------------------------------------------------
def begin_collective(group: Any, op: str) -> Pending:
    s = _STATE_
    s.started[group.gid] = s.started.get(group.gid, 0) + 1
    return Pending(op, group, seq=s.started[group.gid])


def begin_send(group: Any, op: str, dst_world: int) -> Pending:
    s = _STATE_
    s.sent[dst_world] = s.sent.get(dst_world, 0) + 1
    return Pending(op, group, peer=dst_world, count=s.sent[dst_world], sending=True)


def begin_receive(group: Any, op: str, src_world: int | None) -> Pending:
    s = _STATE_
    key = "any" if src_world is None else src_world
    s.posted[key] = s.posted.get(key, 0) + 1
    return Pending(op, group, peer=src_world, count=s.posted[key])


def with_timeout(pending: Pending, timeout: Any) -> Pending:
    """``pending`` with its own limit (``Work.wait(timeout=...)``): a timedelta or seconds."""
    limit = timeout if isinstance(timeout, timedelta) else timedelta(seconds=float(timeout))
    return replace(pending, limit=limit)


# ---- waiting ------------------------------------------------------------------------------------------
def wait_requests(MPI: Any, requests: list, pending: Pending) -> None:
    """Wait for MPI ``requests`` (see :func:`wait`)."""
    if requests:
        wait(lambda: MPI.Request.Testall(requests), pending)


def wait(poll: Callable[[], bool], pending: Pending) -> None:
    """Poll until ``poll()`` is True; raise DistBackendError when a rank it needs left or the timeout passed."""
    if poll():
        return
    s = _STATE_
    start = time.monotonic()
    timeout = pending.timeout().total_seconds()
    delay = 0.0
    s.waiting.append(pending)
    try:
        while not poll():
            now = time.monotonic()
            if now - start < _SPIN_S:
                continue
            _drain()
            _check_departures(pending)
            if now - start > timeout:
                if _report_timeout(poll, pending, now - start):
                    return
            time.sleep(delay)
            delay = min(max(2 * delay, 5e-5), _MAX_SLEEP_S)
    finally:
        s.waiting.pop()


# ---- control messages ---------------------------------------------------------------------------------
def _post(MPI: Any, message: dict, dest: int, tag: int) -> None:
    s = _STATE_
    if s.control is None:  # before init_process_group finished: nobody to tell
        return
    buffer = bytearray(json.dumps(message).encode())
    s.outbox.append((s.control.Isend([buffer, MPI.BYTE], dest=dest, tag=tag), buffer))
    s.outbox[:] = [(r, b) for r, b in s.outbox if not r.Test()]


def _drain() -> list:
    """Receive every control message that has arrived; answer queries; keep leave notices. Returns states."""
    s = _STATE_
    if s.control is None:
        return []
    from mpi4py import MPI

    states = []
    status = MPI.Status()
    while s.control.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status):
        buffer = bytearray(status.Get_count(MPI.BYTE))
        source, tag = status.Get_source(), status.Get_tag()
        s.control.Recv([buffer, MPI.BYTE], source=source, tag=tag)
        message = json.loads(buffer.decode())
        if tag == _LEAVE:
            s.left[source] = message
        elif tag == _QUERY:
            here = s.waiting[-1] if s.waiting else None
            answer = {"nonce": message["nonce"], "started": s.started, "exiting": s.exiting,
                      "waiting": here.where() if here is not None else None,
                      "at": [here.group.gid, here.seq, here.op] if here is not None and here.seq else None}
            _post(MPI, answer, source, _STATE)
        elif tag == _STATE:
            states.append((source, message))
    return states


def _check_departures(pending: Pending) -> None:
    """Raise when a rank that ``pending`` needs has left without starting its side."""
    s = _STATE_
    members = pending.group.world_ranks
    for rank, notice in s.left.items():
        if rank not in members:
            continue
        if pending.seq:
            done = notice["started"].get(pending.group.gid, 0)
            if done < pending.seq:
                _raise_left(pending, [r for r, n in s.left.items() if r in members
                                      and n["started"].get(pending.group.gid, 0) < pending.seq])
        elif pending.sending and rank == pending.peer:
            posted = notice["posted"].get(str(s.rank), 0) + notice["posted"].get("any", 0)
            if posted < pending.count:
                _raise_left(pending, [rank])
        elif not pending.sending and rank == pending.peer:
            if notice["sent"].get(str(s.rank), 0) < pending.count:
                _raise_left(pending, [rank])
    if not pending.seq and not pending.sending and pending.peer is None:
        others = [r for r in members if r != s.rank]
        if others and all(r in s.left for r in others):
            total = sum(s.left[r]["sent"].get(str(s.rank), 0) for r in others)
            if total < sum(s.posted.values()):
                _raise_left(pending, others)


def _raise_left(pending: Pending, ranks: list) -> None:
    who = ", ".join(str(r) for r in sorted(ranks))
    raise DistBackendError(
        f"{pending.where()} can never complete: rank(s) {who} ended their script (returned, or called sys.exit "
        "or os._exit) "
        "without taking part. Every rank must run the same collectives in the same order; end a job early on "
        "every rank together (e.g. decide with an all_reduce), or raise an exception, which aborts the whole job.")


def _report_timeout(poll: Callable[[], bool], pending: Pending, waited: float) -> bool:
    """Ask the group's other ranks where they are, then raise naming those that did not arrive.
    Returns True if the wait completed meanwhile."""
    from mpi4py import MPI

    s = _STATE_
    nonce = uuid.uuid4().hex
    others = [r for r in pending.group.world_ranks if r != s.rank]
    for r in others:
        if r not in s.left:
            _post(MPI, {"nonce": nonce}, r, _QUERY)
    answers: dict = {}
    deadline = time.monotonic() + _ANSWER_WAIT_S
    while time.monotonic() < deadline and len(answers) < len([r for r in others if r not in s.left]):
        if poll():
            return True
        for source, message in _drain():
            if message.get("nonce") == nonce:
                answers[source] = message
        time.sleep(0.005)
    missing, notes = [], []
    for r in others:
        answer = answers.get(r)
        if pending.seq:
            started = (s.left[r]["started"] if r in s.left else answer["started"] if answer else {})
            at = answer.get("at") if answer else None
            if at and at[0] == pending.group.gid and at[1] == pending.seq and at[2] != pending.op:
                missing.append(r)
                notes.append(f"rank {r} called {at[2]} as this collective, where this rank called {pending.op} "
                             "(the ranks run different collectives)")
                continue
            if started.get(pending.group.gid, 0) >= pending.seq:
                continue  # it arrived; the wait is slow for another reason
        missing.append(r)
        if r in s.left:
            notes.append(f"rank {r} has ended its script")
        elif answer is None:
            notes.append(f"rank {r} did not answer (busy outside ember's communication, or stuck)")
        elif answer["waiting"]:
            notes.append(f"rank {r} is waiting in {answer['waiting']}")
        else:
            notes.append(f"rank {r} is not communicating")
    if pending.seq:
        who = f"rank(s) {', '.join(map(str, missing))} did not arrive" if missing else "every rank arrived"
    else:
        who = "the other side did not take part"
    limit = pending.timeout()
    raise DistBackendError(
        f"{pending.where()} timed out after {timedelta(seconds=round(waited))} (timeout={limit}): {who}"
        f"{': ' + '; '.join(notes) if notes else ''}. Every rank must run the same collectives in the same order; "
        "if a rank legitimately takes longer, raise the limit with init_process_group(timeout=timedelta(...)).")


# ---- the exit handshake -----------------------------------------------------------------------------------
def _leave(MPI: Any) -> None:
    """At exit: tell every rank this one is done, then wait until all are (so MPI can finalize together)."""
    s = _STATE_
    if s.control is None or s.size < 2 or os.getpid() != s.pid or MPI.Is_finalized():
        return
    if s.aborting:
        return
    s.exiting = True
    notice = {"started": s.started, "sent": {str(k): v for k, v in s.sent.items()},
              "posted": {str(k): v for k, v in s.posted.items()}}
    for r in range(s.size):
        if r != s.rank:
            _post(MPI, notice, r, _LEAVE)
    here = Pending("the end of the script", _WorldOnly(s.size, timedelta.max))
    s.waiting.append(here)
    delay = 0.0
    while len(s.left) < s.size - 1 or not all(r.Test() for r, _ in s.outbox):
        _drain()
        time.sleep(delay)
        delay = min(max(2 * delay, 1e-4), 0.01)
    s.waiting.pop()
