"""How :class:`ember.graph.Session` runs a placed graph on the processes of an ``ember.distributed`` job.

Every process runs the same script (``python -m ember.distributed.run -n 2 script.py``): each builds
the same graph, makes a Session and calls ``run`` with the same fetches. A run on rank ``r``:

1. partitions the nodes the fetches need (:func:`ember.graph.partition.partition`) - once per set
   of fetches; the first time, the processes compare the partitions' shapes (one small
   ``all_gather_object``) and fail loudly if their scripts built different graphs;
2. feeds the placeholders placed on rank ``r`` (feeds for other ranks' placeholders are ignored
   there, so the same ``feed_dict`` can be passed everywhere);
3. executes rank ``r``'s subgraph: sends post ``isend``, receives block (see the deadlock-freedom
   argument in :mod:`ember.graph.partition`), waits for its sends, then writes its Variables -
   state lives where it was placed and persists across runs there (only the owner's initial value
   of a Variable counts: the other processes' copies are never read);
4. returns the fetched values on **every** rank, each broadcast from the rank that owns it
   (``broadcast_fetches=False``: only on the owner, ``None`` elsewhere, and no communication for
   the fetches themselves).

Which mode a Session uses (``Session(distributed=None)``, the default): *distributed* when the
default process group has more than one process and the graph has a placement anywhere
(:func:`ember.graph.device`); otherwise *local* - the whole graph runs in this process, as in a
single-process program or a data-parallel job where each rank drives its own graph, and a node
placed on a rank other than 0 is an error naming it. ``distributed=True`` forces partitioning
(even an unplaced graph: rank ``default_rank`` computes, the others receive the fetches);
``distributed=False`` forces local runs. Unplaced nodes go to ``default_rank`` (0 by default).

Example (both ranks run it):
    >>> import numpy as np, ember, ember.graph as G, ember.distributed as dist  # doctest: +SKIP
    >>> dist.init_process_group("mpi")                                        # doctest: +SKIP
    >>> with G.device("rank:0"):                                              # doctest: +SKIP
    ...     x = G.placeholder((3,), ember.float64); h = x * 2
    >>> with G.device("rank:1"):                                              # doctest: +SKIP
    ...     y = h.sum()
    >>> G.Session().run(y, {x: np.ones(3)})                                   # doctest: +SKIP
    array(6.)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.graph import ops as graph_ops
from ember.graph.executor import Executable, needed_nodes
from ember.graph.ir import Graph, Value, format_node
from ember.graph.partition import _PENDING, COMM_STATS, Partition, _cpu_tensor, finish_sends, partition, replicated
from ember.graph.placement import node_rank
from ember.tensor import Tensor
from ember import distributed as dist
from ember.distributed import process_group


def job() -> tuple[int, int] | None:
    """(rank, world size) of the default process group, or None when there is none."""
    if not process_group.is_initialized():
        return None
    group = process_group.default_group(None, "Session.run")
    return group.rank(), group.size()


def is_placed(graph: Graph) -> bool:
    """True when some value of ``graph`` was created under ``ember.graph.device``."""
    key = (len(graph.nodes), len(graph.inputs), len(graph.states))
    cached = getattr(graph, "_placed_cache", None)
    if cached is not None and cached[0] == key:
        return cached[1]
    placed = any(v.rank is not None for v in graph.values() if not replicated(v))
    graph._placed_cache = (key, placed)
    return placed


def check_local(graph: Graph, fetches: Sequence[Value], distributed: Any) -> None:
    """Raise when a local (one-process) run needs a node placed on a rank other than 0."""
    nodes = needed_nodes(graph, fetches)
    leaves = [i for n in nodes for i in n.inputs if isinstance(i, Value) and i.node is None]
    for n in nodes:
        r = node_rank(n)
        if r not in (None, 0):
            _local_error(f"node `{format_node(n)}`", r, distributed)
    for v in leaves + [v for v in fetches if v.node is None]:
        if v.rank not in (None, 0) and not replicated(v):
            _local_error(f"{'placeholder' if v.kind == 'input' else 'Variable'} {v.label()} ({v.type_str()})", v.rank,
                         distributed)


def _local_error(what: str, rank: int, distributed: Any) -> None:
    where = job()
    if distributed is False:
        why = "this Session was made with distributed=False, so it runs the whole graph in this process"
    elif where is None:
        why = "this process is not part of an ember.distributed job (no default process group)"
    else:
        why = f"the job has {where[1]} process(es)"
    raise RuntimeError(
        f"Session.run: {what} is placed on rank:{rank} (ember.graph.device('rank:{rank}')), but {why}. Fix: launch "
        f"the script on {rank + 1}+ processes with `python -m ember.distributed.run -n {rank + 1} script.py` and call "
        "ember.distributed.init_process_group('mpi') before Session.run (Session(distributed=None or True)); or "
        "remove the device scope (or use 'rank:0') to run in one process")


def _feed_array(raw: Any, p: Value) -> np.ndarray:
    array = np.asarray(raw.detach().cpu().numpy() if isinstance(raw, Tensor) else raw, dtype=p.dtype)
    if array.shape != p.shape:
        raise ValueError(f"Session.run: placeholder {p.label()} has shape {p.shape}, fed shape {array.shape}")
    return array


class DistributedPlan:
    """Rank ``rank``'s part of the run of ``fetches``: its subgraph's executable and the fetch routing."""

    def __init__(self, graph: Graph, fetches: Sequence[Value], rank: int, world: int, default_rank: int,
                 fuse: bool, verify: bool = True) -> None:
        self.rank = rank
        self.fetches = list(fetches)
        self.partition: Partition = partition(graph, self.fetches, world, default_rank)
        if verify and world > 1:
            self._verify()
        sub = self.partition.graphs[rank]
        self.subgraph = sub
        copies = self.partition.values[rank]
        # The original placeholders behind this rank's inputs, in its subgraph's input order.
        originals = {copies[p.id].id: p for p in graph.inputs if p.id in copies}
        self.placeholders = [originals[c.id] for c in sub.inputs]
        self.executable = Executable(sub, sub.outputs, include_updates=False, fuse=fuse) if sub.outputs else None
        self.slot = {v.id: k for k, v in enumerate(sub.outputs)}

    def _verify(self) -> None:
        mine = self.partition.signature()
        every: list = [None] * dist.get_world_size()
        dist.all_gather_object(every, mine)
        COMM_STATS["plan_check"] += 1
        if any(s != mine for s in every):
            raise RuntimeError(
                "Session.run: the processes built different graphs for this run (their partitions differ: "
                f"{[s[:2] for s in every]}). Every rank must run the same script, build the same graph and call "
                "Session.run with the same fetches, in the same order")

    def run(self, feeds: dict, seed: int | None, broadcast: bool) -> list:
        inputs = []
        for p in self.placeholders:
            if p.id not in feeds:
                raise RuntimeError(f"Session.run: placeholder {p.label()} ({p.type_str()}) is needed by the fetches "
                                   f"but was not fed on rank {self.rank}, which owns it; add it to feed_dict")
            inputs.append(_feed_array(feeds[p.id], p))
        results: list = []
        if self.executable is not None:
            try:
                results = self.executable.run(inputs, seed=seed, before_writes=finish_sends)
            except BaseException:
                _PENDING.clear()  # peers may never receive them now: waiting could hide this error in a hang
                raise
            finish_sends()
        copies = self.partition.values[self.rank]
        out = []
        for v in self.fetches:
            owner = self.partition.owners[v.id]
            if v.node is not None and v.node.op is graph_ops.GROUP:
                out.append(None)  # a group's value is "it ran"
            elif owner is None:
                if v.kind != "const":
                    raise TypeError(f"Session.run: cannot fetch {v.label()}, a random-seed state")
                out.append(np.array(v.data))
            elif owner == self.rank:
                r = np.asarray(results[self.slot[copies[v.id].id]])
                r = r.copy() if v.kind != "node" else r  # Variables and feeds come back as copies
                if broadcast:
                    _broadcast(r, owner)
                out.append(r)
            elif broadcast:
                buffer = np.empty(v.shape, dtype=v.dtype)
                _broadcast(buffer, owner)
                out.append(buffer)
            else:
                out.append(None)
        return out


def _broadcast(array: np.ndarray, src: int) -> None:
    dist.broadcast(_cpu_tensor(array), src)
    COMM_STATS["broadcast"] += 1
