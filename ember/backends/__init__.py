"""Backends: each device type owns an array namespace plus the few things it lacks.

A backend module defines a ``Backend`` subclass and registers it with :func:`register_backend`.
Nothing outside this package branches on NumPy versus CuPy.
"""
from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any, Callable

import numpy as np

from ember.backends.host_events import HostEvent, HostStream


class Backend:
    """What a device type must provide. ``xp`` is the array namespace ops are written against."""

    name: str = ""
    xp: Any = None

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> Any:
        raise NotImplementedError

    def to_numpy(self, array: Any) -> np.ndarray:
        raise NotImplementedError

    def is_array(self, value: Any) -> bool:
        return isinstance(value, self.xp.ndarray)

    def fuse(self, source: str, name: str) -> Callable | None:
        """Compile a generated elementwise kernel; ``None`` means use the generic path."""
        return None

    def synchronize(self, index: int = 0) -> None:
        return None

    # ---- ember.cuda's device API (added for the CUDA backend); defaults fit a synchronous host device,
    # so ember.cuda calls run unchanged on the stand-in device. ------------------------------------------
    def unavailable_reason(self) -> str:
        """Why :meth:`is_available` is False (named in the no-device error)."""
        return f"the {self.name} backend found no device"

    def set_device(self, index: int) -> None:
        """Make device ``index`` current (``ember.cuda.set_device``)."""
        if not 0 <= int(index) < self.device_count():
            raise RuntimeError(f"{self.name}: invalid device ordinal {index}: {self.device_count()} device(s) here")

    def device_properties(self, index: int) -> dict:
        """``name``, ``total_memory``, ``major``, ``minor``, ``multi_processor_count`` of a device."""
        return {"name": f"ember {self.name} device {index}", "total_memory": 0, "major": 0, "minor": 0,
                "multi_processor_count": os.cpu_count() or 1}

    def memory_stats(self, index: int | None = None) -> dict:
        """``allocated_bytes``, ``peak_allocated_bytes``, ``reserved_bytes`` of the device's allocator
        (0 where the backend keeps no allocator statistics)."""
        return {"allocated_bytes": 0, "peak_allocated_bytes": 0, "reserved_bytes": 0}

    def reset_peak_memory_stats(self, index: int | None = None) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def mem_get_info(self, index: int | None = None) -> tuple[int, int]:
        raise RuntimeError(f"mem_get_info: the {self.name} backend does not know its free memory")

    def pin(self, array: np.ndarray) -> np.ndarray:
        """A copy of host ``array`` in page-locked memory (``Tensor.pin_memory``). Without real pinned
        memory: a copy remembered as pinned, so the pin-memory flow behaves the same."""
        out = np.array(array, copy=True)
        _PINNED[id(out)] = out
        return out

    def is_pinned(self, array: Any) -> bool:
        """Whether host ``array`` (or the array it views) came from :meth:`pin`."""
        while isinstance(array, np.ndarray):
            if _PINNED.get(id(array)) is array:
                return True
            array = array.base
        return False

    def copy_from_host(self, array: np.ndarray, index: int | None = 0, non_blocking: bool = False) -> Any:
        """Host -> device; ``non_blocking`` from pinned memory may return before the copy is done."""
        return self.asarray(array, index=0 if index is None else index)

    def copy_to_host(self, array: Any, non_blocking: bool = False) -> np.ndarray:
        """Device -> host; ``non_blocking`` may return before the copy is done (synchronize to read)."""
        return self.to_numpy(array)

    def new_event(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Any:
        return HostEvent(enable_timing, blocking, interprocess)

    def new_stream(self, index: int | None = None, priority: int = 0) -> Any:
        return HostStream(0 if index is None else index, priority)

    def current_stream(self, index: int | None = None) -> Any:
        return self.default_stream(index)

    def default_stream(self, index: int | None = None) -> Any:
        return HostStream(0 if index is None else index)

    def use_stream(self, stream: Any) -> Any:
        """A context manager queuing the block's work on ``stream``."""
        return contextlib.nullcontext()


# Arrays from Backend.pin's default (host devices without page-locked memory), by id, weakly held.
_PINNED: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()


from ember.backends import cudnn, mps  # noqa: E402,F401  (torch.backends.cudnn / .mps: modules, as in PyTorch)
from ember.backends import cuda_flags as cuda  # noqa: E402,F401  (torch.backends.cuda; see cuda_flags.py)

_BACKENDS: dict[str, Backend] = {}
_LOADERS: dict[str, str] = {"cpu": "ember.backends.cpu", "cuda": "ember.backends.cuda"}


def register_backend(device_type: str, backend: Backend) -> None:
    _BACKENDS[device_type] = backend


def get_backend(device_type: str) -> Backend:
    """The backend for a device type, importing its module on first use."""
    backend = _BACKENDS.get(device_type)
    if backend is None:
        module = _LOADERS.get(device_type)
        if module is None:
            raise RuntimeError(f"unknown device type {device_type!r}; expected one of {sorted(_LOADERS)}")
        import importlib

        try:
            importlib.import_module(module)
        except ImportError as error:
            if device_type == "cuda":
                raise RuntimeError(_NO_CUDA.format(reason=f"the CUDA backend could not be loaded: {error}")) from None
            raise
        backend = _BACKENDS[device_type]
    if device_type == "cuda" and not backend.is_available():
        raise RuntimeError(_NO_CUDA.format(reason=backend.unavailable_reason()))
    return backend


# PyTorch says "Torch not compiled with CUDA enabled"; ember says what is missing and how to get it.
_NO_CUDA = ("no CUDA device is available to ember ({reason}): ember runs on the CPU here. The GPU backend needs an "
            "NVIDIA GPU with its driver and CuPy (pip install 'ember[gpu]'); until then use device='cpu', or pick "
            "the device with `ember.device('cuda' if ember.cuda.is_available() else 'cpu')`")


def special_function(xp: Any, name: str) -> Callable:
    """A special function (``erf``, ``erfc``, ``erfinv``, ``lgamma``/``gammaln``, ``digamma``/``psi``, ...)
    for namespace ``xp``.

    NumPy has none: SciPy's is used when installed (and ``EMBER_SPECIAL_FUNCTIONS`` is not
    ``numpy``), else ember's vectorized NumPy version (:mod:`ember.ops.special_math`), which is as
    accurate and within a small factor of SciPy's speed. Both take ``out=``.
    A namespace that brings its own (the fuser's symbolic one) answers for itself.
    """
    own = getattr(type(xp), "special_function", None)
    if own is not None:
        return own(xp, name)
    if xp is np:
        from ember import _config
        from ember.ops import special_math

        if _config.SPECIAL_FUNCTIONS == "scipy":
            try:
                import scipy.special as special

                return getattr(special, {"lgamma": "gammaln", "digamma": "psi"}.get(name, name))
            except ImportError:
                pass
        return special_math.FUNCTIONS[name]
    import importlib

    return getattr(importlib.import_module("cupyx.scipy.special"), name)


def native_kernel(xp: Any, name: str) -> Callable | None:
    """A native kernel named ``name`` for namespace ``xp`` (numba on CPU), or None: callers then
    run their portable ``xp`` code. GPU backends may answer with their own compiled kernels."""
    if xp is np:
        from ember.backends import cpu_kernels

        return cpu_kernels.get(name)
    return None
