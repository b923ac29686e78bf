"""The collectives of a ``"gloo"`` group, on the socket mesh: torch.distributed's signatures and results.

:mod:`ember.distributed.collectives` hands every call on a gloo group to the function of the same name
here. Each is a body run by :meth:`GlooGroup.run` (numbered, in order, in the calling thread or, with
``async_op=True``, on the group's worker thread). Algorithms, for ``n`` ranks and ``B`` bytes:

* ``all_reduce``: below 64 KiB (1 MiB with 2 ranks), every rank sends its whole buffer to every other
  and reduces the ``n`` buffers in rank order (one network step). Above it, a
  reduce-scatter (rank ``i`` receives block ``i`` from everyone and reduces it in rank order) then an
  all-gather of the reduced blocks: each rank sends ``2 (n-1)/n B`` bytes, what a ring sends (the
  bandwidth optimum), in 2 steps instead of the ring's ``2 (n-1)``. Both reduce every element in rank
  order, so the result is bitwise the same on every rank and for every size.
* ``broadcast``/``scatter``: the source sends to each rank; ``gather``/``reduce``: each rank sends to the
  destination; ``all_gather``/``all_to_all``/``reduce_scatter``: pairwise exchange.
* 16-bit floats are reduced in float32, bools as logical or/and (SUM/MAX: or, PRODUCT/MIN: and).

Example (2 ranks):
    >>> dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=r, world_size=2)  # doctest: +SKIP
    >>> t = ember.tensor([1.0 + r]); dist.all_reduce(t); t                                          # doctest: +SKIP
    tensor([3.])
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable

import numpy as np

from ember.distributed.collectives import (
    ReduceOp, _check, _check_list, _group_rank, _reduce_buffer, _store, check_gather_into,
)
from ember.distributed.gloo import objects
from ember.distributed.gloo.group import Call, GlooGroup, GlooWork
from ember.distributed.gloo.mesh import COLLECTIVE, P2P
from ember.distributed.process_group import default_group
from ember.distributed.watchdog import DistBackendError
from ember.tensor import Tensor

SPLIT_BYTES = 1 << 16  # all_reduce above this (with >= 3 ranks) goes reduce-scatter + all-gather
SPLIT_BYTES_TWO_RANKS = 1 << 20  # with 2 ranks the same bytes move either way; splitting halves the arithmetic
_OBJECT_TAG = -32000  # object messages never match tensor messages of user tags

_FUNCTIONS = {ReduceOp.SUM: np.add, ReduceOp.AVG: np.add, ReduceOp.PRODUCT: np.multiply, ReduceOp.MIN: np.minimum,
              ReduceOp.MAX: np.maximum, ReduceOp.BAND: np.bitwise_and, ReduceOp.BOR: np.bitwise_or,
              ReduceOp.BXOR: np.bitwise_xor}


def _group(group: Any, name: str) -> GlooGroup:
    g = default_group(group, name)
    if not isinstance(g, GlooGroup):
        raise RuntimeError(f"{name}: expected a 'gloo' process group, got {g!r}")
    return g


def _combine(op: Any, tensor: Any, name: str) -> Callable:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{name}: op must be an ember.distributed.ReduceOp, got {op!r}")
    if tensor._data.dtype == np.bool_:  # bools travel as 0/1 bytes: SUM is or, PRODUCT is and (torch's)
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    return _FUNCTIONS[op]


def _raw(array: np.ndarray) -> np.ndarray:
    """The bytes of a contiguous array (any dtype, ml_dtypes' bfloat16 included) for the socket."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _as(payload: Any, dtype: np.dtype) -> np.ndarray:
    """A received payload (uint8 array) seen as ``dtype`` (a view: no copy)."""
    return payload.view(dtype) if isinstance(payload, np.ndarray) else np.frombuffer(payload, dtype=dtype)


def _in_rank_order(parts: list[np.ndarray], fn: Callable) -> np.ndarray:
    out = parts[0].copy()
    for part in parts[1:]:
        fn(out, part, out=out)
    return out


def _finish(call: Call, op: ReduceOp, values: np.ndarray) -> None:
    if op is ReduceOp.AVG:
        np.divide(values, call.group.size(), out=values, casting="unsafe")


# ---- collectives -----------------------------------------------------------------------------------------
def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
    _check(tensor, "all_reduce")
    g = _group(group, "all_reduce")
    fn = _combine(op, tensor, "all_reduce")
    buf, _ = _reduce_buffer(tensor, op, "all_reduce")

    def body(call: Call) -> None:
        reduce_array(call, buf.reshape(-1), fn)
        _finish(call, op, buf)
        _store(tensor, buf)

    return g.run("all_reduce", body, async_op, [tensor])


def reduce_array(call: Call, flat: np.ndarray, fn: Callable) -> None:
    """All-reduce the 1-D contiguous ``flat`` in place (rank order), as the module docstring says."""
    g = call.group
    n, me = g.size(), g.rank()
    if n == 1:
        return
    others = [r for r in range(n) if r != me]
    if flat.nbytes < SPLIT_BYTES or (n == 2 and flat.nbytes < SPLIT_BYTES_TWO_RANKS):
        for r in others:
            call.send(r, 0, _raw(flat))
        got = {r: call.receive(r, 0, flat.nbytes) for r in others}
        _reduce_into(flat, me, {r: _as(p, flat.dtype) for r, p in got.items()}, fn)
        g.mesh.recycle(*got.values())
        return
    bounds = np.linspace(0, flat.size, n + 1).astype(np.int64)
    block = [flat[bounds[r]:bounds[r + 1]] for r in range(n)]
    for r in others:
        call.send(r, 0, _raw(block[r]))
    got = {r: call.receive(r, 0, block[me].nbytes) for r in others}
    _reduce_into(block[me], me, {r: _as(p, flat.dtype) for r, p in got.items()}, fn)
    g.mesh.recycle(*got.values())
    for r in others:
        call.send(r, 1, _raw(block[me]))
    for r in others:
        payload = call.receive(r, 1, block[r].nbytes)
        block[r][...] = _as(payload, flat.dtype)
        g.mesh.recycle(payload)


def _reduce_into(mine: np.ndarray, me: int, got: dict, fn: Callable) -> None:
    """``mine`` = part 0 (op) part 1 (op) ... in rank order, where part ``me`` is ``mine`` and the others are
    the received (writable) arrays in ``got``; no new memory (fresh pages cost more than the arithmetic)."""
    n = len(got) + 1
    if me == 0:
        for r in range(1, n):
            fn(mine, got[r], out=mine)
        return
    acc = got[0]
    for r in range(1, n):
        fn(acc, mine if r == me else got[r], out=acc)
    mine[...] = acc


def all_reduce_array(group: GlooGroup, flat: np.ndarray, name: str, async_op: bool = True) -> Any:
    """Sum the 1-D contiguous float ``flat`` in place across ``group`` (DistributedDataParallel's buckets)."""
    return group.run(name, lambda call: reduce_array(call, flat, np.add), async_op)


def reduce(tensor: Any, dst: int, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
    _check(tensor, "reduce")
    g = _group(group, "reduce")
    root = _group_rank(g, dst, "dst", "reduce")
    fn = _combine(op, tensor, "reduce")
    buf, _ = _reduce_buffer(tensor, op, "reduce")
    buf = buf.reshape(-1)

    def body(call: Call) -> None:
        me = g.rank()
        if me != root:
            call.send(root, 0, _raw(buf))
            return
        parts = [buf if r == me else _as(call.receive(r, 0, buf.nbytes), buf.dtype) for r in range(g.size())]
        out = _in_rank_order(parts, fn)
        _finish(call, op, out)
        _store(tensor, out)

    return g.run("reduce", body, async_op, [tensor])


def broadcast(tensor: Any, src: int, group: Any = None, async_op: bool = False) -> Any:
    _check(tensor, "broadcast")
    g = _group(group, "broadcast")
    root = _group_rank(g, src, "src", "broadcast")

    def body(call: Call) -> None:
        if g.rank() == root:
            data = _raw(tensor._data)
            for r in range(g.size()):
                if r != root:
                    call.send(r, 0, data)
        else:
            _store(tensor, _as(call.receive(root, 0, tensor._data.nbytes), tensor._data.dtype))

    return g.run("broadcast", body, async_op, [tensor])


def _exchange(call: Call, outgoing: list, sizes: list[int]) -> list:
    """Pairwise: send ``outgoing[r]`` (bytes, or None) to each other rank r; return what each sent here."""
    g = call.group
    me = g.rank()
    for r in range(g.size()):
        if r != me and outgoing[r] is not None:
            call.send(r, 0, outgoing[r])
    return [None if r == me else call.receive(r, 0, sizes[r]) for r in range(g.size())]


def all_gather(tensor_list: list, tensor: Any, group: Any = None, async_op: bool = False) -> Any:
    _check(tensor, "all_gather")
    g = _group(group, "all_gather")
    _check_list(tensor_list, tensor, g.size(), "all_gather", "tensor_list")
    data = _raw(tensor._data)

    def body(call: Call) -> None:
        got = _exchange(call, [data] * g.size(), [data.nbytes] * g.size())
        for r, out in enumerate(tensor_list):
            _store(out, data.view(tensor._data.dtype) if r == g.rank() else _as(got[r], tensor._data.dtype))

    return g.run("all_gather", body, async_op, tensor_list)


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: Any = None, async_op: bool = False) -> Any:
    _check(output_tensor, "all_gather_into_tensor")
    _check(input_tensor, "all_gather_into_tensor")
    g = _group(group, "all_gather_into_tensor")
    n = g.size()
    check_gather_into(output_tensor, input_tensor, n)
    data = _raw(input_tensor._data)
    dtype = input_tensor._data.dtype

    def body(call: Call) -> None:
        got = _exchange(call, [data] * n, [data.nbytes] * n)
        parts = [data.view(dtype) if r == g.rank() else _as(got[r], dtype) for r in range(n)]
        _store(output_tensor, np.concatenate(parts))

    return g.run("all_gather_into_tensor", body, async_op, [output_tensor])


def gather(tensor: Any, gather_list: list | None = None, dst: int = 0, group: Any = None,
           async_op: bool = False) -> Any:
    _check(tensor, "gather")
    g = _group(group, "gather")
    root = _group_rank(g, dst, "dst", "gather")
    if g.rank() == root:
        _check_list(gather_list, tensor, g.size(), "gather", "gather_list")
    data = _raw(tensor._data)

    def body(call: Call) -> None:
        if g.rank() != root:
            call.send(root, 0, data)
            return
        for r, out in enumerate(gather_list):
            _store(out, data.view(tensor._data.dtype) if r == root else
                   _as(call.receive(r, 0, data.nbytes), tensor._data.dtype))

    return g.run("gather", body, async_op, gather_list or [])


def scatter(tensor: Any, scatter_list: list | None = None, src: int = 0, group: Any = None,
            async_op: bool = False) -> Any:
    _check(tensor, "scatter")
    g = _group(group, "scatter")
    root = _group_rank(g, src, "src", "scatter")
    if g.rank() == root:
        _check_list(scatter_list, tensor, g.size(), "scatter", "scatter_list")

    def body(call: Call) -> None:
        if g.rank() == root:
            for r, part in enumerate(scatter_list):
                if r != root:
                    call.send(r, 0, _raw(part._data))
            _store(tensor, np.array(scatter_list[root]._data))
        else:
            _store(tensor, _as(call.receive(root, 0, tensor._data.nbytes), tensor._data.dtype))

    return g.run("scatter", body, async_op, [tensor])


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002 - torch's name
                          group: Any = None, async_op: bool = False) -> Any:
    _check(output, "reduce_scatter_tensor")
    _check(input, "reduce_scatter_tensor")
    g = _group(group, "reduce_scatter_tensor")
    n, shape = g.size(), tuple(output.shape)
    if tuple(input.shape) not in ((n,) + shape, ((n * shape[0],) + shape[1:]) if shape else None):
        raise ValueError(f"reduce_scatter_tensor: input of shape {tuple(input.shape)} must hold {n} blocks of the "
                         f"output's shape {shape} along dim 0")
    fn = _combine(op, input, "reduce_scatter_tensor")
    buf, _ = _reduce_buffer(input, op, "reduce_scatter_tensor")
    blocks = np.ascontiguousarray(buf).reshape(n, -1)

    def body(call: Call) -> None:
        me = g.rank()
        got = _exchange(call, [_raw(blocks[r]) for r in range(n)], [blocks[me].nbytes] * n)
        parts = [blocks[me] if r == me else _as(got[r], blocks.dtype) for r in range(n)]
        out = _in_rank_order(parts, fn)
        _finish(call, op, out)
        _store(output, out)

    return g.run("reduce_scatter_tensor", body, async_op, [output])


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Any:
    g = _group(group, "reduce_scatter")
    _check_list(input_list, output, g.size(), "reduce_scatter", "input_list")
    stacked = Tensor._make(np.stack([t._data for t in input_list]), output.device, False)
    return reduce_scatter_tensor(output, stacked, op, g, async_op)


