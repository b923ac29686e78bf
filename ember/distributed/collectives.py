"""Collective and point-to-point communication of tensors over MPI, with torch.distributed's API.

Every operation is written once as "start a non-blocking MPI call, then finish": the blocking form
waits at once, ``async_op=True`` returns a :class:`Work` to wait on later (which lets
DistributedDataParallel overlap gradient all-reduces with the rest of the backward pass).
Results land in the given tensors in place, and their version counters move, as in torch.
``src``/``dst`` are world ranks even when ``group`` is a subgroup, as in torch.

Example (under ``mpiexec -n 2``):
    >>> import ember, ember.distributed as dist   # doctest: +SKIP
    >>> dist.init_process_group("mpi")            # doctest: +SKIP
    >>> t = ember.ones(3) * (dist.get_rank() + 1)  # doctest: +SKIP
    >>> dist.all_reduce(t); t                      # doctest: +SKIP
    tensor([3., 3., 3.])
"""
from __future__ import annotations

import enum
import pickle
from typing import Any, Callable, Sequence

import numpy as np

from ember.distributed import watchdog
from ember.distributed.process_group import _WORLD, ProcessGroup, _mpi, default_group
from ember.device import CPU
from ember.tensor import Tensor


class ReduceOp(enum.Enum):
    """How values from all ranks combine. AVG is SUM divided by the group size (floating point only)."""

    SUM = "sum"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"
    AVG = "avg"


_MPI_OPS = {ReduceOp.SUM: "SUM", ReduceOp.AVG: "SUM", ReduceOp.PRODUCT: "PROD", ReduceOp.MIN: "MIN",
            ReduceOp.MAX: "MAX", ReduceOp.BAND: "BAND", ReduceOp.BOR: "BOR", ReduceOp.BXOR: "BXOR"}


class Work:
    """A started communication: ``wait()`` blocks until it is done and its results are in place."""

    def __init__(self, requests: Sequence[Any], finish: Callable[[], Any] | None = None,
                 result: Sequence[Any] = (), pending: "watchdog.Pending | None" = None) -> None:
        self._pending = pending
        self._requests = list(requests)
        self._finish = finish
        self._result = list(result)
        self._done = False
        self._value: Any = None

    def _complete(self) -> None:
        self._done = True
        if self._finish is not None:
            self._value = self._finish()
            self._finish = None
        self._requests = []

    def wait(self, timeout: Any = None) -> bool:
        """Block until done; raises DistBackendError after ``timeout`` (default: the group's) or when a rank
        this work needs has ended its script."""
        if not self._done:
            if self._requests:
                pending = self._pending or watchdog.Pending("communication", default_group(None, "wait"), seq=0)
                if timeout is not None:
                    pending = watchdog.with_timeout(pending, timeout)
                watchdog.wait_requests(_mpi(), self._requests, pending)
            self._complete()
        return True

    def is_completed(self) -> bool:
        """Poll without blocking (polling also lets MPI make progress on the transfer)."""
        if not self._done and (not self._requests or _mpi().Request.Testall(self._requests)):
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self._done

    def result(self) -> list:
        self.wait()
        return self._result

    def __repr__(self) -> str:
        return f"Work(completed={self._done})"


def _gloo_ops(group: Any) -> Any:
    """The socket engine's operations when ``group`` (None: the default group) is a 'gloo' group, else None."""
    g = _WORLD[0] if group is None else group
    if getattr(g, "backend", None) == "gloo":
        from ember.distributed.gloo import ops

        return ops
    return None


# ---- buffers ------------------------------------------------------------------------------------------
def _check(tensor: Any, op: str) -> None:
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{op}: expected an ember.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise RuntimeError(f"{op}: ember's 'mpi' and 'gloo' backends communicate host memory, but the tensor is on "
                           f"{tensor.device}; move it with .cpu() first (NCCL for GPU tensors needs the CUDA backend)")


def _on_device(tensor: Any) -> bool:
    device = getattr(tensor, "device", None)
    return device is not None and getattr(device, "type", "cpu") != "cpu"


def _staged(tensor: Any, run: Callable[[Any], Any], async_op: bool) -> Any:
    """Run a host collective on a host copy of device ``tensor`` and copy the result back (when the
    work completes, for ``async_op``): MPI with host staging, for GPU tensors."""

    device = tensor.device
    host = Tensor._make(np.array(device.backend.to_numpy(tensor._data)), CPU, False)

    def back() -> None:
        tensor._data[...] = device.backend.asarray(host._data, index=device.index or 0)
        tensor._bump()

    result = run(host)
    if async_op and result is not None and not result._done:
        inner = result._finish

        def finish() -> Any:
            value = inner() if inner is not None else None
            back()
            return value

        result._finish = finish
    else:
        back()
    return result


