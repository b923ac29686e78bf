"""Partitioning a placed graph into per-rank subgraphs joined by ``send``/``recv`` nodes.

TensorFlow 1's distributed execution: every node lives on one process (its rank, set with
:func:`ember.graph.device`); the nodes a run needs are split into one subgraph per rank, and each
edge that crosses ranks becomes a ``send`` node on the producer's rank and a ``recv`` node on the
consumer's rank. :func:`partition` is a pure graph transformation (no MPI): it is what
:class:`ember.graph.Session` runs on each process of an ``ember.distributed`` job.

Rules:

* one transfer per (value, consumer rank), however many nodes on that rank read it, with a tag
  unique in the partition (tags are numbered in graph order, so every process - each built the
  same graph from the same script - numbers them alike);
* ``recv`` knows its shape and dtype from the IR and allocates exactly that;
* constants and random-seed states are replicated (each process has them), never sent;
* ``assign`` runs on its Variable's rank; a ``group``'s inputs from another rank are control
  edges: the producer's rank runs them (they are roots of its subgraph), no data moves.

**Deadlock freedom.** Sends are non-blocking (``isend``), receives block. Take the *canonical
order* of all nodes: the original graph order, a send right after the node producing its value
(at the start for placeholders and Variables), a recv right before the first node on its rank that
reads it. Each rank runs its subgraph in an order that keeps every send that is canonically before
a recv on the same rank before it - guaranteed by data edges, not by luck: each ``recv`` takes as
inputs the tokens of the sends emitted on its rank since the previous recv, and that previous
recv's value, so any topological schedule (the fuser's included) keeps the order. Suppose the ranks
were stuck: each unfinished rank waits in a recv. A recv r waiting on rank i for consumer position
c(r) waits for a send s on rank j that is not posted, so rank j waits in a recv r' that precedes s
there; hence r' is canonically before s, i.e. c(r') <= position of s's producer < c(r). Following
the waits gives an infinite strictly decreasing chain of graph positions - impossible. Posted sends
complete because every recv is eventually reached, so after its program each rank waits for its
own sends (before writing Variables: a send may read a Variable's buffer).

Example:
    >>> import numpy as np, ember, ember.graph as G
    >>> G.reset_default_graph()
    >>> with G.device("rank:0"):
    ...     x = G.placeholder((2,), ember.float64, name="x")
    ...     h = x * 2
    >>> with G.device("rank:1"):
    ...     y = (h + 1).sum()
    >>> p = partition(G.get_default_graph(), [y._data], world_size=2)
    >>> [(t.src, t.dst) for t in p.transfers], p.graphs[0].summary(), p.graphs[1].summary()
    ([(0, 1)], '2 nodes: mul x1, send x1', '3 nodes: add x1, recv x1, sum x1')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ember import distributed as dist, dtypes
from ember.graph import ops as graph_ops
from ember.graph.executor import needed_nodes
from ember.graph.ir import Graph, Node, Value, format_node
from ember.graph.placement import describe, node_rank
from ember.graph.rng import is_seed
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.device import to_device
from ember.tensor import Tensor

TAG_BASE = 1 << 12  # graph transfers use tags TAG_BASE + k (user p2p traffic usually uses small tags)

# Communication counters (what the tests and users read to see what a run moved).
COMM_STATS: dict[str, int] = {"send": 0, "recv": 0, "bytes_sent": 0, "bytes_received": 0, "broadcast": 0,
                              "plan_check": 0}
_PENDING: list = []  # isend requests of the run in progress (waited on by finish_sends)


# ---- the op records ----------------------------------------------------------------------------------
def _cpu_tensor(array: Any) -> Any:

    return Tensor._make(array, to_device("cpu"), False)


def _send_impl(xp: Any, value: Any, dst: int, tag: int) -> None:
    array = np.asarray(value)
    _PENDING.append(dist.isend(_cpu_tensor(array), dst, tag=tag))
    COMM_STATS["send"] += 1
    COMM_STATS["bytes_sent"] += array.nbytes
    return None


def _send_rule(value: Spec, dst: int, tag: int) -> Spec:
    return Spec((), dtypes.bool_, value.device)  # a token: "the send is posted"


def _recv_impl(xp: Any, *after: Any, src: int, tag: int, shape: tuple, dtype: Any) -> Any:
    buffer = np.empty(shape, dtype=dtype.np)  # exactly the value's shape and dtype, known from the IR
    dist.recv(_cpu_tensor(buffer), src, tag=tag)
    COMM_STATS["recv"] += 1
    COMM_STATS["bytes_received"] += buffer.nbytes
    return buffer


def _recv_rule(*after: Any, src: int, tag: int, shape: tuple, dtype: Any) -> Spec:
    return Spec(tuple(shape), dtype)


if "send" not in OPS:
    SEND = register(OpDef(
        name="send", batch="loop", category="control", impl=_send_impl, shape_rule=_send_rule, save="none",
        comm=True,
        doc="send(value, dst, tag): post a non-blocking send of value to rank dst; a token out",
    ))
    RECV = register(OpDef(
        name="recv", batch="loop", category="comm", impl=_recv_impl, shape_rule=_recv_rule, save="none",
        comm=True,
        doc="recv(*after, src, tag, shape, dtype): receive a value from rank src (blocks); inputs only order it",
    ))
else:  # re-import: keep the records already registered
    SEND, RECV = OPS["send"], OPS["recv"]


def finish_sends() -> None:
    """Wait until every send posted by this process's run has left its buffer."""
    pending = _PENDING[:]
    _PENDING.clear()
    for work in pending:
        work.wait()


