"""``DistributedDataParallel``: one model replica per process, gradients averaged by all-reduce.

How it works (the same plan as torch's reducer, on MPI or ember's socket engine, "gloo"):

* At construction, rank 0's parameters and buffers are broadcast so every replica starts equal,
  and the ranks check that they wrap the same architecture (a clear error instead of a hang).
* Parameters are grouped into buckets of about ``bucket_cap_mb`` in reverse registration order
  (roughly the order backward produces their gradients). A post-accumulate-grad hook counts the
  gradients a bucket still waits for; when a bucket is complete its gradients are packed into one
  flat buffer and a non-blocking all-reduce starts, while backward goes on with earlier layers.
  Buckets start in index order on every rank, since MPI collectives must be issued in the same order.
* When the backward pass ends (an engine callback), DDP waits for the all-reduces and writes the
  averaged gradients back into each ``param.grad``.
* ``no_sync()`` skips the reduction (gradient accumulation); the next synchronized backward reduces
  the accumulated sums. ``find_unused_parameters=True`` lets parameters get no gradient in a step
  (they count as zero; one that no rank used keeps ``grad`` None); without it a missing gradient is
  an error that says which parameter and what to do.

Example (``python -m ember.distributed.run -n 2 train.py``):
    >>> import ember, ember.distributed as dist                             # doctest: +SKIP
    >>> dist.init_process_group("mpi")                                      # doctest: +SKIP
    >>> model = ember.nn.parallel.DistributedDataParallel(ember.nn.Linear(4, 2))  # doctest: +SKIP
    >>> model(ember.randn(8, 4)).sum().backward()   # grads are now averaged across ranks  # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import numpy as np

from ember import cuda, interpreters
from ember.device import CPU as _CPU
from ember.distributed import device_comm, watchdog
from ember.ops import dispatch
from ember.nn.modules.module import Module
from ember.autograd import grad_mode
from ember.autograd.engine import queue_callback
from ember.distributed.collectives import ReduceOp, all_gather_object, all_reduce, broadcast
from ember.distributed.gloo.ops import all_reduce_array
from ember.distributed.process_group import _mpi, default_group
from ember.graph.ir import TracingError
from ember.tensor import Tensor


class _Bucket:
    """Parameters whose gradients travel in one all-reduce."""

    def __init__(self, params: list, names: list) -> None:
        self.params = params
        self.names = names
        self.sizes = [int(np.prod(p.shape, dtype=np.int64)) for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        dtype = params[0]._data.dtype
        # 16-bit floats are summed in float32 (MPI has no half-precision sum everywhere).
        self.dtype = np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind not in "iu" else dtype
        self.buffer = np.empty(int(self.offsets[-1]), self.dtype)
        self.pending = len(params)
        self.ready = False
        self.used = np.zeros(len(params), np.uint8)
        self.work: Any = None
        self.ticket: Any = None  # what the watchdog reports if the bucket's all-reduce cannot finish
        self.device_flat: Any = None  # NCCL: the bucket's flat gradients on the device

    def reset(self) -> None:
        self.pending = len(self.params)
        self.ready = False
        self.used[:] = 0
        self.work = None
        self.device_flat = None


class DistributedDataParallel(Module):
    """Data parallel training across processes (torch's ``nn.parallel.DistributedDataParallel``).

    ``device_ids``/``output_device``/``dim``/``gradient_as_bucket_view``/``static_graph`` are accepted
    for compatibility. Host (CPU) tensors are reduced over the group's engine (MPI, or ember's sockets for
    'gloo'); GPU tensors with NCCL when every rank has its own GPU, else through host memory
    (:mod:`ember.distributed.device_comm`;
    ``self.comm_kind`` says which).
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group: Any = None, bucket_cap_mb: float | None = 25.0,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False) -> None:
        super().__init__()

        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an ember.nn.Module, got {type(module).__name__}")
        self.module = module
        group = default_group(process_group, "DistributedDataParallel")
        object.__setattr__(self, "process_group", group)
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.require_backward_grad_sync = True
        self.dim = dim
        named = []
        seen: set[int] = set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        devices = {p.device for _, p in named}
        if len(devices) > 1:
            raise RuntimeError(f"DistributedDataParallel: the module's parameters are on several devices "
                               f"({sorted(map(str, devices))}); move the whole module to one device per process")
        device = next(iter(devices)) if devices else None
        # Device tensors: NCCL where each rank has its own GPU, else staged through host memory (device_comm.py).
        kind = device_comm.choose(device if device is not None else _CPU, group)
        object.__setattr__(self, "comm_kind", kind)
        object.__setattr__(self, "_comm", device_comm.make(kind, device, group) if device is not None else None)
        self._check_same_model(named)
        self._sync_module_states()
        cap = (25.0 if bucket_cap_mb is None else bucket_cap_mb) * 2**20
        object.__setattr__(self, "_buckets", self._build_buckets(named, cap))
        self._slot: dict[int, tuple[int, int]] = {}
        for b, bucket in enumerate(self._buckets):
            for i, p in enumerate(bucket.params):
                self._slot[id(p)] = (b, i)
                p.register_post_accumulate_grad_hook(self._on_grad_ready)
        self._next_launch = 0
        self._callback_queued = False
        self._sync_this_backward = True

    # ---- construction ----------------------------------------------------------------------------------
    def _check_same_model(self, named: list) -> None:
        mine = [(n, tuple(p.shape), str(p.dtype)) for n, p in named]
        everyone: list = [None] * self.process_group.size()
        all_gather_object(everyone, mine, group=self.process_group)
        for rank, theirs in enumerate(everyone):
            if theirs != mine:
                diff = next(((a, b) for a, b in zip(mine, theirs) if a != b), (len(mine), len(theirs)))
                raise RuntimeError(f"DistributedDataParallel: rank {rank} wraps a different model than rank "
                                   f"{self.process_group.rank()} (first difference: {diff[0]} vs {diff[1]}); every "
                                   "process must build the same architecture")

    def _sync_module_states(self) -> None:
        """Copy rank 0's parameters and buffers to every rank, one broadcast per dtype."""
        tensors = list(self.module.parameters()) + [b for b in self.module.buffers() if b is not None]
        self._broadcast_coalesced(tensors)

    def _broadcast_coalesced(self, tensors: list) -> None:

        by_dtype: dict = {}
        for t in tensors:
            by_dtype.setdefault(t._data.dtype.str, []).append(t)
        src = self.process_group.world_ranks[0]
        for group in by_dtype.values():
            device = group[0].device
            xp = device.xp
            flat_data = xp.concatenate([t._data.reshape(-1) for t in group])
            if device.type != "cpu":  # once, at construction: through the host whatever the path
                flat_data = device.backend.to_numpy(flat_data)
            flat = Tensor._make(flat_data, _CPU, False)
            broadcast(flat, src=src, group=self.process_group)
            received = flat._data if device.type == "cpu" else device.backend.asarray(flat._data,
                                                                                      index=device.index or 0)
            offset = 0
            for t in group:
                n = t._data.size
                t._data[...] = received[offset:offset + n].reshape(t._data.shape)
                t._bump()
                offset += n

    @staticmethod
    def _build_buckets(named: list, cap_bytes: float) -> list:
        buckets: list = []
        current: list = []
        size = 0
        for name, p in reversed(named):
            nbytes = p._data.nbytes
            if current and (size + nbytes > cap_bytes or p._data.dtype != current[0][1]._data.dtype):
                buckets.append(_Bucket([q for _, q in current], [n for n, _ in current]))
                current, size = [], 0
            current.append((name, p))
            size += nbytes
        if current:
            buckets.append(_Bucket([q for _, q in current], [n for n, _ in current]))
        return buckets

    # ---- forward ---------------------------------------------------------------------------------------
    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if any(dispatch.is_symbolic(x) for x in inputs) or interpreters.tracing():
            # A replayed graph would skip this Python: the buffer broadcast and the arming of the gradient
            # all-reduce for the next backward. ember.compile catches this and runs the call eagerly.

            raise TracingError("DistributedDataParallel.forward cannot be traced (its buffer broadcast and "
                               "gradient all-reduce run in Python on every call), so it runs eagerly; compile "
                               "functions called inside the wrapped module's forward instead")
        if self.broadcast_buffers and self.training:
            buffers = [b for b in self.module.buffers() if b is not None]
            if buffers and self.process_group.size() > 1:
                self._broadcast_coalesced(buffers)
        if self._callback_queued:  # the last backward raised before it ended: start clean
            self._reset_all()

        if grad_mode.STATE.enabled:  # torch's prepare_for_backward: only a forward that records a graph arms it
            self._sync_this_backward = self.require_backward_grad_sync
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes of forwards run inside this block accumulate gradients locally only."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    # ---- backward: bucketed all-reduce -----------------------------------------------------------------
    def _on_grad_ready(self, param: Any) -> None:
        if not self._sync_this_backward:
            return
        if interpreters.tracing() or dispatch.is_symbolic(param.grad):
            raise TracingError("DistributedDataParallel: gradient all-reduce cannot be traced into a graph")
        if not self._callback_queued:
            queue_callback(self._finish_reduction)
            self._callback_queued = True
        b, i = self._slot[id(param)]
        bucket = self._buckets[b]
        if bucket.used[i]:
            return
        bucket.used[i] = 1
        bucket.pending -= 1
        if bucket.pending == 0:
            bucket.ready = True
            self._launch_ready_buckets()

    def _launch_ready_buckets(self) -> None:
        while self._next_launch < len(self._buckets) and self._buckets[self._next_launch].ready:
            self._launch(self._buckets[self._next_launch])
            self._next_launch += 1

    def _launch(self, bucket: _Bucket) -> None:
        buffer, offsets = bucket.buffer, bucket.offsets
        if self._comm is not None:  # device gradients: packed on the device in one kernel
            p0 = bucket.params[0]
            flat = device_comm.pack(p0.device.xp, [None if p.grad is None else p.grad._data for p in bucket.params],
                                    bucket.sizes, bucket.dtype, 1.0 / self.process_group.size())
            if self._comm.kind == "nccl":
                bucket.device_flat = flat
                bucket.work = self._comm.all_reduce_async(flat)
                bucket.ticket = None
                return
            self._comm.to_host(flat, buffer)
            self._start_host_all_reduce(bucket, "all_reduce of a DistributedDataParallel gradient bucket (staged "
                                        "through host memory)")
            return
        for i, p in enumerate(bucket.params):
            region = buffer[offsets[i]:offsets[i + 1]]
            if p.grad is None:
                region[...] = 0  # unused here (find_unused_parameters): contributes zero
            else:
                np.multiply(p.grad._data.reshape(-1), 1.0 / self.process_group.size(), out=region,
                            casting="unsafe")
        self._start_host_all_reduce(bucket, "all_reduce of a DistributedDataParallel gradient bucket")

    def _start_host_all_reduce(self, bucket: _Bucket, what: str) -> None:
        """Start summing ``bucket.buffer`` across the group without waiting (DDP's overlap with backward)."""
        if self.process_group.backend == "gloo":  # ember's socket engine: queued on the group's worker thread
            bucket.ticket = None
            bucket.work = all_reduce_array(self.process_group, bucket.buffer, what)
            return
        MPI = _mpi()
        bucket.ticket = watchdog.begin_collective(self.process_group, what)
        bucket.work = self.process_group.comm.Iallreduce(MPI.IN_PLACE, bucket.buffer, op=MPI.SUM)

    def _finish_reduction(self) -> None:

        self._callback_queued = False
        # One reduction per forward, as torch's reducer: a second backward of the same forward
        # (retain_graph=True) accumulates this rank's gradient locally, until the next forward.
        self._sync_this_backward = False
        missing = [(bucket, i) for bucket in self._buckets for i in range(len(bucket.params)) if not bucket.used[i]]
        if missing and not self.find_unused_parameters:
            names = [bucket.names[i] for bucket, i in missing]
            self._reset_all()
            raise RuntimeError(
                f"DistributedDataParallel: parameters {names[:8]}{'...' if len(names) > 8 else ''} received no "
                "gradient in this backward pass, so their all-reduce can never start. Pass "
                "find_unused_parameters=True to DistributedDataParallel, or make sure forward's outputs depend on "
                "every parameter that requires grad.")
        for bucket in self._buckets:
            if not bucket.ready:
                bucket.ready = True
        self._launch_ready_buckets()
        globally_used = None
        if self.find_unused_parameters:
            usage = np.concatenate([bucket.used for bucket in self._buckets])
            if self.process_group.backend == "gloo":
                flags = Tensor._make(usage, _CPU, False)
                all_reduce(flags, op=ReduceOp.MAX, group=self.process_group)
                usage = flags._data
            else:
                ticket = watchdog.begin_collective(self.process_group, "all_reduce of DistributedDataParallel's "
                                                   "used-parameter flags")
                request = self.process_group.comm.Iallreduce(_mpi().IN_PLACE, usage, op=_mpi().MAX)
                watchdog.wait_requests(_mpi(), [request], ticket)
            globally_used = usage
        # polled under the watchdog: a rank that failed or left makes this an error, not a hang
        if self._buckets and self.comm_kind == "nccl":
            for bucket in self._buckets:
                bucket.work.synchronize()  # the NCCL all-reduce's event on the stream
        elif self._buckets and self.process_group.backend == "gloo":
            for bucket in self._buckets:
                bucket.work.wait()
        elif self._buckets:
            watchdog.wait_requests(_mpi(), [bucket.work for bucket in self._buckets], self._buckets[-1].ticket)
        k = 0
        for bucket in self._buckets:
            reduced = bucket.buffer
            if self._comm is not None:  # the summed bucket back on the device (one copy, or already there)
                reduced = bucket.device_flat if self.comm_kind == "nccl" else self._comm.to_device(bucket.buffer)
            for i, p in enumerate(bucket.params):
                if globally_used is not None and not globally_used[k]:
                    k += 1
                    continue  # no rank produced a gradient: leave it untouched, as torch does
                k += 1
                region = reduced[bucket.offsets[i]:bucket.offsets[i + 1]].reshape(p._data.shape)
                if p.grad is None:
                    p.grad = Tensor._make(region.astype(p._data.dtype, copy=True), p.device, False)
                else:
                    p.grad._data[...] = region
                    p.grad._bump()
        self._reset_all()

    def _reset_all(self) -> None:
        for bucket in self._buckets:
            bucket.reset()
        self._next_launch = 0
        self._callback_queued = False


class DataParallel(Module):
    """Single-process data parallelism over several GPUs (torch's ``nn.DataParallel``).

    With no CUDA devices (this build) it runs the wrapped module unchanged, exactly as torch does
    when ``torch.cuda.is_available()`` is False.
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0) -> None:
        super().__init__()

        if device_ids and not cuda.is_available():
            raise RuntimeError(f"DataParallel: device_ids={device_ids} but no CUDA device is available")
        self.module = module
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)
