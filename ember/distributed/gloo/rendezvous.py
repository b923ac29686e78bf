"""``init_process_group("gloo", ...)``: find the other ranks through a store, then open the socket mesh.

Where the store comes from (torch's rules):

* ``store=`` given: used as is (``rank`` and ``world_size`` are required).
* ``init_method="env://"`` (the default): ``MASTER_ADDR``, ``MASTER_PORT``, and ``RANK`` /
  ``WORLD_SIZE`` unless passed as arguments; rank 0 serves a :class:`TCPStore` there.
* ``init_method="tcp://host:port"``: the same with the address in the URL (``?rank=&world_size=``
  may carry the rest).
* ``init_method="file:///path"``: a :class:`FileStore` in that file (it must be new for each job).

Keys live under ``ember_gloo/<n>/`` where ``n`` counts this process's ``init_process_group`` calls,
so a store shared by an init / destroy / init sequence never mixes the rounds.

Example (each of 2 processes, ``r`` its rank):
    >>> dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=r, world_size=2)  # doctest: +SKIP
"""
from __future__ import annotations

import atexit
import os
import sys
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlparse

from ember.distributed.gloo.group import GlooGroup, World
from ember.distributed.gloo.mesh import Mesh
from ember.distributed.store import FileStore, PrefixStore
from ember.distributed.tcp_store import TCPStore

_ROUNDS = [0]
CURRENT: list[World | None] = [None]


def _env_int(name: str, given: int | None, op: str) -> int:
    if given is not None and given >= 0:
        return int(given)
    value = os.environ.get(name)
    if value is None or not value.strip().lstrip("-").isdigit():
        raise ValueError(f"init_process_group: {name.lower()} is not set: pass {name.lower()}= or set the {name} "
                         f"environment variable (torchrun and `python -m ember.distributed.run` set it for {op})")
    return int(value)


def make_store(init_method: str | None, rank: int | None, world_size: int | None,
               timeout: timedelta) -> tuple[Any, int, int]:
    """The rendezvous store, this rank and the world size, from ``init_method`` and the environment."""
    method = init_method or "env://"
    url = urlparse(method)
    query = {k: v[-1] for k, v in parse_qs(url.query).items()}
    if "rank" in query and (rank is None or rank < 0):
        rank = int(query["rank"])
    if "world_size" in query and (world_size is None or world_size < 0):
        world_size = int(query["world_size"])
    if url.scheme == "env":
        rank = _env_int("RANK", rank, "every rank")
        world_size = _env_int("WORLD_SIZE", world_size, "every rank")
        host = os.environ.get("MASTER_ADDR")
        port = os.environ.get("MASTER_PORT")
        if not host or not (port or "").isdigit():
            raise ValueError("init_process_group: init_method='env://' needs MASTER_ADDR and MASTER_PORT in the "
                             "environment (the address and a free port of rank 0's machine), or pass "
                             "init_method='tcp://host:port'")
        store = TCPStore(host, int(port), world_size, rank == 0, timeout=timeout, wait_for_workers=False)
    elif url.scheme == "tcp":
        if not url.hostname or url.port is None:
            raise ValueError(f"init_process_group: init_method={method!r} must read tcp://host:port")
        rank = _env_int("RANK", rank, "every rank")
        world_size = _env_int("WORLD_SIZE", world_size, "every rank")
        store = TCPStore(url.hostname, url.port, world_size, rank == 0, timeout=timeout, wait_for_workers=False)
    elif url.scheme == "file":
        rank = _env_int("RANK", rank, "every rank")
        world_size = _env_int("WORLD_SIZE", world_size, "every rank")
        store = FileStore(url.path, world_size)
        store.set_timeout(timeout)
    else:
        raise ValueError(f"init_process_group: init_method={method!r} is not understood; use 'env://', "
                         "'tcp://host:port' or 'file:///path/to/a/new/file'")
    return store, rank, world_size


def init(init_method: str | None, rank: int, world_size: int, store: Any, timeout: timedelta) -> GlooGroup:
    """Rendezvous and connect; the world group."""
    if store is None:
        store, rank, world_size = make_store(init_method, rank, world_size, timeout)
    elif rank is None or rank < 0 or world_size is None or world_size < 1:
        raise ValueError("init_process_group: with store= pass rank= and world_size= too")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"init_process_group: rank {rank} is not in [0, world_size={world_size})")
    _ROUNDS[0] += 1
    scoped = PrefixStore(f"ember_gloo/{_ROUNDS[0]}", store)
    mesh = Mesh(rank, world_size, scoped, timeout)
    world = World(mesh, store)
    group = GlooGroup(mesh, range(world_size), timeout, 0, store, is_world=True)
    world.groups[0] = group
    CURRENT[0] = world
    _install_failure_note()
    return group


def _install_failure_note() -> None:
    """On an uncaught exception, tell the peers at once, with the cause: their waits on this rank then fail
    with "rank 1 raised ValueError: ..." instead of a bare "ended"."""
    if getattr(sys.excepthook, "_ember_gloo", False):
        return
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        world = CURRENT[0]
        if world is not None and os.getpid() == world.mesh.pid:
            world.failure = f"{kind.__name__}: {value}"[:500]
            world.mesh.close(world.state())
        previous(kind, value, tb)

    hook._ember_gloo = True  # type: ignore[attr-defined]
    sys.excepthook = hook


def new_group(world_group: GlooGroup, members: list[int], timeout: timedelta) -> Any:
    """A subgroup on the world's mesh (every rank calls this, members or not, in the same order)."""
    world = CURRENT[0]
    world_group.subgroups += 1
    wire_id = world_group.subgroups
    if world_group.mesh.rank not in members:
        return None
    group = GlooGroup(world_group.mesh, members, timeout, wire_id, world_group.store)
    if world is not None:
        world.groups[wire_id] = group
    return group


def shutdown(group: GlooGroup) -> None:
    """The end of the world group: tell the peers (so their waits on this rank fail at once), close the store."""
    world = CURRENT[0]
    notice = world.state() if world is not None else {}
    group.mesh.close(notice)
    shutdown_store = getattr(group.store, "shutdown", None)
    if shutdown_store is not None:
        shutdown_store()
    CURRENT[0] = None


@atexit.register
def _at_exit() -> None:
    world = CURRENT[0]
    if world is not None:
        world.mesh.close(world.state())
