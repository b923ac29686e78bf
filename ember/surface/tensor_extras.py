"""Smaller pieces of PyTorch's tensor surface: ``as_strided_scatter``, ``new_empty_strided``,
the deprecated out-of-place ``resize``/``resize_as``, ``as_strided_``, ``const_data_ptr``, ``sparse_mask`` and
``map2_``.

Example:
    >>> import ember as torch
    >>> torch.as_strided_scatter(torch.zeros(3, 3), torch.ones(2), (2,), (4,))
    tensor([[1., 0., 0.],
            [0., 1., 0.],
            [0., 0., 0.]])
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from ember.creation import _wrap_array
from ember.surface.more_functions import empty_strided
from ember.ops import dispatch
from ember.ops.strided import as_strided
from ember.sparse.construct import sparse_coo_tensor
from ember.tensor import Tensor


def as_strided_scatter(input: Tensor, src: Tensor, size: Sequence[int], stride: Sequence[int],
                       storage_offset: int | None = None) -> Tensor:
    """A copy of ``input`` with ``src`` written where ``input.as_strided(size, stride, storage_offset)`` looks
    (``input``'s elements in row-major order are the storage); gradients reach ``input`` outside that window
    and ``src`` inside it.

    Example:
        >>> ember.as_strided_scatter(ember.zeros(4), ember.ones(2), (2,), (2,)).tolist()
        [1.0, 0.0, 1.0, 0.0]
    """
    if tuple(src.shape) != tuple(size):
        raise RuntimeError(f"as_strided_scatter: src of shape {tuple(src.shape)} must have the window's size "
                           f"{tuple(size)}")
    out = input.clone().contiguous()
    window = as_strided(out, size, stride, 0 if storage_offset is None else storage_offset)
    window.copy_(src)
    return out


def new_empty_strided(self: Tensor, size: Sequence[int], stride: Sequence[int], dtype: Any = None, device: Any = None,
                      requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    """``empty_strided`` of this tensor's dtype and device unless given."""
    return empty_strided(size, stride, dtype=dtype or self.dtype, device=device or self.device,
                         requires_grad=requires_grad)


def resize(self: Tensor, *sizes: Any) -> Tensor:
    """Deprecated out-of-place resize: a reshaped copy with the same number of elements (PyTorch warns too)."""
    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else tuple(sizes)
    if math.prod(shape) != self.numel():
        raise RuntimeError(f"resize: requested size {list(shape)} has {math.prod(shape)} elements but the tensor of "
                           f"shape {tuple(self.shape)} has {self.numel()}; use resize_ to grow or shrink")
    return self.contiguous().view(shape) if self.numel() else self.reshape(shape)


def resize_as(self: Tensor, other: Tensor) -> Tensor:
    """Deprecated out-of-place ``resize`` to ``other``'s shape."""
    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return resize(self, tuple(other.shape))


def as_strided_(self: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None) -> Tensor:
    """In-place ``as_strided``: ``self`` becomes the strided window of its own storage (not recorded by autograd,
    so refused on tensors that require grad)."""
    if self.requires_grad and dispatch.grad_mode.STATE.enabled:
        raise RuntimeError("as_strided_: not supported on a tensor that requires grad; use as_strided (a view), "
                           "or call it under ember.no_grad()")
    with dispatch.grad_mode.no_grad():
        window = as_strided(self, size, stride, storage_offset)
    self._data = window._data
    self._bump()
    return self


def sparse_mask(self: Tensor, mask: Tensor) -> Tensor:
    """A sparse COO tensor with ``mask``'s indices and ``self``'s values there (``mask``'s values are ignored)."""
    if not getattr(mask, "is_sparse", False):
        raise RuntimeError(f"sparse_mask: mask must be a sparse COO tensor, got a {mask.layout} tensor")
    if tuple(self.shape) != tuple(mask.shape):
        raise RuntimeError(f"sparse_mask: self of shape {tuple(self.shape)} and mask of shape {tuple(mask.shape)} "
                           "must have the same shape")
    indices = mask._indices()
    values = self[tuple(indices[d] for d in range(indices.shape[0]))] if indices.shape[0] else self
    return sparse_coo_tensor(indices, values, tuple(self.shape))


def map2_(self: Tensor, x: Tensor, y: Tensor, fn: Any) -> Tensor:
    """``self[i] = fn(self[i], x[i], y[i])`` on CPU tensors (PyTorch's legacy ``map2_``; a Python call per element)."""
    if self.device.type != "cpu" or self.requires_grad:
        raise RuntimeError("map2_ is only implemented on CPU tensors that do not require grad")
    a, b, c = np.broadcast_arrays(self.numpy(), x.numpy(), y.numpy())
    if tuple(a.shape) != tuple(self.shape):
        raise RuntimeError(f"map2_: x {tuple(x.shape)} and y {tuple(y.shape)} must broadcast to self's shape "
                           f"{tuple(self.shape)}")
    values = np.vectorize(fn, otypes=[self.dtype.np])(a, b, c) if self.numel() else a
    with dispatch.grad_mode.no_grad():
        return self.copy_(_wrap_array(np.ascontiguousarray(values), self._device))


TENSOR_METHODS = {
    "as_strided_scatter": as_strided_scatter, "new_empty_strided": new_empty_strided,
    "resize": resize, "resize_as": resize_as, "as_strided_": as_strided_,
    "const_data_ptr": lambda self: self.data_ptr(), "sparse_mask": sparse_mask, "map2_": map2_,
}
TOP_LEVEL = {"as_strided_scatter": as_strided_scatter}


def install(namespace: dict[str, Any]) -> None:
    """Attach the methods to ``Tensor`` and the functions to ``namespace`` (ember's globals), keeping any
    definition that already exists."""
    for name, fn in TENSOR_METHODS.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name, fn in TOP_LEVEL.items():
        namespace.setdefault(name, fn)