def all_to_all_single(output: Any, input: Any, output_split_sizes: list | None = None,  # noqa: A002
                      input_split_sizes: list | None = None, group: Any = None, async_op: bool = False) -> Any:
    _check(output, "all_to_all_single")
    _check(input, "all_to_all_single")
    g = _group(group, "all_to_all_single")
    n = g.size()
    ins = _splits(input, input_split_sizes, n, "input")
    outs = _splits(output, output_split_sizes, n, "output")
    row_in = int(np.prod(input.shape[1:], dtype=np.int64)) if input.shape else 1
    row_out = int(np.prod(output.shape[1:], dtype=np.int64)) if output.shape else 1
    source = np.ascontiguousarray(input._data).reshape(-1)
    item = source.itemsize
    starts = np.concatenate([[0], np.cumsum(ins)]) * row_in
    out_starts = np.concatenate([[0], np.cumsum(outs)]) * row_out

    def body(call: Call) -> None:
        me = g.rank()
        pieces = [_raw(source[starts[r]:starts[r + 1]]) for r in range(n)]
        got = _exchange(call, pieces, [int(outs[r] * row_out * item) for r in range(n)])
        result = np.empty(int(out_starts[-1]), source.dtype)
        for r in range(n):
            result[out_starts[r]:out_starts[r + 1]] = (source[starts[me]:starts[me + 1]] if r == me
                                                       else _as(got[r], source.dtype))
        _store(output, result)

    return g.run("all_to_all_single", body, async_op, [output])


