"""Plain ``pickle`` support for ember's objects, by value (``pickle.dumps(tensor)``, ``copy.deepcopy``).

A tensor pickles as its NumPy array (host copy), its ``requires_grad`` flag and its class
(``Tensor``, ``Parameter``, ``Buffer``); its device is restored when available and the CPU otherwise.
``.grad`` and autograd history are not pickled (as in PyTorch). Processes that pass tensors through
``ember.multiprocessing`` queues use shared-memory reducers registered there instead.

Example:
    >>> import pickle, ember
    >>> pickle.loads(pickle.dumps(ember.ones(2, requires_grad=True)))
    tensor([1., 1.], requires_grad=True)
"""
from __future__ import annotations

from typing import Any

import numpy as np
from ember.creation import _wrap_array
from ember.device import to_device
from ember.nn.parameter import Buffer, Parameter
from ember.tensor import user_attributes


def reduce_tensor(tensor: Any) -> tuple:
    """``Tensor.__reduce_ex__``: rebuild from (array, requires_grad, kind, device)."""
    array = np.asarray(tensor.detach().cpu().numpy())
    kind = "parameter" if isinstance(tensor, Parameter) else "buffer" if isinstance(tensor, Buffer) else "tensor"
    state = user_attributes(tensor) or None  # ember's own bookkeeping (a view's storage root) stays behind
    return (rebuild_tensor, (array, bool(tensor.requires_grad), kind, str(tensor.device)), state)


def rebuild_tensor(array: np.ndarray, requires_grad: bool, kind: str = "tensor", device: str = "cpu") -> Any:

    tensor = _wrap_array(np.array(array, copy=False), to_device("cpu"))
    if device != "cpu":
        try:
            tensor = tensor.to(device)
        except Exception:  # noqa: BLE001 - the device is not available here: stay on the CPU
            pass
    if kind == "parameter":
        return Parameter(tensor, requires_grad=requires_grad)
    if kind == "buffer":
        tensor = Buffer(tensor)
    if requires_grad:
        tensor.requires_grad_(True)
    return tensor