def _send_view(tensor: Any) -> np.ndarray:
    """A contiguous array with the tensor's bytes (for ops that only move data)."""
    data = np.ascontiguousarray(tensor._data)
    return data if _plain(data.dtype) else data.view(np.uint8)


def _plain(dtype: np.dtype) -> bool:
    # float16 and ml_dtypes' bfloat16 have no MPI datatype everywhere: move them as raw bytes.
    return dtype.itemsize >= 4 or dtype.kind in "biu"


def _reduce_buffer(tensor: Any, op: ReduceOp, name: str) -> tuple[np.ndarray, bool]:
    """A contiguous array to reduce in; True when it is a copy that must be written back."""
    data = tensor._data
    if op is ReduceOp.AVG and data.dtype.kind not in "fc" and not _is_low_float(data.dtype):
        raise RuntimeError(f"{name}: ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype}; "
                           "use ReduceOp.SUM and divide, or convert with .float()")
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and data.dtype.kind not in "biu":
        raise RuntimeError(f"{name}: bitwise {op.name} needs an integer or bool tensor, got {tensor.dtype}")
    if _is_low_float(data.dtype):  # reduce 16-bit floats in float32, as NCCL's accumulators do
        return data.astype(np.float32), True
    if data.dtype == np.bool_:  # MPI defines no MAX/MIN/SUM/BOR on C_BOOL: reduce the 0/1 bytes instead
        contiguous = data.flags.c_contiguous and data.flags.writeable
        return (data if contiguous else np.ascontiguousarray(data)).view(np.uint8), True
    if data.flags.c_contiguous and data.flags.writeable:
        return data, False
    return np.ascontiguousarray(data), True


def _is_low_float(dtype: np.dtype) -> bool:
    return dtype.itemsize == 2 and dtype.kind not in "iu"


def _store(tensor: Any, values: np.ndarray) -> None:
    """Write ``values`` into the tensor in place and mark it modified."""
    data = tensor._data
    if values is not data:
        data[...] = values.astype(data.dtype, copy=False).reshape(data.shape)
    tensor._bump()


def _mpi_op(op: ReduceOp | Any, name: str, tensor: Any = None) -> Any:
    if not isinstance(op, ReduceOp):
        raise TypeError(f"{name}: op must be an ember.distributed.ReduceOp, got {op!r}")
    if tensor is not None and tensor._data.dtype == np.bool_:
        # bools travel as 0/1 bytes; torch's SUM and PRODUCT of bools are logical or / and
        op = {ReduceOp.SUM: ReduceOp.MAX, ReduceOp.PRODUCT: ReduceOp.MIN}.get(op, op)
    return getattr(_mpi(), _MPI_OPS[op])


def _group_rank(group: ProcessGroup, world_rank: int, what: str, name: str) -> int:
    try:
        return group.world_ranks.index(world_rank)
    except ValueError:
        raise ValueError(f"{name}: {what}={world_rank} is not a member of the group (world ranks "
                         f"{list(group.world_ranks)})") from None


# Memory that async operations not yet waited read or write. Another operation on overlapping memory, where
# either one writes, would race inside MPI (torch's backends run such ops in order instead); it is refused.
# "Done" means wait() (or a True is_completed()) was seen, never a poll made here: a poll can answer
# differently on each rank, and a refusal on one rank only would leave the others hanging in the collective.
_INFLIGHT: list = []  # [array, writes, op name, weakref to the Work]


def _guard(name: str, reads: Sequence[Any] = (), writes: Sequence[Any] = ()) -> list:
    """Refuse an operation whose tensors overlap those of an unfinished async one (one of them writing);
    returns what this operation touches, for :func:`_track`."""
    touched = [(t._data, False) for t in reads if t is not None] + [(t._data, True) for t in writes if t is not None]
    live = [entry for entry in _INFLIGHT if entry[3]() is not None and not entry[3]()._done]
    _INFLIGHT[:] = live
    for array, writing, other, _ in live:
        for data, mine in touched:
            if (writing or mine) and np.may_share_memory(array, data):
                raise RuntimeError(f"{name}: a tensor of shape {data.shape} ({data.dtype}) is still in use by an "
                                   f"unfinished async {other} that {'writes' if writing else 'reads'} it; call "
                                   f"wait() on that work first (MPI would race on the shared memory)")
    return touched