# ---- the pass --------------------------------------------------------------------------------------------
@dataclass
class Transfer:
    """One cross-rank edge: ``value`` (of the original graph) goes from ``src`` to ``dst``."""

    value: Value
    src: int
    dst: int
    tag: int

    def __repr__(self) -> str:
        return f"Transfer({self.value.label()}: {self.value.type_str()}, rank:{self.src} -> rank:{self.dst}, " \
               f"tag={self.tag})"


@dataclass
class Partition:
    """Per-rank subgraphs for one set of fetches.

    ``graphs[r]`` is rank r's subgraph (its ``outputs`` are the values rank r must compute: its
    fetches, send tokens and control targets); ``values[r]`` maps original value ids to rank r's
    copies; ``owners`` maps each fetched value id to its rank (None: a replicated constant).
    """

    graphs: list[Graph]
    transfers: list[Transfer]
    values: list[dict]
    owners: dict
    fetches: list = field(default_factory=list)

    def sends(self, rank: int) -> list[Node]:
        return [n for n in self.graphs[rank].nodes if n.op is SEND]

    def recvs(self, rank: int) -> list[Node]:
        return [n for n in self.graphs[rank].nodes if n.op is RECV]

    def signature(self) -> tuple:
        """What every process must agree on (checked once per plan by the session)."""
        return (len(self.fetches), tuple(len(g.nodes) for g in self.graphs),
                tuple((t.src, t.dst, t.tag, t.value.shape, t.value.edtype.name) for t in self.transfers))

    def explain(self) -> str:
        parts = [f"partition over {len(self.graphs)} rank(s), {len(self.transfers)} transfer(s)"]
        for t in self.transfers:
            parts.append(f"  {t!r}")
        for r, g in enumerate(self.graphs):
            parts.append(f"==== rank:{r}: {g.summary()}\n{g}")
        return "\n".join(parts)

    __str__ = explain


def replicated(value: Value) -> bool:
    """Values every process holds itself: constants and random-seed states."""
    return value.kind == "const" or is_seed(value)


