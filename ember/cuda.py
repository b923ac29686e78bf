"""``ember.cuda``: PyTorch's ``torch.cuda`` for ember's GPU backend.

Everything here asks the backend serving device type ``cuda``: the CuPy backend on a machine with
an NVIDIA GPU (:mod:`ember.backends.cuda`), or the stand-in device in tests. Without either, it
answers as PyTorch's CPU build: ``is_available()`` is False, ``device_count()`` is 0, seeding is
accepted, and calls that need a device raise "no CUDA device is available" with the fix.

Example:
    >>> import ember as torch
    >>> device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    >>> if torch.cuda.is_available():  # doctest: +SKIP
    ...     start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ...     start.record(); y = x @ x; end.record(); torch.cuda.synchronize()
    ...     print(start.elapsed_time(end), "ms", torch.cuda.max_memory_allocated() / 2**20, "MiB")
"""
from __future__ import annotations

import warnings
from typing import Any

from ember import random as ember_random
from ember.backends import Backend, get_backend
from ember.data.dataloader import set_pin_memory_hook
from ember.device import device as _make_device
from ember.legacy_types import legacy_types
from ember.tensor import Tensor


def _backend_or_none() -> Backend | None:
    try:
        return get_backend("cuda")
    except RuntimeError:  # no CuPy / no GPU / no stand-in: the CPU build's answers
        return None


def _backend(what: str) -> Backend:
    """The CUDA backend, or RuntimeError naming the call and the fix."""
    try:
        return get_backend("cuda")
    except RuntimeError as error:
        raise RuntimeError(f"ember.cuda.{what}: {error}") from None


def _index(device: Any, what: str) -> int | None:
    """A device argument (None, int, 'cuda:1', ember.device) as an index (None: the current device)."""
    if device is None:
        return None
    if isinstance(device, int):
        return device
    d = device if hasattr(device, "type") else _make_device(str(device))
    if d.type != "cuda":
        raise ValueError(f"ember.cuda.{what}: expected a CUDA device, got {d}")
    return d.index


# ---- availability ---------------------------------------------------------------------------------
def is_available() -> bool:
    """True when a GPU (or, in tests, the stand-in device) can run ember's CUDA backend."""
    return _backend_or_none() is not None


def device_count() -> int:
    """Number of visible CUDA devices (0 without CuPy or a GPU)."""
    backend = _backend_or_none()
    return 0 if backend is None else backend.device_count()


def is_initialized() -> bool:
    return is_available()


def init() -> None:
    _backend("init")


def __getattr__(name: str) -> Any:
    # ``torch.cuda._initialized``: reversible layers (reformer, performer) test it before saving device RNG states
    if name == "_initialized":
        return is_initialized()
    raise AttributeError(f"module 'ember.cuda' has no attribute {name!r}")


def current_device() -> int:
    return _backend("current_device").current_device()


def set_device(device: Any) -> None:
    """Make ``device`` current: ``ember.device('cuda')`` and new CUDA tensors then use it."""
    index = _index(device, "set_device")
    if index is not None and index >= 0:
        _backend("set_device").set_device(index)


class device:
    """Context manager making a device current inside the block (``with ember.cuda.device(1):``)."""

    def __init__(self, device: Any) -> None:
        self.index = _index(device, "device")
        self._previous: int | None = None

    def __enter__(self) -> "device":
        if self.index is not None and self.index >= 0:
            backend = _backend("device")
            self._previous = backend.current_device()
            backend.set_device(self.index)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            _backend("device").set_device(self._previous)


class device_of(device):
    """``device`` of the device a tensor lives on (no-op for CPU tensors)."""

    def __init__(self, obj: Any) -> None:
        d = getattr(obj, "device", None)
        super().__init__(d.index if d is not None and d.type == "cuda" else None)


def synchronize(device: Any = None) -> None:
    """Wait for all queued work on ``device`` (default: the current one)."""
    _backend("synchronize").synchronize(_index(device, "synchronize"))


def get_device_properties(device: Any = None) -> Any:
    """name, total_memory, major, minor, multi_processor_count of a device."""
    backend = _backend("get_device_properties")
    index = _index(device, "get_device_properties")
    props = backend.device_properties(backend.current_device() if index is None else index)
    return _Properties(props)


