"""Collectives on device (GPU) tensors: NCCL where every rank has its own GPU, else MPI via the host.

``DistributedDataParallel`` and ``dist.all_reduce``/``broadcast`` hand device tensors here:

* **NCCL** (CuPy's bindings, ``cupy.cuda.nccl``) when the backend is CuPy, NCCL loads, and the ranks
  of the group sit on distinct GPUs (checked by gathering each rank's host name and GPU PCI bus id
  over MPI). The communicator is made once per process group: rank 0's unique id travels over MPI.
  The all-reduce is queued on the current stream and overlaps the rest of backward.
* **Host staging** otherwise (two ranks sharing one GPU, the stand-in device, no NCCL): the bucket's
  gradients are packed on the device (one kernel), copied to the host in one transfer, all-reduced
  with MPI's non-blocking Iallreduce (as CPU tensors are), and copied back in one transfer.

``EMBER_DDP_COMM=host`` forces host staging (to compare the two).

Example (``python -m ember.distributed.run -n 2 train.py``, one GPU per rank):
    >>> model = DistributedDataParallel(net.to(f"cuda:{local_rank}"))   # doctest: +SKIP
    >>> model.comm_kind                                                  # doctest: +SKIP
    'nccl'
"""
from __future__ import annotations

import os
import socket
from typing import Any, Sequence

import numpy as np

from ember.distributed.collectives import all_gather_object
from ember.distributed.process_group import ProcessGroup


def _low_float(dtype: np.dtype) -> bool:
    return dtype.itemsize == 2 and dtype.kind not in "iu"


def choose(device: Any, group: ProcessGroup) -> str:
    """``"cpu"`` (host tensors), ``"nccl"`` or ``"host"`` (device tensors staged through host memory).
    Every rank of ``group`` must call it (it gathers each rank's GPU over MPI)."""
    nccl = _nccl_module(device) if device.type != "cpu" else None
    where = (socket.gethostname(), _gpu_id(device)) if nccl is not None else None
    # A collective on every rank (CPU ones too), so that all get the same answer or the same error.
    if group.backend == "gloo":
        everyone = [None] * group.size()
        all_gather_object(everyone, (device.type, where), group=group)
    else:
        everyone = group.comm.allgather((device.type, where))
    types = sorted({t for t, _ in everyone})
    if len(types) > 1:
        raise RuntimeError(f"DistributedDataParallel: the ranks' models are on different device types {types} "
                           f"(rank {group.rank()} is on {device}); put every replica on the same kind of device")
    if device.type == "cpu":
        return "cpu"
    everyone = [w for _, w in everyone]
    if os.environ.get("EMBER_DDP_COMM", "") == "host" or group.backend == "gloo":
        return "host"  # gloo stages device tensors through host memory, as torch's gloo does
    if any(w is None or w[1] is None for w in everyone) or len(set(everyone)) != len(everyone):
        return "host"  # a rank without NCCL, or two ranks on one GPU: NCCL would refuse (duplicate GPU)
    return "nccl"


def _nccl_module(device: Any) -> Any:
    """CuPy's NCCL bindings when ``device`` is served by CuPy and libnccl loads, else None."""
    if getattr(device.backend.xp, "__name__", "") != "cupy":
        return None
    try:
        from cupy.cuda import nccl  # optional: only where CuPy serves the device

        return nccl if nccl.available else None
    except (ImportError, AttributeError):
        return None


def _gpu_id(device: Any) -> str | None:
    try:
        import cupy

        return cupy.cuda.Device(device.index or 0).pci_bus_id
    except Exception:  # noqa: BLE001 - CuPy's runtime errors: treat as "no identifiable GPU"
        return None


# ---- packing (both paths) -------------------------------------------------------------------------------
def pack(xp: Any, grads: Sequence[Any], sizes: Sequence[int], dtype: np.dtype, scale: float) -> Any:
    """The bucket's gradients as one flat device array of ``dtype``, times ``scale`` (missing gradients,
    ``None``, contribute zeros): one concatenate on the device, not one transfer per parameter."""
    parts = [xp.zeros(n, dtype=dtype) if g is None else g.reshape(-1).astype(dtype, copy=False)
             for g, n in zip(grads, sizes)]
    flat = xp.concatenate(parts) if parts else xp.zeros(0, dtype=dtype)
    return flat * flat.dtype.type(scale)


class HostStaging:
    """Device gradients all-reduced through host memory with MPI."""

    kind = "host"

    def __init__(self, backend: Any, index: int) -> None:
        self.backend, self.index = backend, index

    def to_host(self, flat: Any, buffer: np.ndarray) -> None:
        buffer[...] = self.backend.to_numpy(flat)  # one device -> host copy per bucket

    def to_device(self, buffer: np.ndarray) -> Any:
        return self.backend.asarray(buffer, index=self.index)  # one host -> device copy per bucket


class Nccl:
    """A NCCL communicator over a process group's ranks (one GPU each)."""

    kind = "nccl"
    _COMMS: dict[int, Any] = {}

    def __init__(self, device: Any, group: ProcessGroup) -> None:
        import cupy

        self.cupy = cupy
        self.nccl = _nccl_module(device)
        self.index = device.index or 0
        key = id(group)
        comm = self._COMMS.get(key)
        if comm is None:
            uid = self.nccl.get_unique_id() if group.rank() == 0 else None
            uid = group.comm.bcast(uid, root=0)
            with cupy.cuda.Device(self.index):
                comm = self.nccl.NcclCommunicator(group.size(), uid, group.rank())
            self._COMMS[key] = comm
        self.comm = comm

    def _type(self, dtype: np.dtype) -> int:
        names = {"float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "float16": "NCCL_FLOAT16",
                 "int32": "NCCL_INT32", "int64": "NCCL_INT64", "uint8": "NCCL_UINT8", "int8": "NCCL_INT8"}
        return getattr(self.nccl, names[dtype.name])

    def all_reduce_async(self, flat: Any) -> Any:
        """Sum ``flat`` in place across ranks, queued on the current stream; returns an event to wait on."""
        cupy = self.cupy
        stream = cupy.cuda.get_current_stream()
        self.comm.allReduce(flat.data.ptr, flat.data.ptr, flat.size, self._type(flat.dtype), self.nccl.NCCL_SUM,
                            stream.ptr)
        done = cupy.cuda.Event(disable_timing=True)
        done.record(stream)
        return done

    def broadcast(self, flat: Any, root: int) -> None:
        stream = self.cupy.cuda.get_current_stream()
        self.comm.bcast(flat.data.ptr, flat.size, self._type(flat.dtype), root, stream.ptr)
        stream.synchronize()


def make(kind: str, device: Any, group: ProcessGroup) -> Any:
    if kind == "nccl":
        return Nccl(device, group)
    if kind == "host":
        return HostStaging(device.backend, device.index or 0)
    return None