def _splits(tensor: Any, sizes: list | None, n: int, what: str) -> list[int]:
    rows = tensor.shape[0] if tensor.shape else 0
    if sizes is None:
        if rows % n:
            raise ValueError(f"all_to_all_single: the {what}'s dim 0 ({rows}) must be divisible by the group size {n} "
                             f"(or pass {what}_split_sizes)")
        return [rows // n] * n
    sizes = [int(s) for s in sizes]
    if len(sizes) != n or sum(sizes) != rows:
        raise ValueError(f"all_to_all_single: {what}_split_sizes {sizes} must have {n} entries summing to dim 0 "
                         f"({rows})")
    return sizes


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: Any = None, async_op: bool = False) -> Any:
    g = _group(group, "all_to_all")
    n = g.size()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists must hold one tensor per rank ({n}), got "
                         f"{len(output_tensor_list)} and {len(input_tensor_list)}")
    for t in list(output_tensor_list) + list(input_tensor_list):
        _check(t, "all_to_all")

    def body(call: Call) -> None:
        me = g.rank()
        got = _exchange(call, [_raw(t._data) for t in input_tensor_list],
                        [t._data.nbytes for t in output_tensor_list])
        for r, out in enumerate(output_tensor_list):
            _store(out, np.array(input_tensor_list[me]._data) if r == me else _as(got[r], out._data.dtype))

    return g.run("all_to_all", body, async_op, output_tensor_list)


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
    g = _group(group, "barrier")
    empty = b""
    return g.run("barrier", lambda call: _exchange(call, [empty] * g.size(), [0] * g.size()) and None, async_op)