def partition(graph: Graph, fetches: Sequence[Value], world_size: int, default_rank: int = 0) -> Partition:
    """Split the nodes ``fetches`` need into ``world_size`` subgraphs joined by send/recv pairs."""
    fetches = list(fetches)
    if not 0 <= default_rank < world_size:
        raise ValueError(f"partition: default_rank={default_rank} is outside the job's ranks 0..{world_size - 1}")
    nodes = needed_nodes(graph, fetches)
    rank_of: dict[int, int] = {}  # id(node) -> rank
    for n in nodes:
        r = node_rank(n)
        r = default_rank if r is None else r
        if r >= world_size:
            raise ValueError(
                f"graph {graph.name!r}: node `{format_node(n)}` is placed on rank:{r}, but the job has {world_size} "
                f"process(es) (ranks 0..{world_size - 1}). Fix: launch more processes (`python -m "
                f"ember.distributed.run -n {r + 1} script.py`) or place it on an existing rank")
        rank_of[id(n)] = r

    def owner(v: Value) -> int | None:
        if replicated(v):
            return None
        if v.node is not None:
            return rank_of[id(v.node)]
        r = default_rank if v.rank is None else v.rank
        if r >= world_size:
            raise ValueError(f"graph {graph.name!r}: {v.kind} {v.label()} ({v.type_str()}) is placed on rank:{r}, "
                             f"but the job has {world_size} process(es)")
        return r

    # Pass 1: the transfers, numbered in graph order, and the control targets of groups.
    transfers: dict[tuple, Transfer] = {}
    first_use: dict[int, list] = {}  # id(consumer node) -> transfers it is the first reader of (on its rank)
    after_producer: dict[int, list] = {}  # value id -> its transfers (sent right after it is made)
    control: list[list[Value]] = [[] for _ in range(world_size)]
    for n in nodes:
        r = rank_of[id(n)]
        for i in n.inputs:
            if not isinstance(i, Value) or replicated(i):
                continue
            src = owner(i)
            if src == r:
                continue
            if n.op is graph_ops.GROUP:  # a control edge: make rank src run it; no data needed
                if all(v.id != i.id for v in control[src]):
                    control[src].append(i)
                continue
            key = (i.id, r)
            if key not in transfers:
                t = transfers[key] = Transfer(i, src, r, TAG_BASE + len(transfers))
                first_use.setdefault(id(n), []).append(t)
                after_producer.setdefault(i.id, []).append(t)

    # Pass 2: each rank's program in canonical order (see the module doc).
    graphs = [Graph(f"{graph.name}@rank:{r}") for r in range(world_size)]
    vmaps: list[dict] = [{} for _ in range(world_size)]
    roots: list[list[Value]] = [[] for _ in range(world_size)]
    since_recv: list[list[Value]] = [[] for _ in range(world_size)]  # send tokens since the last recv
    last_recv: list[Value | None] = [None] * world_size

    def local(v: Value, r: int) -> Value:
        """Rank r's copy of a leaf (input/state/const) or of a node output made on rank r."""
        got = vmaps[r].get(v.id)
        if got is not None:
            return got
        if v.kind == "node":
            raise AssertionError(f"partition: {v.label()} is used on rank:{r} before it is made there (an ember bug)")
        g = graphs[r]
        copy = Value(g, v.shape, v.edtype, v.device, v.kind, v.name)
        copy.data, copy.tensor = v.data, v.tensor  # the Variable's storage itself: writes persist across runs
        copy.rank = None if replicated(v) else r
        {"input": g.inputs, "state": g.states, "const": g.consts}[v.kind].append(copy)
        vmaps[r][v.id] = copy
        return copy

    def emit(r: int, op: OpDef, inputs: tuple, attrs: dict, outs: Sequence[Value] = ()) -> tuple:
        g = graphs[r]
        if outs:
            specs = tuple(Spec(o.shape, o.edtype, o.device) for o in outs)
            new = g.add_node(op, inputs, attrs, specs)
            for o, c in zip(outs, new):
                c.name, c.rank = o.name, r
                vmaps[r][o.id] = c
        else:
            new = g.add_node(op, inputs, attrs)
            for c in new:
                c.rank = r
        return new

    def send_all(v: Value) -> None:
        for t in after_producer.get(v.id, ()):
            (token,) = emit(t.src, SEND, (local(v, t.src),), {"dst": t.dst, "tag": t.tag})
            since_recv[t.src].append(token)
            roots[t.src].append(token)

    for leaf in [*graph.inputs, *graph.states]:  # placeholders and Variables are sent first
        send_all(leaf)
    for n in nodes:
        r = rank_of[id(n)]
        for t in first_use.get(id(n), ()):
            after = tuple(since_recv[r]) + ((last_recv[r],) if last_recv[r] is not None else ())
            v = t.value
            (got,) = emit(r, RECV, after, {"src": t.src, "tag": t.tag, "shape": v.shape, "dtype": v.edtype})
            got.name = v.name
            vmaps[r][v.id] = got
            since_recv[r], last_recv[r] = [], got
        ins = []
        for i in n.inputs:
            if not isinstance(i, Value):
                ins.append(i)
            elif n.op is graph_ops.GROUP and not replicated(i) and owner(i) != r:
                continue  # control edge (see pass 1)
            else:
                ins.append(local(i, r))
        emit(r, n.op, tuple(ins), dict(n.attrs), n.outputs)
        for out in n.outputs:
            send_all(out)

    owners = {}
    for v in fetches:
        o = owner(v)
        owners[v.id] = o
        if o is not None:
            roots[o].append(local(v, o))
    for r in range(world_size):
        roots[r].extend(local(v, r) for v in control[r])
        seen: set = set()
        graphs[r].outputs = [v for v in roots[r] if not (v.id in seen or seen.add(v.id))]
    return Partition(graphs, list(transfers.values()), vmaps, owners, fetches)