def _track(work: "Work", touched: list, name: str) -> "Work":
    from weakref import ref  # a dropped Work can never be waited: it stops guarding its tensors

    _INFLIGHT.extend([data, writes, name, ref(work)] for data, writes in touched)
    return work


def _start(g: ProcessGroup, name: str) -> "watchdog.Pending":
    """Count a collective on ``g`` as started by this rank (just before its MPI call)."""
    return watchdog.begin_collective(g, name)


def _run(requests: list, finish: Callable[[], Any] | None, async_op: bool, result: Sequence[Any] = (),
         touched: Sequence[Any] = (), name: str = "", pending: "watchdog.Pending | None" = None) -> Any:
    work = Work(requests, finish, result, pending)
    if async_op:
        return _track(work, list(touched), name)
    work.wait()
    return work._value


# ---- collectives --------------------------------------------------------------------------------------
def all_reduce(tensor: Any, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Combine ``tensor`` across the group with ``op``; every rank ends with the result.
    A GPU tensor travels through host memory (DistributedDataParallel uses NCCL where it can)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_reduce(tensor, op, group, async_op)
    if _on_device(tensor):
        return _staged(tensor, lambda host: all_reduce(host, op, group, async_op), async_op)
    _check(tensor, "all_reduce")
    g = default_group(group, "all_reduce")
    touched = _guard("all_reduce", writes=[tensor])
    buf, copied = _reduce_buffer(tensor, op, "all_reduce")
    pending = _start(g, "all_reduce")
    request = g.comm.Iallreduce(_mpi().IN_PLACE, buf, op=_mpi_op(op, "all_reduce", tensor))

    def finish() -> None:
        if op is ReduceOp.AVG:
            np.divide(buf, g.size(), out=buf, casting="unsafe")
        _store(tensor, buf)

    return _run([request], finish, async_op, [tensor], touched, "all_reduce", pending)


def reduce(tensor: Any, dst: int, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
           async_op: bool = False) -> Work | None:
    """Combine ``tensor`` across the group into rank ``dst``'s tensor (others keep theirs)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.reduce(tensor, dst, op, group, async_op)
    _check(tensor, "reduce")
    g = default_group(group, "reduce")
    root = _group_rank(g, dst, "dst", "reduce")
    touched = _guard("reduce", reads=[tensor], writes=[tensor] if g.rank() == root else [])
    buf, _ = _reduce_buffer(tensor, op, "reduce")
    send = buf.copy()
    recv = np.empty_like(buf) if g.rank() == root else None
    pending = _start(g, "reduce")
    request = g.comm.Ireduce(send, recv, op=_mpi_op(op, "reduce", tensor), root=root)

    def finish() -> None:
        if recv is not None:
            if op is ReduceOp.AVG:
                np.divide(recv, g.size(), out=recv, casting="unsafe")
            _store(tensor, recv)

    return _run([request], finish, async_op, [tensor], touched, "reduce", pending)


def broadcast(tensor: Any, src: int, group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Copy rank ``src``'s tensor into every rank's tensor (shapes and dtypes must agree)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.broadcast(tensor, src, group, async_op)
    if _on_device(tensor):
        return _staged(tensor, lambda host: broadcast(host, src, group, async_op), async_op)
    _check(tensor, "broadcast")
    g = default_group(group, "broadcast")
    root = _group_rank(g, src, "src", "broadcast")
    touched = _guard("broadcast", **{"reads" if g.rank() == root else "writes": [tensor]})
    buf = _send_view(tensor).copy() if g.rank() != root else _send_view(tensor)
    pending = _start(g, "broadcast")
    request = g.comm.Ibcast(buf, root=root)

    def finish() -> None:
        if g.rank() != root:
            _store(tensor, buf.view(tensor._data.dtype))

    return _run([request], finish, async_op, [tensor], touched, "broadcast", pending)


def check_gather_into(output_tensor: Any, input_tensor: Any, n: int) -> None:
    """``all_gather_into_tensor``'s output rule (MPI and gloo engines): stacked (n, *shape) or concatenated
    along dim 0 (n * shape[0], ...), the input's dtype.

    Example: check_gather_into(ember.empty(4, 3), ember.empty(2, 3), 2)  # passes (concatenated)
    """
    shape = tuple(input_tensor.shape)
    stacked = (n,) + shape
    concatenated = (n * shape[0],) + shape[1:] if shape else None
    if tuple(output_tensor.shape) not in (stacked, concatenated) or output_tensor.dtype != input_tensor.dtype:
        raise ValueError(f"all_gather_into_tensor: output must have shape {stacked} or {concatenated} and dtype "
                         f"{input_tensor.dtype}; got {tuple(output_tensor.shape)} {output_tensor.dtype}")


def all_gather_into_tensor(output_tensor: Any, input_tensor: Any, group: ProcessGroup | None = None,
                           async_op: bool = False) -> Work | None:
    """Gather every rank's ``input_tensor`` into ``output_tensor``: stacked (world, *shape) or
    concatenated along dim 0 (world * n, ...)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_gather_into_tensor(output_tensor, input_tensor, group, async_op)
    _check(output_tensor, "all_gather_into_tensor")
    _check(input_tensor, "all_gather_into_tensor")
    g = default_group(group, "all_gather_into_tensor")
    n = g.size()
    check_gather_into(output_tensor, input_tensor, n)
    touched = _guard("all_gather_into_tensor", reads=[input_tensor], writes=[output_tensor])
    send = _send_view(input_tensor)
    recv = np.empty((n,) + send.shape, send.dtype)
    pending = _start(g, "all_gather_into_tensor")
    request = g.comm.Iallgather(send, recv)

    def finish() -> None:
        _store(output_tensor, recv.view(input_tensor._data.dtype))

    return _run([request], finish, async_op, [output_tensor], touched, "all_gather_into_tensor", pending)


def all_gather(tensor_list: list, tensor: Any, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Fill ``tensor_list[i]`` with rank i's ``tensor`` on every rank."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_gather(tensor_list, tensor, group, async_op)
    _check(tensor, "all_gather")
    g = default_group(group, "all_gather")
    _check_list(tensor_list, tensor, g.size(), "all_gather", "tensor_list")
    touched = _guard("all_gather", reads=[tensor], writes=tensor_list)
    send = _send_view(tensor)
    recv = np.empty((g.size(),) + send.shape, send.dtype)
    pending = _start(g, "all_gather")
    request = g.comm.Iallgather(send, recv)

    def finish() -> None:
        for i, out in enumerate(tensor_list):
            _store(out, recv[i].view(tensor._data.dtype))

    return _run([request], finish, async_op, tensor_list, touched, "all_gather", pending)


def gather(tensor: Any, gather_list: list | None = None, dst: int = 0, group: ProcessGroup | None = None,
           async_op: bool = False) -> Work | None:
    """Collect every rank's ``tensor`` into ``gather_list`` on rank ``dst``."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.gather(tensor, gather_list, dst, group, async_op)
    _check(tensor, "gather")
    g = default_group(group, "gather")
    root = _group_rank(g, dst, "dst", "gather")
    if g.rank() == root:
        _check_list(gather_list, tensor, g.size(), "gather", "gather_list")
    touched = _guard("gather", reads=[tensor], writes=gather_list if g.rank() == root else [])
    send = _send_view(tensor)
    recv = np.empty((g.size(),) + send.shape, send.dtype) if g.rank() == root else None
    pending = _start(g, "gather")
    request = g.comm.Igather(send, recv, root=root)

    def finish() -> None:
        if recv is not None:
            for i, out in enumerate(gather_list):
                _store(out, recv[i].view(tensor._data.dtype))

    return _run([request], finish, async_op, gather_list or [], touched, "gather", pending)


def scatter(tensor: Any, scatter_list: list | None = None, src: int = 0, group: ProcessGroup | None = None,
            async_op: bool = False) -> Work | None:
    """Rank ``src`` sends ``scatter_list[i]`` to rank i, which receives it into ``tensor``."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.scatter(tensor, scatter_list, src, group, async_op)
    _check(tensor, "scatter")
    g = default_group(group, "scatter")
    root = _group_rank(g, src, "src", "scatter")
    send = None
    touched = _guard("scatter", writes=[tensor])
    if g.rank() == root:
        _check_list(scatter_list, tensor, g.size(), "scatter", "scatter_list")
        send = np.stack([_send_view(t) for t in scatter_list])
    recv = np.empty_like(_send_view(tensor))
    pending = _start(g, "scatter")
    request = g.comm.Iscatter(send, recv, root=root)

    def finish() -> None:
        _store(tensor, recv.view(tensor._data.dtype))

    return _run([request], finish, async_op, [tensor], touched, "scatter", pending)


def reduce_scatter_tensor(output: Any, input: Any, op: ReduceOp = ReduceOp.SUM,  # noqa: A002 - torch's name
                          group: ProcessGroup | None = None, async_op: bool = False) -> Work | None:
    """Reduce ``input`` (world * n along dim 0) across ranks; rank i keeps block i in ``output``."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.reduce_scatter_tensor(output, input, op, group, async_op)
    _check(output, "reduce_scatter_tensor")
    _check(input, "reduce_scatter_tensor")
    g = default_group(group, "reduce_scatter_tensor")
    n, shape = g.size(), tuple(output.shape)
    if tuple(input.shape) not in ((n,) + shape, ((n * shape[0],) + shape[1:]) if shape else None):
        raise ValueError(f"reduce_scatter_tensor: input of shape {tuple(input.shape)} must hold {n} blocks of the "
                         f"output's shape {shape} along dim 0")
    touched = _guard("reduce_scatter_tensor", reads=[input], writes=[output])
    buf, _ = _reduce_buffer(input, op, "reduce_scatter_tensor")
    send = np.ascontiguousarray(buf)
    recv = np.empty(shape, send.dtype)
    pending = _start(g, "reduce_scatter_tensor")
    request = g.comm.Ireduce_scatter_block(send, recv, op=_mpi_op(op, "reduce_scatter_tensor", input))

    def finish() -> None:
        if op is ReduceOp.AVG:
            np.divide(recv, n, out=recv, casting="unsafe")
        _store(output, recv)

    return _run([request], finish, async_op, [output], touched, "reduce_scatter_tensor", pending)


def reduce_scatter(output: Any, input_list: list, op: ReduceOp = ReduceOp.SUM, group: ProcessGroup | None = None,
                   async_op: bool = False) -> Work | None:
    """Reduce ``input_list[i]`` across ranks into rank i's ``output``."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.reduce_scatter(output, input_list, op, group, async_op)
    g = default_group(group, "reduce_scatter")
    _check_list(input_list, output, g.size(), "reduce_scatter", "input_list")

    stacked = Tensor._make(np.stack([t._data for t in input_list]), output.device, False)
    return reduce_scatter_tensor(output, stacked, op, group, async_op)


def all_to_all_single(output: Any, input: Any, output_split_sizes: list | None = None,  # noqa: A002
                      input_split_sizes: list | None = None, group: ProcessGroup | None = None,
                      async_op: bool = False) -> Work | None:
    """Split ``input`` into world-size equal blocks along dim 0; block i goes to rank i, and block j of
    ``output`` comes from rank j."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_to_all_single(output, input, output_split_sizes, input_split_sizes, group, async_op)
    _check(output, "all_to_all_single")
    _check(input, "all_to_all_single")
    g = default_group(group, "all_to_all_single")
    n = g.size()
    if output_split_sizes is not None or input_split_sizes is not None:
        even = [input.shape[0] // n] * n if input.shape else None
        if list(output_split_sizes or even) != even or list(input_split_sizes or even) != even:
            raise NotImplementedError("all_to_all_single: uneven split sizes run on the 'gloo' backend only; on "
                                      "'mpi' split dim 0 evenly")
    if tuple(output.shape) != tuple(input.shape) or not input.shape or input.shape[0] % n:
        raise ValueError(f"all_to_all_single: input and output must have the same shape with dim 0 divisible by "
                         f"the world size {n}; got {tuple(input.shape)} and {tuple(output.shape)}")
    touched = _guard("all_to_all_single", reads=[input], writes=[output])
    send = _send_view(input)
    recv = np.empty_like(send)
    pending = _start(g, "all_to_all_single")
    request = g.comm.Ialltoall(send, recv)

    def finish() -> None:
        _store(output, recv.view(input._data.dtype))

    return _run([request], finish, async_op, [output], touched, "all_to_all_single", pending)


def barrier(group: ProcessGroup | None = None, async_op: bool = False, device_ids: Any = None) -> Work | None:
    """Block until every rank of the group has reached the barrier."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.barrier(group, async_op, device_ids)
    g = default_group(group, "barrier")
    pending = _start(g, "barrier")
    return _run([g.comm.Ibarrier()], None, async_op, name="barrier", pending=pending)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: ProcessGroup | None = None,
               async_op: bool = False) -> Work | None:
    """Send ``input_tensor_list[i]`` to rank i; ``output_tensor_list[j]`` receives rank j's tensor (shapes may
    differ between pairs)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_to_all(output_tensor_list, input_tensor_list, group, async_op)
    g = default_group(group, "all_to_all")
    n, me = g.size(), g.rank()
    if len(output_tensor_list) != n or len(input_tensor_list) != n:
        raise ValueError(f"all_to_all: both lists must hold one tensor per rank ({n})")
    works = []
    for r in range(n):  # pairwise non-blocking messages: every receive is posted before any wait
        if r == me:
            _store(output_tensor_list[r], np.array(input_tensor_list[r]._data))
        else:
            works.append(irecv(output_tensor_list[r], g.world_ranks[r], g, tag=_ALL_TO_ALL_TAG))
    works += [isend(input_tensor_list[r], g.world_ranks[r], g, tag=_ALL_TO_ALL_TAG) for r in range(n) if r != me]
    if async_op:
        return Work([], lambda: [w.wait() for w in works] and None)
    for w in works:
        w.wait()
    return None


def monitored_barrier(group: ProcessGroup | None = None, timeout: Any = None, wait_all_ranks: bool = False) -> None:
    """A barrier whose rank 0 names the ranks that did not arrive within ``timeout`` ('gloo' only, as in torch)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.monitored_barrier(group, timeout, wait_all_ranks)
    raise RuntimeError("monitored_barrier: only the 'gloo' backend has it (as in torch); on 'mpi' use barrier(), whose "
                       "timeout already names the ranks that did not arrive")


_ALL_TO_ALL_TAG = 32001


def _check_list(tensors: list | None, like: Any, size: int, name: str, what: str) -> None:
    if tensors is None or len(tensors) != size:
        raise ValueError(f"{name}: {what} must hold one tensor per rank ({size}), got "
                         f"{None if tensors is None else len(tensors)}")
    for i, t in enumerate(tensors):
        _check(t, name)
        if tuple(t.shape) != tuple(like.shape) or t.dtype != like.dtype:
            raise ValueError(f"{name}: {what}[{i}] has shape {tuple(t.shape)} and dtype {t.dtype}, but the tensor "
                             f"has {tuple(like.shape)} and {like.dtype}; they must match")


# ---- point to point -----------------------------------------------------------------------------------
def isend(tensor: Any, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> Work:
    """Start sending ``tensor`` to world rank ``dst``; the tensor must not change until ``wait()``."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.isend(tensor, dst, group, tag)
    _check(tensor, "isend")
    g = default_group(group, "isend")
    touched = _guard("isend", reads=[tensor])
    buf = _send_view(tensor)
    dest = _group_rank(g, dst, "dst", "isend")
    pending = watchdog.begin_send(g, "isend", dst)
    request = g.comm.Isend(buf, dest=dest, tag=tag)
    # the closure keeps ``buf`` alive until done
    return _track(Work([request], lambda: buf is None, [tensor], pending), touched, "isend")


def irecv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0) -> Work:
    """Start receiving into ``tensor`` from world rank ``src`` (any rank when None)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.irecv(tensor, src, group, tag)
    _check(tensor, "irecv")
    g = default_group(group, "irecv")
    touched = _guard("irecv", writes=[tensor])
    MPI = _mpi()
    buf = np.empty_like(_send_view(tensor))
    source = MPI.ANY_SOURCE if src is None else _group_rank(g, src, "src", "irecv")
    pending = watchdog.begin_receive(g, "irecv", src)
    request = g.comm.Irecv(buf, source=source, tag=tag)
    work = Work([request], lambda: _store(tensor, buf.view(tensor._data.dtype)), [tensor], pending)
    return _track(work, touched, "irecv")


def send(tensor: Any, dst: int, group: ProcessGroup | None = None, tag: int = 0) -> None:
    """Send ``tensor`` to world rank ``dst`` (blocks until the buffer may be reused)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.send(tensor, dst, group, tag)
    _check(tensor, "send")
    g = default_group(group, "send")
    _guard("send", reads=[tensor])
    buf = _send_view(tensor)
    dest = _group_rank(g, dst, "dst", "send")
    pending = watchdog.begin_send(g, "send", dst)
    watchdog.wait_requests(_mpi(), [g.comm.Isend(buf, dest=dest, tag=tag)], pending)


def recv(tensor: Any, src: int | None = None, group: ProcessGroup | None = None, tag: int = 0) -> int:
    """Receive into ``tensor`` from world rank ``src`` (any when None); returns the sender's world rank."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.recv(tensor, src, group, tag)
    _check(tensor, "recv")
    g = default_group(group, "recv")
    _guard("recv", writes=[tensor])
    MPI = _mpi()
    buf = np.empty_like(_send_view(tensor))
    source = MPI.ANY_SOURCE if src is None else _group_rank(g, src, "src", "recv")
    pending = watchdog.begin_receive(g, "recv", src)
    request = g.comm.Irecv(buf, source=source, tag=tag)
    status = MPI.Status()
    watchdog.wait(lambda: request.Test(status), pending)
    _store(tensor, buf.view(tensor._data.dtype))
    return g.world_ranks[status.Get_source()]


# ---- Python objects (pickled between cooperating ranks, as torch does; never read from files) ----------
# Each is a few non-blocking byte transfers (sizes first, then the pickles), waited on like every collective.
def _dumps(obj: Any) -> np.ndarray:
    return np.frombuffer(pickle.dumps(obj), dtype=np.uint8)


def _loads(data: np.ndarray) -> Any:
    return pickle.loads(data.tobytes())  # noqa: S301 - bytes from the job's own ranks, never from a file


def _collective(g: ProcessGroup, name: str, start: Callable[[], Any]) -> None:
    """Run one non-blocking collective to completion under the watchdog."""
    pending = _start(g, name)
    watchdog.wait_requests(_mpi(), [start()], pending)


def _gather_bytes(g: ProcessGroup, payload: np.ndarray, name: str, root: int | None) -> list | None:
    """Every rank's ``payload`` (bytes), on every rank (root None) or on ``root`` only."""
    n, me = g.size(), g.rank()
    sizes = np.zeros(n, np.int64)
    mine = np.array([payload.size], np.int64)
    receiving = root is None or me == root
    if root is None:
        _collective(g, name, lambda: g.comm.Iallgather(mine, sizes))
    else:
        _collective(g, name, lambda: g.comm.Igather(mine, sizes if receiving else None, root=root))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    out = np.empty(int(offsets[-1]) if receiving else 0, np.uint8)
    spec = [out, (sizes, offsets[:-1]), _mpi().BYTE] if receiving else None
    if root is None:
        _collective(g, name, lambda: g.comm.Iallgatherv(payload, spec))
    else:
        _collective(g, name, lambda: g.comm.Igatherv(payload, spec, root=root))
    if not receiving:
        return None
    return [out[offsets[i]:offsets[i + 1]] for i in range(n)]


def broadcast_object_list(object_list: list, src: int = 0, group: ProcessGroup | None = None,
                          device: Any = None) -> None:
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.broadcast_object_list(object_list, src, group, device)
    g = default_group(group, "broadcast_object_list")
    root = _group_rank(g, src, "src", "broadcast_object_list")
    payload = _dumps(list(object_list)) if g.rank() == root else None
    size = np.array([payload.size if payload is not None else 0], np.int64)
    _collective(g, "broadcast_object_list", lambda: g.comm.Ibcast(size, root=root))
    data = payload if payload is not None else np.empty(int(size[0]), np.uint8)
    _collective(g, "broadcast_object_list", lambda: g.comm.Ibcast(data, root=root))
    object_list[:] = _loads(data)


def all_gather_object(object_list: list, obj: Any, group: ProcessGroup | None = None) -> None:
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.all_gather_object(object_list, obj, group)
    g = default_group(group, "all_gather_object")
    if len(object_list) != g.size():
        raise ValueError(f"all_gather_object: object_list must have one slot per rank ({g.size()}), "
                         f"got {len(object_list)}")
    object_list[:] = [_loads(b) for b in _gather_bytes(g, _dumps(obj), "all_gather_object", None)]


def gather_object(obj: Any, object_gather_list: list | None = None, dst: int = 0,
                  group: ProcessGroup | None = None) -> None:
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.gather_object(obj, object_gather_list, dst, group)
    g = default_group(group, "gather_object")
    root = _group_rank(g, dst, "dst", "gather_object")
    values = _gather_bytes(g, _dumps(obj), "gather_object", root)
    if values is not None:
        object_gather_list[:] = [_loads(b) for b in values]


def scatter_object_list(scatter_object_output_list: list, scatter_object_input_list: list | None = None,
                        src: int = 0, group: ProcessGroup | None = None) -> None:
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.scatter_object_list(scatter_object_output_list, scatter_object_input_list, src, group)
    g = default_group(group, "scatter_object_list")
    root = _group_rank(g, src, "src", "scatter_object_list")
    n, me = g.size(), g.rank()
    spec = None
    sizes = np.zeros(n, np.int64)
    if me == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise ValueError(f"scatter_object_list: the source needs one object per rank ({n})")
        parts = [_dumps(o) for o in scatter_object_input_list]
        sizes = np.array([p.size for p in parts], np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes)])[:-1]
        spec = [np.concatenate(parts) if parts else np.empty(0, np.uint8), (sizes, offsets), _mpi().BYTE]
    mine = np.zeros(1, np.int64)
    _collective(g, "scatter_object_list", lambda: g.comm.Iscatter(sizes if me == root else None, mine, root=root))
    out = np.empty(int(mine[0]), np.uint8)
    _collective(g, "scatter_object_list", lambda: g.comm.Iscatterv(spec, out, root=root))
    scatter_object_output_list[0] = _loads(out)


