"""Backends: each device type owns an array namespace plus everything ember assumes about its arrays.

A backend module defines a :class:`Backend` subclass and registers it with :func:`register_backend`.
Code outside this package never branches on NumPy versus CuPy and never asks NumPy about a tensor's
array (``.flags.writeable``, ``np.may_share_memory``, ``np.asarray``, ``isinstance(a, np.ndarray)``,
``xp is np``): it calls ``device.xp`` (the array namespace) or one of the backend methods below.

Backends shipped: ``cpu`` (NumPy, :mod:`ember.backends.cpu`), ``cuda`` (CuPy,
:mod:`ember.backends.cuda`) and the stand-in device (:mod:`ember.backends.standin`), which serves
``cuda`` in tests without a GPU and refuses silent host conversion as CuPy does (docs/devices.md).

Example:
    >>> from ember.backends import get_backend
    >>> cpu = get_backend("cpu")
    >>> a = cpu.xp.arange(4.0)
    >>> cpu.is_writeable(a), cpu.may_share_memory(a, a[1:]), cpu.item(a[2])
    (True, True, 2.0)
"""
from __future__ import annotations

import contextlib
import os
import weakref
from typing import Any, Callable

import numpy as np

from ember.backends.host_events import HostEvent, HostStream


class Backend:
    """What a device type provides. Subclasses set ``name`` and ``xp`` and implement :meth:`asarray`
    and :meth:`to_numpy`; every other method has a default that is right for a NumPy-like namespace.

    ``xp`` is the array namespace op records are written against (``numpy``, ``cupy``): the op's
    ``impl(xp, *arrays, **attrs)`` gets it, so it must offer NumPy's module API for the functions
    ops use, ``xp.ndarray`` (the array type) and ufuncs. Arrays of one backend never mix with
    another's inside an op: dispatch refuses tensors of two devices before ``impl`` runs.
    """

    name: str = ""
    xp: Any = None

    # ---- availability --------------------------------------------------------------------------
    def is_available(self) -> bool:
        """Whether this device type can run now (a GPU is visible, the library loads)."""
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def synchronize(self, index: int = 0) -> None:
        """Wait until queued work on device ``index`` is done (no-op for synchronous devices)."""
        return None

    # ---- transfers -------------------------------------------------------------------------------
    def asarray(self, data: Any, np_dtype: Any = None, index: int = 0) -> Any:
        """Host data (a NumPy array, nested lists, a Python number) as a new array of this device.

        Example (CPU): ``get_backend("cpu").asarray([1, 2], np.float32)`` -> ``array([1., 2.], dtype=float32)``.
        """
        raise NotImplementedError

    def to_numpy(self, array: Any) -> np.ndarray:
        """This device's array on the host: a copy for devices, the array itself on the CPU."""
        raise NotImplementedError

    def is_array(self, value: Any) -> bool:
        """Whether ``value`` is an array of this device."""
        return isinstance(value, self.xp.ndarray)

    # ---- array facts: ask these instead of NumPy ----------------------------------------------------
    def is_writeable(self, array: Any) -> bool:
        """Whether ``array`` may be written in place. Device arrays carry no read-only flag (CuPy's
        have none): an array with a zero stride over more than one element (an expanded tensor) must
        not be written, as PyTorch refuses writes with internal overlap. The CPU also asks NumPy's flag
        (read-only memory maps)."""
        return not any(s == 0 and n > 1 for s, n in zip(array.strides, array.shape))

    def may_share_memory(self, a: Any, b: Any) -> bool:
        """Whether two arrays of this device might overlap in memory (bounds check, may be True for
        disjoint slices of one buffer; False for non-arrays)."""
        if not (self.is_array(a) and self.is_array(b)):
            return False
        return bool(self.xp.may_share_memory(a, b))

    def memory_bounds(self, array: Any) -> tuple[int, int] | None:
        """``(lowest address, one past the highest)`` of the bytes ``array`` touches, or None for a
        non-array or an empty one: the same bounds ``may_share_memory`` compares, so a caller checking
        one array against many (a graph's state write-back) sorts intervals instead of asking each pair.

        Example: ``lo, hi = cpu.memory_bounds(a)`` and ``hi - lo == a.nbytes`` for a contiguous ``a``.
        """
        if not self.is_array(array) or array.size == 0:
            return None
        low = high = self.data_ptr(array)
        for n, stride in zip(array.shape, array.strides):
            if stride < 0:
                low += (n - 1) * stride
            else:
                high += (n - 1) * stride
        return low, high + array.itemsize

    def memory_owner(self, array: Any) -> Any:
        """The array that owns ``array``'s memory as one allocation of its own (``array`` itself or the base
        it is a view of), or None when that is not known. Arrays with different owners never overlap, which
        answers most overlap questions without computing addresses (a graph's state write-back). The base
        class knows none: callers then compare ``memory_bounds``."""
        return None

    def item(self, array: Any) -> Any:
        """The value of a one-element array as a Python scalar (a device-to-host sync on GPUs)."""
        return array.item()

    def data_ptr(self, array: Any) -> int:
        """The address of the array's first element (``Tensor.data_ptr``)."""
        return int(array.data.ptr)

    # ---- kernels ---------------------------------------------------------------------------------------
    def fuse(self, kernel: Any, outputs: list, single_loop: bool) -> Callable | None:
        """Compile a fused elementwise group, or ``None`` to run ``kernel`` (the generic replay).

        ``kernel`` is the fuser's :class:`ember.graph.passes.fuse.FusedKernel`: ``kernel.steps`` is a
        list of three-address steps ``(name, fn, operands, kwargs)`` where ``fn`` is a NumPy ufunc name,
        ``"cast"``/``"where"``/``"copy"``, ``"sum"``/``"mean"``/``"clip"``/``"round"`` or a special
        function name; operands are earlier step names, the inputs ``in0..in{kernel.n_inputs-1}`` or
        Python numbers; ``kernel.outputs`` names the results returned; ``kernel.source`` is the same as
        text (only names and numbers: never user strings). ``outputs`` are the graph Values computed
        (``.shape``, ``.dtype``); ``single_loop`` is True when every step has the output's shape (no
        broadcast inside the group). The compiled callable is called as ``compiled(xp, *inputs)`` and
        returns one array, or a tuple when ``len(kernel.outputs) > 1``.
        """
        return None

    def native_kernel(self, name: str) -> Callable | None:
        """A native kernel by name (``cpu_kernels.py`` lists the CPU ones), or ``None``: callers then
        run their portable ``xp`` code, so a backend may answer ``None`` for every name."""
        return None

    def special_function(self, name: str) -> Callable:
        """``erf``, ``erfc``, ``erfinv``, ``lgamma``/``gammaln``, ``digamma``/``psi``, ... for this
        namespace: a callable ``f(x)`` elementwise on this device's arrays."""
        raise NotImplementedError(f"the {self.name} backend has no special function {name!r}")

    # ---- random numbers ----------------------------------------------------------------------------
    def make_rng(self, seed: int, stream: int | None = None) -> Any:
        """A random generator that draws on this device (never on the host and copied).

        ``stream=None``: the device's default generator algorithm seeded with ``seed`` (``ember.Generator``
        and the default generators use it). ``stream=k``: an independent counter-based stream keyed by
        ``(seed, k)``, cheap to create (graph random nodes make one per node and run).
        It offers NumPy ``Generator``'s methods, each returning an array of this device:
        ``random(shape, dtype)`` and ``standard_normal(shape, dtype)`` (dtype float32 or float64),
        ``integers(low, high, shape)`` (int64), ``exponential(scale, shape)`` (float64) and
        ``permutation(n)`` (int64).
        """
        raise NotImplementedError(f"the {self.name} backend has no random generator")

    def rng_state(self, rng: Any) -> dict:
        """A generator's state (from :meth:`make_rng`) as a JSON-serializable dict (checkpoints)."""
        raise NotImplementedError(f"the {self.name} backend cannot save random generator states")

    def set_rng_state(self, rng: Any, state: dict) -> None:
        """Restore a state from :meth:`rng_state` (it may come from a file: raise ValueError,
        TypeError or KeyError when it is not one)."""
        raise NotImplementedError(f"the {self.name} backend cannot restore random generator states")
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
from ember.backends import mkldnn, openmp  # noqa: E402,F401  (torch.backends.mkldnn / .openmp: PyTorch's switches)
from ember.backends import quantized  # noqa: E402,F401  (torch.backends.quantized.engine: the quantized engine)
from ember.backends import cuda_flags as cuda  # noqa: E402,F401  (torch.backends.cuda; see cuda_flags.py)
from ember import _config

