"""The ``meta`` device: tensors with a shape and a dtype but no data, as PyTorch's.

``model.to("meta")`` drops a model's storage (the ensembling tutorial keeps a "stateless" copy to call with
``functional_call``), ``torch.empty(..., device="meta")`` describes a tensor without allocating it, and
``nn.Module.to_empty(device="cpu")`` gives a meta model real (uninitialized) storage again.

A meta array is a zero-stride view of a single element: any shape costs one element of memory, reads give
that element, writes land on it (in-place initialization runs and changes nothing that matters). Ops run their
ordinary NumPy code on such arrays, so results have the right shapes and dtypes (their values mean nothing,
as on PyTorch's meta device, and a result is turned back into a one-element view). Reading values out (``.cpu()``,
``.numpy()``, ``.item()``, printing the data) is refused with PyTorch's message.

Example:
    >>> import ember
    >>> w = ember.empty(1000, 1000, device="meta")
    >>> (w @ w).shape, (w @ w).device.type
    (ember.Size([1000, 1000]), 'meta')
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from ember.backends import Backend, register_backend

NO_DATA = ("Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of "
           "torch.nn.Module.to() when moving module from meta to a different device.")


def shell(shape: tuple, np_dtype: Any) -> np.ndarray:
    """A writeable array of ``shape`` backed by one element (every stride 0)."""
    cell = np.zeros(1, dtype=np_dtype)
    return np.lib.stride_tricks.as_strided(cell, shape=tuple(shape), strides=(0,) * len(shape), writeable=True)


def _as_shell(value: Any) -> Any:
    if isinstance(value, np.ndarray) and (value.size > 1 and any(s != 0 for s in value.strides)):
        return shell(value.shape, value.dtype)
    return value


def _creator(name: str) -> Any:
    """``empty``/``zeros``/``ones``/``full`` (and ``*_like``): a shell of the shape, no allocation."""

    def create(shape_or_like: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        if name.endswith("_like"):
            return shell(kwargs.get("shape") or shape_or_like.shape, kwargs.get("dtype") or shape_or_like.dtype)
        shape = (shape_or_like,) if isinstance(shape_or_like, (int, np.integer)) else tuple(shape_or_like)
        if name == "full":  # full(shape, fill_value, dtype=None)
            dtype = kwargs.get("dtype") or (args[1] if len(args) > 1 else np.asarray(args[0]).dtype)
        else:  # empty/zeros/ones(shape, dtype=float64)
            dtype = kwargs.get("dtype") or (args[0] if args else np.float64)
        return shell(shape, dtype)

    create.__name__ = name
    return create


def _is_shell(value: Any) -> bool:
    return isinstance(value, np.ndarray) and all(s == 0 for s in value.strides)


def _elementwise(ufunc: np.ufunc, args: tuple, kwargs: dict) -> Any:
    """An elementwise ufunc of shells is constant: compute one element, answer a shell of the broadcast shape."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    one = ufunc(*(a.reshape(-1)[:1] if isinstance(a, np.ndarray) and a.size else a for a in args), **kwargs)
    if isinstance(one, tuple):
        return tuple(shell(shape, o.dtype) for o in one)
    return shell(shape, np.asarray(one).dtype)


_COPIES = ("ascontiguousarray", "copy", "array", "asarray", "asfortranarray")


# NumPy functions whose result's shape depends on the values: torch's meta device raises NotImplementedError
_DATA_DEPENDENT = frozenset(("nonzero", "flatnonzero", "argwhere", "unique", "unique_values", "unique_counts",
                             "unique_inverse", "unique_all", "extract", "compress", "bincount"))


def data_dependent_error(op: str) -> NotImplementedError:
    return NotImplementedError(
        f"{op}: the result's shape depends on the tensor's values, and a meta tensor has none (torch's meta device "
        "raises too); run it on a real device, or use an op whose shape follows from the input's (where, masked_fill)")


class _MetaNamespace(types.ModuleType):
    """NumPy's namespace, answering with one-element views: ops on meta tensors keep no data."""

    def __getattr__(self, name: str) -> Any:
        if name in _DATA_DEPENDENT:
            raise data_dependent_error(name)
        value = getattr(np, name)
        if name in ("empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "full_like"):
            return _creator(name)
        if name in _COPIES:  # a copy of a shell is a shell (no full-size allocation)
            def copy(a: Any, *args: Any, **kwargs: Any) -> Any:
                if _is_shell(a):
                    return shell(a.shape, kwargs.get("dtype") or (args[0] if args else a.dtype))
                return _as_shell(value(a, *args, **kwargs))
            return copy
        if isinstance(value, np.ufunc) and value.signature is None:
            def call_ufunc(*args: Any, **kwargs: Any) -> Any:
                arrays = [a for a in args if isinstance(a, np.ndarray)]
                if arrays and all(_is_shell(a) for a in arrays) and kwargs.get("out") is None and \
                        kwargs.get("where", True) is True:
                    return _elementwise(value, args, kwargs)
                out = value(*args, **kwargs)
                return _as_shell(out) if kwargs.get("out") is None else out
            return call_ufunc
        if callable(value) and not isinstance(value, type):
            def call(*args: Any, **kwargs: Any) -> Any:
                out = value(*args, **kwargs)
                if isinstance(out, tuple):
                    return tuple(_as_shell(o) for o in out)
                return _as_shell(out) if kwargs.get("out") is None else out
            call.__name__ = name
            return call
        return value


class MetaBackend(Backend):
    name = "meta"
    xp = _MetaNamespace("ember_meta_numpy")

    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> np.ndarray:
        array = data if isinstance(data, np.ndarray) and np_dtype is None else np.asarray(data, dtype=np_dtype)
        return shell(array.shape, array.dtype)

    def copy_from_host(self, array: np.ndarray, index: int | None = 0, non_blocking: bool = False) -> Any:
        return shell(np.shape(array), np.asarray(array).dtype if not isinstance(array, np.ndarray) else array.dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        raise NotImplementedError(NO_DATA)

    def copy_to_host(self, array: Any, non_blocking: bool = False) -> np.ndarray:
        raise NotImplementedError(NO_DATA)

    def item(self, array: Any) -> Any:
        raise RuntimeError("Tensor.item() cannot be called on meta tensors (they hold no data); run the model on "
                           "a real device, or use .shape / .dtype")

    def is_array(self, value: Any) -> bool:
        return isinstance(value, np.ndarray)

    def is_writeable(self, array: Any) -> bool:
        return True  # writes land on the one element: nothing to protect

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return False  # no data, so no aliasing to detect

    def data_ptr(self, array: Any) -> int:
        return 0

    def fuse(self, kernel: Any, outputs: list, single_loop: bool) -> Any:
        return None

    def native_kernel(self, name: str) -> Any:
        return None

    def make_rng(self, seed: int, stream: int | None = None) -> np.random.Generator:
        return np.random.default_rng(seed)


BACKEND = MetaBackend()
register_backend("meta", BACKEND)
