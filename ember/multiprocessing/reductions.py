"""How ``multiprocessing`` pickles ember tensors: through shared memory, as torch.multiprocessing does.

:func:`init_reductions` registers :func:`reduce_tensor` with ``multiprocessing``'s ``ForkingPickler``
(the pickler behind its queues, pipes, pools and the arguments of spawned processes; plain ``pickle``
is untouched). A tensor put on a queue first moves its data into a shared storage in place
(``share_memory_()``, a no-op when it is there already), then travels as a duplicate of the storage's
file descriptor plus offset, shape, strides and dtype; the receiver maps the same memory, so
writes on either side are seen by the other (Hogwild training). A non-leaf tensor that requires grad
is refused, as torch refuses it (its graph cannot cross processes).

Example:
    >>> import ember, ember.multiprocessing as mp
    >>> q = mp.get_context("fork").SimpleQueue()
    >>> t = ember.zeros(3)
    >>> q.put(t); received = q.get()
    >>> _ = received.add_(1)
    >>> t.tolist()   # the same memory
    [1.0, 1.0, 1.0]
"""
from __future__ import annotations

from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

import numpy as np

from ember.multiprocessing import shared_storage
from ember.device import device
from ember.nn.parameter import Parameter
from ember.tensor import Tensor

_REGISTERED = [False]


def reduce_tensor(tensor: Any) -> tuple:
    """ForkingPickler's reduction of a Tensor (or Parameter): its storage by descriptor, never by value."""
    if tensor.requires_grad and tensor.grad_fn is not None:
        raise RuntimeError(
            "Cowardly refusing to serialize non-leaf tensor which requires_grad, since autograd does not support "
            "crossing process boundaries. If you just want to transfer the data, call detach() on the tensor "
            "before serializing (e.g., putting it on the queue).")
    if tensor.device.type != "cpu":
        raise RuntimeError(f"ember.multiprocessing: only CPU tensors can be shared between processes, got one on "
                           f"{tensor.device}; move it with .cpu() first")
    tensor.share_memory_()
    mapping, offset, shape, strides = shared_storage.describe(tensor._data)
    state = {k: v for k, v in getattr(tensor, "__dict__", {}).items() if k not in _TENSOR_SLOTS}
    return _rebuild_tensor, (type(tensor), DupFd(mapping.fd), len(mapping), offset, shape, strides,
                             tensor._data.dtype, tensor.requires_grad, state)


# Tensor's own bookkeeping, rebuilt by Tensor._make; everything else in __dict__ (user attributes) travels.
_TENSOR_SLOTS = frozenset({"_data", "_device", "_requires_grad", "grad", "grad_fn", "_output_nr", "_vc", "_base",
                           "_hooks", "_retains_grad"})


def _rebuild_tensor(cls: type, dup: Any, size: int, offset: int, shape: tuple, strides: tuple, dtype: np.dtype,
                    requires_grad: bool, state: dict) -> Any:
    mapping = shared_storage.map_descriptor(dup.detach(), size)
    array = shared_storage.rebuild(mapping, offset, shape, strides, dtype)
    tensor = cls._make(array, device("cpu"), requires_grad)
    if state:
        tensor.__dict__.update(state)
    return tensor


def init_reductions() -> None:
    """Register the tensor reductions with multiprocessing's pickler (once; ``import ember`` does it)."""
    if _REGISTERED[0]:
        return

    for cls in (Tensor, Parameter):  # the pickler looks classes up exactly: each subclass is registered
        ForkingPickler.register(cls, reduce_tensor)
    _REGISTERED[0] = True