def monitored_barrier(group: Any = None, timeout: Any = None, wait_all_ranks: bool = False) -> None:
    """torch's monitored_barrier: rank 0 of the group waits for every other rank for ``timeout`` and raises
    naming the ranks that did not arrive (all of them with ``wait_all_ranks``); the others wait for its answer."""
    from datetime import timedelta

    g = _group(group, "monitored_barrier")
    limit = g.timeout if timeout is None else (timeout if isinstance(timeout, timedelta)
                                               else timedelta(seconds=float(timeout)))
    ms = int(limit.total_seconds() * 1000)

    def body(call: Call) -> None:
        call.deadline = time.monotonic() + limit.total_seconds()
        me, n = g.rank(), g.size()
        if me != 0:
            call.send(0, 0, b"")
            try:
                call.receive(0, 1, 0)
            except DistBackendError as error:
                raise DistBackendError(f"monitored_barrier: rank {g.world_ranks[0]} (the group's rank 0) did not "
                                       f"answer this rank ({g.world_ranks[me]}) within {ms} ms: {error}") from None
            return
        late = []
        for r in range(1, n):
            try:
                g.mesh.receive(g.world_ranks[r], COLLECTIVE, g.wire_id, call.seq, 0, call.deadline, None,
                               call.where())
            except DistBackendError:
                late.append(g.world_ranks[r])
                if not wait_all_ranks:
                    break
        if late:
            if wait_all_ranks:
                raise DistBackendError(f"Ranks {', '.join(map(str, late))} failed to pass monitoredBarrier in {ms} ms")
            raise DistBackendError(f"Rank {late[0]} failed to pass monitoredBarrier in {ms} ms")
        for r in range(1, n):
            call.send(r, 1, b"")

    g.run("monitored_barrier", body, False)