def send_object_list(object_list: list, dst: int, group: ProcessGroup | None = None, device: Any = None) -> None:
    """Send the (picklable) objects of ``object_list`` to world rank ``dst`` (torch's name)."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.send_object_list(object_list, dst, group, device)
    g = default_group(group, "send_object_list")
    payload = _dumps(list(object_list))
    dest = _group_rank(g, dst, "dst", "send_object_list")
    size = np.array([payload.size], np.int64)
    for part in (size, payload):
        pending = watchdog.begin_send(g, "send_object_list", dst)
        watchdog.wait_requests(_mpi(), [g.comm.Isend(part, dest=dest, tag=_OBJECT_TAG)], pending)


def recv_object_list(object_list: list, src: int | None = None, group: ProcessGroup | None = None,
                     device: Any = None) -> int:
    """Receive ``len(object_list)`` objects from world rank ``src`` (any when None) into ``object_list``;
    returns the sender's world rank."""
    if (gloo := _gloo_ops(group)) is not None:
        return gloo.recv_object_list(object_list, src, group, device)
    g = default_group(group, "recv_object_list")
    MPI = _mpi()
    source = MPI.ANY_SOURCE if src is None else _group_rank(g, src, "src", "recv_object_list")
    size = np.zeros(1, np.int64)
    status = MPI.Status()
    pending = watchdog.begin_receive(g, "recv_object_list", src)
    request = g.comm.Irecv(size, source=source, tag=_OBJECT_TAG)
    watchdog.wait(lambda: request.Test(status), pending)
    sender = status.Get_source()
    data = np.empty(int(size[0]), np.uint8)
    pending = watchdog.begin_receive(g, "recv_object_list", g.world_ranks[sender])
    watchdog.wait_requests(MPI, [g.comm.Irecv(data, source=sender, tag=_OBJECT_TAG)], pending)
    values = _loads(data)
    object_list[:len(values)] = values
    return g.world_ranks[sender]


