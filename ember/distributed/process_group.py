"""Process groups: who takes part in a collective, and the default (world) group.

Two engines. ``"mpi"`` (through mpi4py): processes are started by ``mpiexec`` (or
``python -m ember.distributed.run``, which calls it), and MPI already knows every process's rank, the
world size and how to reach the others. ``"gloo"`` (ember's own TCP sockets, no MPI): processes are
started by anything (``ember.multiprocessing.spawn``, torchrun-style launchers, by hand) and find each
other through a rendezvous store (``env://``, ``tcp://``, ``file://``; see
:mod:`ember.distributed.gloo.rendezvous`).

Example (run under ``mpiexec -n 2 python script.py``):
    >>> import ember.distributed as dist
    >>> dist.init_process_group("mpi")          # doctest: +SKIP
    >>> dist.get_rank(), dist.get_world_size()  # doctest: +SKIP
    (0, 2)
"""
from __future__ import annotations

import os
from datetime import timedelta
from typing import Any, Sequence

from ember.distributed import watchdog

BACKENDS = ("mpi", "gloo")


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "ember.distributed needs mpi4py and an MPI library: pip install 'ember[dist]' "
            "(mpi4py + the MPICH wheel), then launch with `python -m ember.distributed.run -n 2 script.py`"
        ) from error
    return MPI