# ---- point to point ------------------------------------------------------------------------------------------
def _p2p_timeout(g: GlooGroup, what: str, src: int | None) -> Callable[[], None]:
    def report() -> None:
        peers = [src] if src is not None else [r for r in g.world_ranks if r != g.mesh.rank]
        answers = g.mesh.ask(peers)
        notes = []
        for r in peers:
            doing = [w for group in answers.get(r, {}).get("groups", {}).values() for w in group.get("waiting", [])]
            notes.append(f"rank {r} " + ("did not answer" if r not in answers else
                                         f"waits in {doing[0]}" if doing else "is not communicating"))
        raise DistBackendError(f"{what} timed out after {g.timeout} on rank {g.mesh.rank}: no matching message "
                               f"arrived ({'; '.join(notes)}). Sends and receives must pair up (same tag).")
    return report


def send(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> None:
    _check(tensor, "send")
    g = _group(group, "send")
    _group_rank(g, dst, "dst", "send")
    if dst == g.mesh.rank:
        raise ValueError(f"send: dst={dst} is this rank; a rank cannot send to itself")
    what = f"send to rank {dst} (tag {tag})"
    g.mesh.send(dst, P2P, g.wire_id, int(tag), 0, _raw(tensor._data), what)


def isend(tensor: Any, dst: int, group: Any = None, tag: int = 0) -> GlooWork:
    """Sends at once (the bytes are in the socket when it returns), so the Work is already complete."""
    send(tensor, dst, group, tag)
    work = GlooWork("isend", lambda: None, [tensor])
    work.execute()
    return work


def _receive(g: GlooGroup, tensor: Any, src: int | None, tag: int, name: str) -> int:
    what = f"{name} from {'any rank' if src is None else f'rank {src}'} (tag {tag})"
    deadline = time.monotonic() + g.timeout.total_seconds()
    if src is None:
        others = [r for r in g.world_ranks if r != g.mesh.rank]
        src, payload = g.mesh.receive_any(others, P2P, g.wire_id, int(tag), deadline,
                                          _p2p_timeout(g, what, None), what)
    else:
        payload = g.mesh.receive(src, P2P, g.wire_id, int(tag), 0, deadline, _p2p_timeout(g, what, src), what)
    if len(payload) != tensor._data.nbytes:
        raise DistBackendError(f"{what}: rank {src} sent {len(payload)} bytes into a tensor of {tensor._data.nbytes} "
                               f"bytes (shape {tuple(tensor.shape)}, {tensor.dtype}); the tensors must match")
    _store(tensor, _as(payload, tensor._data.dtype))
    return src


def recv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> int:
    """Receive into ``tensor``; returns the sender's world rank."""
    _check(tensor, "recv")
    g = _group(group, "recv")
    if src is not None:
        _group_rank(g, src, "src", "recv")
    return _receive(g, tensor, src, tag, "recv")


_POSTED: dict = {}  # (group id, src, tag) -> irecv works in the order they were posted


class _ReceiveWork(GlooWork):
    """An irecv: the reader thread already holds arriving messages, so wait() takes the next one (earlier
    irecvs from the same source and tag take theirs first, so they match in the order posted)."""

    def __init__(self, g: GlooGroup, tensor: Any, src: int | None, tag: int) -> None:
        super().__init__("irecv", lambda: _receive(g, tensor, src, tag, "irecv"), [tensor])
        self._key = (id(g), src, tag)
        _POSTED.setdefault(self._key, deque()).append(self)

    def wait(self, timeout: Any = None) -> bool:
        line = _POSTED.get(self._key, deque())
        while not self._event.is_set():
            first = line[0] if line else self
            if line:
                line.popleft()
            first.execute()
        return super().wait(timeout)

    def is_completed(self) -> bool:
        return self._event.is_set()


def irecv(tensor: Any, src: int | None = None, group: Any = None, tag: int = 0) -> GlooWork:
    _check(tensor, "irecv")
    g = _group(group, "irecv")
    if src is not None:
        _group_rank(g, src, "src", "irecv")
    return _ReceiveWork(g, tensor, src, int(tag))


# ---- Python objects (restricted unpickling: see objects.py) -------------------------------------------------
def _run_objects(g: GlooGroup, name: str, body: Callable[[Call], Any]) -> Any:
    return g.run(name, body, False)


def broadcast_object_list(object_list: list, src: int = 0, group: Any = None, device: Any = None) -> None:
    g = _group(group, "broadcast_object_list")
    root = _group_rank(g, src, "src", "broadcast_object_list")

    def body(call: Call) -> None:
        if g.rank() == root:
            payload = objects.dumps(list(object_list))
            for r in range(g.size()):
                if r != root:
                    call.send(r, 0, payload)
        else:
            object_list[:] = objects.loads(call.receive(root, 0), f"broadcast_object_list from rank {src}")

    _run_objects(g, "broadcast_object_list", body)


def all_gather_object(object_list: list, obj: Any, group: Any = None) -> None:
    g = _group(group, "all_gather_object")
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list must have one slot per rank ({g.size()}), "
                         f"got {len(object_list)}")
    payload = objects.dumps(obj)

    def body(call: Call) -> None:
        got = _exchange(call, [payload] * g.size(), [None] * g.size())
        object_list[:] = [obj if r == g.rank() else objects.loads(got[r], f"all_gather_object from rank "
                                                                  f"{g.world_ranks[r]}") for r in range(g.size())]
        object_list[g.rank()] = objects.loads(payload, "all_gather_object")  # a copy, as the others get

    _run_objects(g, "all_gather_object", body)


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int = 0, group: Any = None) -> None:
    g = _group(group, "gather_object")
    root = _group_rank(g, dst, "dst", "gather_object")
    payload = objects.dumps(obj)

    def body(call: Call) -> None:
        if g.rank() != root:
            call.send(root, 0, payload)
            return
        if object_gather_list is None or len(object_gather_list) != g.size():
            raise ValueError(f"gather_object: the destination needs object_gather_list with {g.size()} slots")
        object_gather_list[:] = [objects.loads(payload if r == root else call.receive(r, 0),
                                               f"gather_object from rank {g.world_ranks[r]}") for r in range(g.size())]

    _run_objects(g, "gather_object", body)


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None = None,
                        src: int = 0, group: Any = None) -> None:
    g = _group(group, "scatter_object_list")
    root = _group_rank(g, src, "src", "scatter_object_list")
    n = g.size()
    if g.rank() == root and (scatter_object_input_list is None or len(scatter_object_input_list) != n):
        raise ValueError(f"scatter_object_list: the source needs one object per rank ({n})")

    def body(call: Call) -> None:
        if g.rank() == root:
            parts = [objects.dumps(o) for o in scatter_object_input_list]
            for r in range(n):
                if r != root:
                    call.send(r, 0, parts[r])
            scatter_object_output_list[0] = objects.loads(parts[root], "scatter_object_list")
        else:
            scatter_object_output_list[0] = objects.loads(call.receive(root, 0), f"scatter_object_list from rank {src}")

    _run_objects(g, "scatter_object_list", body)


def send_object_list(object_list: list, dst: int, group: Any = None, device: Any = None) -> None:
    g = _group(group, "send_object_list")
    _group_rank(g, dst, "dst", "send_object_list")
    g.mesh.send(dst, P2P, g.wire_id, _OBJECT_TAG, 0, objects.dumps(list(object_list)), f"send_object_list to {dst}")


def recv_object_list(object_list: list, src: int | None = None, group: Any = None, device: Any = None) -> int:
    g = _group(group, "recv_object_list")
    what = f"recv_object_list from {'any rank' if src is None else f'rank {src}'}"
    deadline = time.monotonic() + g.timeout.total_seconds()
    if src is None:
        src, payload = g.mesh.receive_any([r for r in g.world_ranks if r != g.mesh.rank], P2P, g.wire_id,
                                          _OBJECT_TAG, deadline, _p2p_timeout(g, what, None), what)
    else:
        _group_rank(g, src, "src", "recv_object_list")
        payload = g.mesh.receive(src, P2P, g.wire_id, _OBJECT_TAG, 0, deadline, _p2p_timeout(g, what, src), what)
    values = objects.loads(payload, what)
    object_list[:len(values)] = values
    return src