_BACKENDS: dict[str, Backend] = {}
_BY_NAMESPACE: dict[int, Backend] = {}  # id(xp) -> backend: special_function/native_kernel take an xp
_LOADERS: dict[str, str] = {"cpu": "ember.backends.cpu", "cuda": "ember.backends.cuda", "meta": "ember.backends.meta"}


def register_backend(device_type: str, backend: Backend) -> None:
    """Serve ``device_type`` with ``backend`` (replacing an earlier one: the stand-in takes "cuda").

    An array namespace keeps the backend of the device type that registered it first: a second device type
    on the same namespace (a custom device on NumPy, ``type("MyDev", (CPUBackend,), {"name": "mydev"})()``)
    serves its own tensors but does not take NumPy's arrays over from the CPU. Before, it did, for the whole
    process: ``backend_for(numpy)`` answered with it, so every compiled CPU graph asked its fuse hook and
    skipped the promotion of short fused kernels to Numba loops (``fuse_later``: only for the "cpu" backend),
    with no error, only a slower step.

    Example:
        >>> import numpy as np
        >>> from ember.backends.cpu import CPUBackend
        >>> register_backend("mydev", type("MyDev", (CPUBackend,), {"name": "mydev"})())
        >>> backend_for(np).name, get_backend("mydev").name
        ('cpu', 'mydev')
    """
    previous = _BACKENDS.get(device_type)
    _BACKENDS[device_type] = backend
    owner = _BY_NAMESPACE.get(id(backend.xp))
    if owner is None or owner is previous or owner.name == device_type:
        _BY_NAMESPACE[id(backend.xp)] = backend