def is_mpi_available() -> bool:
    """True when mpi4py (and so an MPI library) can be imported."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


class ProcessGroup:
    """A set of processes that run collectives together: an MPI communicator and its ranks."""

    def __init__(self, comm: Any, backend: str = "mpi", world_ranks: Sequence[int] | None = None,
                 timeout: timedelta | None = None, gid: str = "") -> None:
        self.comm = comm
        self.backend = backend
        # Ranks of this group's members in the world group, in group-rank order.
        self.world_ranks = tuple(world_ranks) if world_ranks is not None else tuple(range(comm.Get_size()))
        self.timeout = _check_timeout(timeout, "ProcessGroup")
        self.gid = gid or watchdog.next_group_id()  # the same on every rank: groups are made in the same order
        self.is_world = world_ranks is None

    def describe(self) -> str:
        return "the default group" if self.is_world else f"the group of ranks {list(self.world_ranks)}"

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def __repr__(self) -> str:
        return f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()})"


def _check_timeout(timeout: Any, op: str) -> timedelta:
    """``timeout`` as a positive timedelta (None: torch's default, 30 minutes)."""
    if timeout is None:
        return watchdog.DEFAULT_TIMEOUT
    if not isinstance(timeout, timedelta):
        raise TypeError(f"{op}: timeout must be a datetime.timedelta (e.g. timedelta(minutes=5)), got "
                        f"{type(timeout).__name__}")
    if timeout.total_seconds() <= 0:
        raise ValueError(f"{op}: timeout must be positive, got {timeout}")
    return timeout


class _GroupMember:
    """``group=GroupMember.WORLD`` spells the default group, as in torch."""

    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


GroupMember = _GroupMember
_WORLD: list[ProcessGroup | None] = [None]


def _gloo_rendezvous() -> Any:
    """The socket engine's rendezvous module, imported on first use: its groups import this module (a cycle)."""
    from ember.distributed.gloo import rendezvous

    return rendezvous


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Join the default process group.

    ``backend="gloo"``: rendezvous through ``store`` or ``init_method`` (``env://`` by default: MASTER_ADDR,
    MASTER_PORT, RANK, WORLD_SIZE), then a TCP connection to every other rank (no MPI needed).
    ``backend="mpi"``: all processes ``mpiexec`` started; ``world_size`` and ``rank``, when given, are
    checked against what MPI reports, and ``init_method``/``store`` are ignored (MPI does its own
    rendezvous). ``backend=None`` is ``"mpi"`` under an MPI launcher with mpi4py installed, else ``"gloo"``
    (torch's default for CPU tensors).
    ``timeout`` (a ``timedelta``, default 30 minutes as torch.distributed's) bounds every wait on the
    group: a collective waiting longer raises ``DistBackendError`` naming the ranks that did not arrive.
    From here on, an uncaught exception on any rank aborts the whole job (see
    :mod:`ember.distributed.watchdog`).
    """
    if _WORLD[0] is not None:
        raise RuntimeError("init_process_group: the default process group is already initialized; call "
                           "destroy_process_group() first to start a new one")
    backend = _choose_backend(backend)
    limit = _check_timeout(timeout, "init_process_group")
    if backend == "gloo":
        group = _gloo_rendezvous().init(init_method, rank, world_size, store, limit)
        _WORLD[0] = group
        GroupMember.WORLD = group
        return
    MPI = _mpi()
    watchdog.setup(MPI, limit)
    comm, request = MPI.COMM_WORLD.Idup()  # a private communicator: user MPI traffic cannot match ours
    watchdog.wait_requests(MPI, [request], watchdog.Pending("init_process_group", watchdog._WorldOnly(
        comm.Get_size(), limit), seq=1))
    if world_size not in (-1, None) and world_size != comm.Get_size():
        raise ValueError(f"init_process_group: world_size={world_size} but MPI started {comm.Get_size()} "
                         f"process(es); launch with `-n {world_size}` or drop the argument")
    if rank not in (-1, None) and rank != comm.Get_rank():
        raise ValueError(f"init_process_group: rank={rank} but MPI assigned rank {comm.Get_rank()}; ranks come "
                         "from the launcher, drop the argument")
    group = ProcessGroup(comm, backend, timeout=limit)
    _WORLD[0] = group
    GroupMember.WORLD = group


def _choose_backend(backend: str | None) -> str:
    if backend is None:
        under_mpi = any(os.environ.get(v) for v in ("PMI_RANK", "OMPI_COMM_WORLD_RANK"))
        return "mpi" if under_mpi and is_mpi_available() else "gloo"
    name = str(backend).lower()
    if ":" in name:  # torch's "cpu:gloo,cuda:nccl": the CPU engine is what runs here
        parts = dict(p.split(":", 1) for p in name.split(",") if ":" in p)
        name = parts.get("cpu", name)
    if name not in BACKENDS:
        hint = ("NCCL needs the CUDA backend, which this build cannot run" if name == "nccl" else
                "ember runs collectives on MPI or on its own sockets ('gloo')")
        raise ValueError(f"init_process_group: backend {name!r} is not available ({hint}); use backend='gloo' "
                         "(any launcher: torchrun-style env://, tcp://, file://) or backend='mpi' "
                         "(`python -m ember.distributed.run -n N script.py` or mpiexec -n N)")
    return name


def is_initialized() -> bool:
    return _WORLD[0] is not None


def is_available() -> bool:
    """True: ember always has a distributed package (it needs mpi4py only when a group is made)."""
    return True


def default_group(group: ProcessGroup | None = None, op: str = "this call") -> ProcessGroup:
    if group is not None:
        if group is GroupMember.NON_GROUP_MEMBER:
            raise RuntimeError(f"{op}: this process is not a member of the group it was given")
        return group
    world = _WORLD[0]
    if world is None:
        raise RuntimeError(f"{op}: the default process group has not been initialized; call "
                           "ember.distributed.init_process_group('gloo') (or 'mpi') first")
    return world


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (default: the world); -1 when it is not a member."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return default_group(group, "get_rank").rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    return default_group(group, "get_world_size").size()


def get_backend(group: ProcessGroup | None = None) -> str:
    return default_group(group, "get_backend").backend


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    """The world rank of the process that has rank ``group_rank`` in ``group``."""
    return default_group(group, "get_global_rank").world_ranks[group_rank]


def get_process_group_ranks(group: ProcessGroup | None) -> list[int]:
    """The world ranks of ``group``'s members, in group-rank order (None: the default group)."""
    return list(default_group(group, "get_process_group_ranks").world_ranks)


def new_group(ranks: Sequence[int] | None = None, timeout: Any = None, backend: str | None = None,
              pg_options: Any = None, use_local_synchronization: bool = False) -> Any:
    """A group of the given world ranks. Every process must call it (as in torch), members or not.

    Returns the group, or ``GroupMember.NON_GROUP_MEMBER`` on processes outside it.
    """
    world = default_group(None, "new_group")
    size = world.size()
    members = sorted(set(range(size) if ranks is None else ranks))
    bad = [r for r in members if not 0 <= r < size]
    if bad:
        raise ValueError(f"new_group: ranks {bad} are outside the world of {size} process(es)")
    if world.backend == "gloo":
        made = _gloo_rendezvous().new_group(world, members, _check_timeout(timeout, "new_group") if timeout is not None
                                    else world.timeout)
        return GroupMember.NON_GROUP_MEMBER if made is None else made
    MPI = _mpi()
    me = world.rank()
    limit = _check_timeout(timeout, "new_group") if timeout is not None else world.timeout
    gid = watchdog.next_group_id()  # every rank counts every group, members or not
    # MPI has no non-blocking split: a watched barrier first, so a rank that never comes is an error, not a hang
    pending = watchdog.begin_collective(world, "new_group")
    watchdog.wait_requests(MPI, [world.comm.Ibarrier()], pending)
    color = 0 if me in members else MPI.UNDEFINED
    comm = world.comm.Split(color, key=me)
    if comm == MPI.COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(comm, world.backend, members, timeout=limit, gid=gid)


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    """Free ``group`` (default: the world group, after which init_process_group may run again)."""
    target = group if group is not None else _WORLD[0]
    if target is None or target is GroupMember.NON_GROUP_MEMBER:
        return
    if target.backend == "gloo":
        if target is _WORLD[0]:
            _gloo_rendezvous().shutdown(target)
    else:
        target.comm.Free()
    if target is _WORLD[0]:
        _WORLD[0] = None
        GroupMember.WORLD = None
