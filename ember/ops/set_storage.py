"""``Tensor.set_``: point a tensor at other memory, as PyTorch's four overloads.

* ``t.set_()``: an empty 1-d tensor of ``t``'s dtype (its own new, empty storage);
* ``t.set_(source)``: ``source``'s storage, offset, sizes and strides: ``t`` and ``source`` share memory from then on
  (a write through either is seen by the other), though ``t`` is not a view of ``source`` for autograd;
* ``t.set_(source, storage_offset, size, stride=None)``: a window of ``source``'s storage starting ``storage_offset``
  elements after ``source``'s own start (torch adds ``source.storage_offset()``), row-major strides when ``stride``
  is omitted (torch grows the storage for a window past its end; ember refuses one that does not fit);
* ``t.set_(storage, storage_offset=0, size=None, stride=None)``: the same over an ``UntypedStorage`` /
  ``TypedStorage`` (the whole storage as a 1-d tensor when ``size`` is omitted).

As in PyTorch the dtypes must match, a leaf that requires grad refuses it under grad mode, and the version counter
counts it as an in-place change.

Example:
    >>> import ember
    >>> a, b = ember.zeros(2), ember.arange(6.0)
    >>> _ = a.set_(b, 1, (2, 2), (2, 1)); b[1] = 7.0; a
    tensor([[7., 2.],
            [3., 4.]])
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from ember.autograd import grad_mode
from ember.autograd.node import NotImplemented_
from ember import storage as _storage
from ember.ops import dispatch, layout

_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
               "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
               "uint8": "unsigned char", "bool": "bool", "complex64": "c10::complex<float>",
               "complex128": "c10::complex<double>"}


def _check_dtype(t: Any, dtype: Any) -> None:
    if dtype is not t.dtype:
        raise RuntimeError(f"set_: Could not set tensor of type {_TYPE_NAMES.get(dtype.name, dtype.name)} to a "
                           f"tensor of type {_TYPE_NAMES.get(t.dtype.name, t.dtype.name)} (convert the source with "
                           f".to({t.dtype}) first)")


def _window(flat_bytes: Any, dtype: Any, offset: int, size: Sequence[int] | None, stride: Sequence[int] | None,
            xp: Any) -> tuple:
    """A strided view of ``dtype`` elements over a flat uint8 array, starting ``offset`` elements in, and the flat
    elements themselves (the storage's start)."""
    itemsize = np.dtype(dtype).itemsize
    count = flat_bytes.size // itemsize
    elements = flat_bytes[: count * itemsize].view(dtype)
    if size is None:
        size = (count - offset,)
    size = tuple(int(n) for n in size)
    stride = layout.contiguous_strides(size) if stride is None else tuple(int(s) for s in stride)
    if len(stride) != len(size):
        raise RuntimeError(f"set_: mismatch in length of strides and shape: size {list(size)}, stride {list(stride)}")
    if offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise RuntimeError(f"set_: storage offset, sizes and strides must be non-negative (offset {offset}, size "
                           f"{list(size)}, stride {list(stride)})")
    needed = offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 if all(size) else 0
    if needed > count:
        raise RuntimeError(f"set_: setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset} "
                           f"require a storage of {needed} elements, but it holds {count}")
    start = elements[offset:] if offset < count else elements[:0]
    return xp.lib.stride_tricks.as_strided(start, size, tuple(s * itemsize for s in stride)), elements


def set_(self: Any, source: Any = None, storage_offset: int = 0, size: Sequence[int] | None = None,
         stride: Sequence[int] | None = None) -> Any:
    """PyTorch's ``Tensor.set_`` (see the module docstring). Returns ``self``."""
    if self._requires_grad and self.grad_fn is None and grad_mode.is_grad_enabled():
        raise RuntimeError("set_: a leaf Variable that requires grad is being used in an in-place operation. Wrap it "
                           "in `with ember.no_grad():` or set it on .data")
    xp = self._device.xp
    if source is None:
        data, root = xp.empty((0,), dtype=self._data.dtype), None
    elif isinstance(source, dispatch.Tensor):
        _check_dtype(self, source.dtype)
        if size is None and storage_offset == 0 and stride is None:
            data, root = source._data, _storage_root(source)
        else:
            flat = _storage.untyped_storage(source)._bytes
            start = int(storage_offset) + source.storage_offset()
            data, elements = _window(flat, source._data.dtype, start, size, stride, xp)
            root = dispatch.Tensor._make(elements, source._device, False)
    elif isinstance(source, (_storage.UntypedStorage, _storage.TypedStorage)):
        if isinstance(source, _storage.TypedStorage):
            _check_dtype(self, source.dtype)
            source = source._untyped_storage
        data, elements = _window(source._bytes, self._data.dtype, int(storage_offset), size, stride, xp)
        root = dispatch.Tensor._make(elements, self._device, False)
    else:
        raise TypeError(f"set_(): expected a Tensor, a Storage or nothing as the source, got {type(source).__name__}")
    source_grad = isinstance(source, dispatch.Tensor) and source._requires_grad
    if data.shape != self._data.shape or data.dtype != self._data.dtype:  # (compiled graphs re-check their states)
        sys.modules[dispatch.Tensor.__module__].LAYOUT_CHANGES[0] += 1
    self._data = data
    self._bump()
    if (self._requires_grad or source_grad) and grad_mode.is_grad_enabled():
        _record_not_implemented(self, source if source_grad else None)
    if root is not None:  # storage_offset()/untyped_storage() read the source's storage
        self.__dict__["_storage_root"] = root
    else:
        self.__dict__.pop("_storage_root", None)
    return self


def _record_not_implemented(self: Any, source: Any) -> None:
    """As PyTorch: ``set_`` has no derivative, so with grad enabled the tensor's history becomes a NotImplemented
    node (edges to its old history and the source's) that refuses in backward; keeping the old history gave the
    gradient of the values it no longer holds."""
    def edge(t: Any) -> Any:
        if t is None or not t._requires_grad:
            return None
        return (t.grad_fn, t._output_nr) if t.grad_fn is not None else (t, 0)
    self.grad_fn = NotImplemented_("set_", (edge(self), edge(source)))
    self._output_nr = 0
    self._requires_grad = True


def _storage_root(source: Any) -> Any:
    """A bare tensor over the memory ``source``'s storage starts at (what ``storage_offset()`` counts from; as
    ember/tensor.py's ``_storage_root_of``)."""
    holder = source if source._base is None else source._base
    known = holder.__dict__.get("_storage_root")
    if known is not None:
        return known
    return dispatch.Tensor._make(holder._data, holder._device, False)
