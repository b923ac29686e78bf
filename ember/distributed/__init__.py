"""Distributed training on MPI or on ember's own sockets ("gloo"), with ``torch.distributed``'s names and semantics.

* Process groups, collectives (all_reduce, broadcast, all_gather, reduce_scatter, ...), point to
  point (send/recv/isend/irecv) and object collectives: :mod:`ember.distributed.collectives`.
* Data parallel: :class:`ember.nn.parallel.DistributedDataParallel` and
  :class:`ember.data.DistributedSampler`.
* Model parallel: autograd-aware send/recv (:mod:`ember.distributed.nn.functional`) and a GPipe-style
  pipeline over ranks (:class:`ember.distributed.pipeline.Pipeline`).
* Launch: ``python -m ember.distributed.run -n 2 train.py`` (calls ``mpiexec`` when there is one, else
  starts the processes itself as torchrun does; ``--hosts a,b`` for several machines), or
  ``ember.multiprocessing.spawn`` / torchrun-style environments with ``init_process_group("gloo")``.
* Rendezvous stores: :class:`TCPStore`, :class:`FileStore`, :class:`HashStore`, :class:`PrefixStore`.

Example (``python -m ember.distributed.run -n 2 script.py``):
    >>> import ember, ember.distributed as dist          # doctest: +SKIP
    >>> dist.init_process_group("mpi")                   # doctest: +SKIP
    >>> t = ember.tensor([1.0 + dist.get_rank()])        # doctest: +SKIP
    >>> dist.all_reduce(t, op=dist.ReduceOp.SUM); t      # doctest: +SKIP
    tensor([3.])
"""
from ember.distributed.collectives import (
    P2POp, ReduceOp, Work, all_gather, all_gather_into_tensor, all_gather_single, batch_isend_irecv,
    reduce_scatter_single, all_gather_object, all_reduce, all_to_all, all_to_all_single,
    barrier, broadcast, broadcast_object_list, gather, gather_object, irecv, isend, monitored_barrier, recv, reduce,
    reduce_scatter,
    reduce_scatter_tensor, recv_object_list, scatter, scatter_object_list, send, send_object_list,
)
from ember.distributed.process_group import (
    GroupMember, ProcessGroup, destroy_process_group, get_backend, get_global_rank, get_process_group_ranks, get_rank,
    get_world_size,
    init_process_group, is_available, is_initialized, is_mpi_available, new_group,
)
from ember.distributed.store import DistStoreError, FileStore, HashStore, PrefixStore, Store
from ember.distributed.tcp_store import TCPStore
from ember.distributed.watchdog import DistBackendError, DistError


class Backend(str):
    """Backend names, as ``torch.distributed.Backend`` (``Backend("GLOO") == "gloo"``)."""

    GLOO = "gloo"
    MPI = "mpi"
    NCCL = "nccl"
    UNDEFINED = "undefined"

    def __new__(cls, name: str) -> "Backend":
        return str.__new__(cls, str(name).lower())


def is_nccl_available() -> bool:
    """False: NCCL needs the CUDA backend, which this build does not ship."""
    return False


def is_gloo_available() -> bool:
    """True: backend='gloo' is ember's own TCP engine (ember.distributed.gloo), which needs nothing installed."""
    return True


def is_backend_available(backend: str) -> bool:
    """True for 'gloo' (always) and 'mpi' (with mpi4py); 'nccl' needs the CUDA backend."""
    name = str(backend).lower()
    return name == "gloo" or (name == "mpi" and is_mpi_available())


def get_default_backend_for_device(device: object) -> str:
    """'gloo' for the CPU (torch's answer), 'nccl' for CUDA devices."""
    kind = getattr(device, "type", str(device)).split(":")[0]
    return "nccl" if kind == "cuda" else "gloo"


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    """LOCAL_RANK from the launcher's environment (``fallback_rank`` when it is not set)."""
    import os

    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"])
    if fallback_rank is None:
        raise RuntimeError("get_node_local_rank: LOCAL_RANK is not set (start the job with a launcher) and no "
                           "fallback_rank was given")
    return fallback_rank


def is_torchelastic_launched() -> bool:
    """True when a torchrun-style launcher started this process (it set TORCHELASTIC_RUN_ID)."""
    import os

    return os.environ.get("TORCHELASTIC_RUN_ID") is not None


__all__ = [
    "Backend", "FileStore", "HashStore", "PrefixStore", "Store", "TCPStore", "DistStoreError", "all_to_all",
    "monitored_barrier", "is_torchelastic_launched", "P2POp", "batch_isend_irecv", "all_gather_single",
    "reduce_scatter_single", "is_backend_available", "get_default_backend_for_device", "get_node_local_rank",
    "GroupMember", "ProcessGroup", "ReduceOp", "Work", "all_gather", "all_gather_into_tensor", "all_gather_object",
    "all_reduce", "all_to_all_single", "barrier", "broadcast", "broadcast_object_list", "destroy_process_group",
    "gather", "gather_object", "get_backend", "get_global_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "init_process_group",
    "irecv", "is_available", "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "isend", "new_group", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter",
    "scatter_object_list", "send", "send_object_list", "recv_object_list", "DistError", "DistBackendError",
]