_OBJECT_TAG = 32000  # object messages never match tensor messages of user tags


class P2POp:
    """One send or receive for :func:`batch_isend_irecv`: ``P2POp(dist.isend, tensor, peer, group=None, tag=0)``."""

    def __init__(self, op: Callable, tensor: Any, peer: int | None = None, group: ProcessGroup | None = None,
                 tag: int = 0, group_peer: int | None = None) -> None:
        if op not in (isend, irecv):
            raise ValueError("P2POp: op must be ember.distributed.isend or ember.distributed.irecv, got "
                             f"{getattr(op, '__name__', op)!r}")
        g = default_group(group, "P2POp")
        if peer is None and group_peer is None:
            raise ValueError("P2POp: give peer (a world rank) or group_peer (a rank in group)")
        self.op, self.tensor, self.group, self.tag = op, tensor, group, tag
        self.peer = peer if peer is not None else g.world_ranks[group_peer]


def batch_isend_irecv(p2p_op_list: list) -> list:
    """Start every send and receive of ``p2p_op_list``; returns their Works (wait on each), as torch."""
    if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
        raise ValueError("batch_isend_irecv: expected a non-empty list of P2POp")
    # receives first: on MPI a posted receive lets the matching send complete whatever the order
    ordered = sorted(p2p_op_list, key=lambda p: p.op is not irecv)
    works = {id(p): p.op(p.tensor, p.peer, p.group, p.tag) for p in ordered}
    return [works[id(p)] for p in p2p_op_list]


all_gather_single = all_gather_into_tensor  # torch 2.13's names for the single-tensor forms
reduce_scatter_single = reduce_scatter_tensor