class _Properties:
    def __init__(self, props: dict) -> None:
        self.__dict__.update(props)

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, multi_processor_count={self.multi_processor_count})")


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: Any = None) -> tuple[int, int]:
    props = get_device_properties(device)
    return props.major, props.minor


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 arithmetic: compute capability 8.0 or newer (Ampere, Hopper)."""
    return is_available() and get_device_capability()[0] >= 8


# ---- memory (CuPy's caching pool) -------------------------------------------------------------------
# Without a device these answer as PyTorch's CPU build (and as torch.cuda before CUDA is initialized): zero
# bytes and an empty stats dict, so training scripts that print `max_memory_allocated()` at the end run.
def _stats(what: str, device: Any) -> dict | None:
    backend = _backend_or_none()
    return None if backend is None else backend.memory_stats(_index(device, what))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live tensors on the device (0 without one, as PyTorch's CPU build)."""
    stats = _stats("memory_allocated", device)
    return 0 if stats is None else stats["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    """The peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats` (0 without a device)."""
    stats = _stats("max_memory_allocated", device)
    return 0 if stats is None else stats["peak_allocated_bytes"]


def memory_reserved(device: Any = None) -> int:
    """Bytes the caching allocator holds (live tensors plus cached free blocks; 0 without a device)."""
    stats = _stats("memory_reserved", device)
    return 0 if stats is None else stats["reserved_bytes"]


def max_memory_reserved(device: Any = None) -> int:
    return memory_reserved(device)


def memory_stats(device: Any = None) -> dict:
    """PyTorch's flat keys for the allocator's counters (``{}`` without a device, as PyTorch's CPU build)."""
    stats = _stats("memory_stats", device)
    if stats is None:
        return {}
    return {"allocated_bytes.all.current": stats["allocated_bytes"],
            "allocated_bytes.all.peak": stats["peak_allocated_bytes"],
            "reserved_bytes.all.current": stats["reserved_bytes"]}


def reset_peak_memory_stats(device: Any = None) -> None:
    _backend("reset_peak_memory_stats").reset_peak_memory_stats(_index(device, "reset_peak_memory_stats"))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def empty_cache() -> None:
    """Return cached free blocks to the driver (no-op without a GPU, as in PyTorch)."""
    backend = _backend_or_none()
    if backend is not None:
        backend.empty_cache()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes of the device, as the driver reports them."""
    return _backend("mem_get_info").mem_get_info(_index(device, "mem_get_info"))


# ---- events and streams -------------------------------------------------------------------------------
class Event:
    """A CUDA event: ``record()`` on a stream, ``synchronize()``, ``elapsed_time(end)`` in milliseconds."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self._impl = _backend("Event").new_event(enable_timing, blocking, interprocess)

    def record(self, stream: "Stream | None" = None) -> None:
        self._impl.record(None if stream is None else stream._impl)

    def wait(self, stream: "Stream | None" = None) -> None:
        self._impl.wait(None if stream is None else stream._impl)

    def query(self) -> bool:
        return self._impl.query()

    def synchronize(self) -> None:
        self._impl.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        return self._impl.elapsed_time(end_event._impl)


class Stream:
    """A CUDA stream of a device (``priority``: lower is more urgent, as CUDA's)."""

    def __init__(self, device: Any = None, priority: int = 0, _impl: Any = None) -> None:
        self._impl = _impl if _impl is not None else _backend("Stream").new_stream(_index(device, "Stream"), priority)

    @property
    def device_index(self) -> int:
        return self._impl.device_index

    def synchronize(self) -> None:
        self._impl.synchronize()

    def query(self) -> bool:
        return self._impl.query()

    def wait_event(self, event: Event) -> None:
        self._impl.wait_event(event._impl)

    def wait_stream(self, stream: "Stream") -> None:
        self._impl.wait_stream(stream._impl)

    def record_event(self, event: Event | None = None) -> Event:
        event = event if event is not None else Event()
        event.record(self)
        return event

    def __enter__(self) -> "Stream":
        self._context = stream(self)
        self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._context.__exit__(*exc)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Stream) and self._impl == other._impl

    def __hash__(self) -> int:
        return hash(self._impl)

    def __repr__(self) -> str:
        return repr(self._impl)


def current_stream(device: Any = None) -> Stream:
    return Stream(_impl=_backend("current_stream").current_stream(_index(device, "current_stream")))


def default_stream(device: Any = None) -> Stream:
    return Stream(_impl=_backend("default_stream").default_stream(_index(device, "default_stream")))


class StreamContext:
    """The block's GPU work goes to stream ``stream`` (``None``: no change); ``stream(s)`` returns one, as PyTorch."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._context: Any = None

    def __enter__(self) -> None:
        if self.stream is None:
            return
        self._context = _backend("stream").use_stream(self.stream._impl)
        self._context.__enter__()

    def __exit__(self, *exc: Any) -> None:
        context, self._context = self._context, None
        if context is not None:
            context.__exit__(*exc)


def stream(s: Stream | None) -> StreamContext:
    """Queue the block's GPU work on stream ``s`` (``None``: no change)."""
    return StreamContext(s)


def set_stream(s: Stream) -> None:
    raise NotImplementedError("ember.cuda.set_stream: use the `with ember.cuda.stream(s):` block instead "
                              "(CuPy makes a stream current for a block)")


# ---- random numbers ---------------------------------------------------------------------------------------
def manual_seed(seed: int) -> None:
    """Seed the current CUDA device's default generator (accepted and ignored without a GPU, as in PyTorch)."""
    if is_available():
        ember_random.cuda_generator(None).manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed every CUDA device's default generator (``ember.manual_seed`` does this too)."""
    for index in range(device_count()):
        ember_random.cuda_generator(index).manual_seed(seed)


def seed() -> None:
    if is_available():
        ember_random.cuda_generator(None).seed()


def seed_all() -> None:
    for index in range(device_count()):
        ember_random.cuda_generator(index).seed()


def initial_seed() -> int:
    return ember_random.cuda_generator(None).initial_seed()


def get_rng_state(device: Any = "cuda") -> Any:
    return ember_random.cuda_generator(_index(device, "get_rng_state")).get_state()


def set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    ember_random.cuda_generator(_index(device, "set_rng_state")).set_state(new_state)


def get_rng_state_all() -> list:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states: list) -> None:
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


# ---- DataLoader(pin_memory=True) ------------------------------------------------------------------------
_WARNED_NO_PIN = [False]


def _pin(value: Any) -> Any:
    """Pin every CPU tensor in a batch (tuples, lists, dicts, namedtuples kept as they are)."""
    if isinstance(value, Tensor):
        return value.pin_memory() if value.device.type == "cpu" else value
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_pin(v) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_pin(v) for v in value)
    if isinstance(value, dict):
        return type(value)({k: _pin(v) for k, v in value.items()})
    return value


def pin_batch(batch: Any, device: str = "") -> Any:
    """The DataLoader's pin step: pinned copies of the batch's tensors, so the training loop's
    ``.to('cuda', non_blocking=True)`` queues the copy and goes on (the next batch's copy overlaps the
    compute already queued). Without a GPU it warns once and passes the batch through, as PyTorch."""
    if not is_available():
        if not _WARNED_NO_PIN[0]:
            _WARNED_NO_PIN[0] = True
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", UserWarning, stacklevel=3)
        return batch
    return _pin(batch)


set_pin_memory_hook(pin_batch)

# torch.cuda.FloatTensor and friends (``x.type(torch.cuda.FloatTensor)``, ``Tensor = torch.cuda.FloatTensor``)
_CUDA_TYPES = legacy_types("cuda")
FloatTensor = _CUDA_TYPES["FloatTensor"]
DoubleTensor = _CUDA_TYPES["DoubleTensor"]
HalfTensor = _CUDA_TYPES["HalfTensor"]
BFloat16Tensor = _CUDA_TYPES["BFloat16Tensor"]
LongTensor = _CUDA_TYPES["LongTensor"]
IntTensor = _CUDA_TYPES["IntTensor"]
ShortTensor = _CUDA_TYPES["ShortTensor"]
CharTensor = _CUDA_TYPES["CharTensor"]
ByteTensor = _CUDA_TYPES["ByteTensor"]
BoolTensor = _CUDA_TYPES["BoolTensor"]

from ember.amp import cuda_amp as amp  # noqa: E402,F401  (torch.cuda.amp)
from ember.cuda_graphs import (  # noqa: E402,F401  (torch.cuda.graphs: named, refused when used)
    CUDAGraph, MemPool, graph, graph_pool_handle, is_current_stream_capturing, make_graphed_callables,
)