def backend_for(xp: Any) -> Backend:
    """The backend whose array namespace is ``xp``."""
    backend = _BY_NAMESPACE.get(id(xp))
    if backend is None:
        raise RuntimeError(f"no ember backend serves the array namespace {getattr(xp, '__name__', xp)!r}")
    return backend


def get_backend(device_type: str) -> Backend:
    """The backend for a device type, importing its module on first use.

    ``cuda`` is served by the stand-in device when ``EMBER_CUDA_STANDIN=1`` or inside
    ``ember.testing.standin_cuda()`` (docs/devices.md), else by the CuPy backend.
    """
    backend = _BACKENDS.get(device_type)
    if backend is None:
        module = _LOADERS.get(device_type)
        if module is None:
            raise RuntimeError(f"unknown device type {device_type!r}; expected one of {sorted(_LOADERS)}")

        if device_type == "cuda" and _config.CUDA_STANDIN:
            from ember.backends import standin

            standin.enable()
            return standin.BACKEND
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
    for namespace ``xp``: its backend's :meth:`Backend.special_function`.

    A namespace that brings its own (the fuser's symbolic one) answers for itself.
    """
    own = getattr(type(xp), "special_function", None)
    if own is not None:
        return own(xp, name)
    return backend_for(xp).special_function(name)


def native_kernel(xp: Any, name: str) -> Callable | None:
    """A native kernel named ``name`` for namespace ``xp`` (numba on CPU), or None: callers then
    run their portable ``xp`` code. See :meth:`Backend.native_kernel`."""
    backend = _BY_NAMESPACE.get(id(xp))
    return None if backend is None else backend.native_kernel(name)
