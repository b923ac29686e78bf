"""The CUDA backend: CuPy arrays on NVIDIA GPUs (device type ``cuda``), and ``torch.backends.cuda``.

Op records keep one forward written against ``xp``; here ``xp`` is ``cupy``, so matmul is cuBLAS
(``ember.backends.cuda.matmul.allow_tf32`` sets CuPy's float32 compute type to TF32, off by default
as in PyTorch), elementwise ops are CuPy's kernels, and ``ember.compile``'s fused groups become
``cupy.ElementwiseKernel``s generated from the fuser's kernel source (:mod:`cuda_codegen`, cached
by signature). Random numbers are drawn on the device (:mod:`cuda_random`). Memory comes from
CuPy's caching pool, with PyTorch's statistics (allocated, peak, reserved) kept by a thin
allocator wrapper. Pinned host memory and ``non_blocking`` copies use CuPy's pinned pool and the
current stream.

Importing this module never fails: without CuPy or a GPU the backend reports itself unavailable
and using ``ember.device('cuda')`` (naming it works, as in PyTorch) raises the message of
:data:`ember.backends._NO_CUDA`. This module is
also ``torch.backends.cuda`` (``matmul``, ``is_built``, the SDP switches; see :mod:`cuda_flags`).

Example (with a GPU):
    >>> import ember
    >>> x = ember.randn(4, 4, device="cuda")          # doctest: +SKIP
    >>> ember.backends.cuda.matmul.allow_tf32 = True  # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

import numpy as np

from ember.backends import Backend, _BACKENDS, cuda_codegen, cuda_codegen_reduce, cuda_cudnn, cuda_flags
from ember.backends import cuda_cudnn_train
from ember.backends import register_backend
from ember.backends import cudnn as cudnn_flags
from ember.backends.cuda_flags import (  # noqa: F401  (torch.backends.cuda's names live here too)
    cudnn_sdp_enabled, cufft_plan_cache, enable_cudnn_sdp, enable_flash_sdp, enable_math_sdp,
    enable_mem_efficient_sdp, flash_sdp_enabled, is_built, math_sdp_enabled, matmul, mem_efficient_sdp_enabled,
    preferred_linalg_library)
from ember.backends.cuda_capture import Capturer
from ember.backends.cuda_random import PhiloxGenerator
from ember.graph.passes import kernel_text
from ember.ops import special_table

try:
    import cupy
    import cupyx.scipy.special as _cupy_special
    from cupy._core import _routines_linalg as _cupy_linalg  # CuPy's GEMM compute-type switch

    _IMPORT_ERROR = ""
except ImportError as _error:  # no CuPy: the backend says so when asked for a device
    cupy, _cupy_special, _cupy_linalg = None, None, None
    _IMPORT_ERROR = f"CuPy is not installed ({_error})"


class CuPyBackend(Backend):
    """CuPy on NVIDIA GPUs. Device indices follow CUDA's (``cuda:1`` is CUDA device 1)."""

    name = "cuda"
    xp = cupy

    def __init__(self) -> None:
        self._count: int | None = None
        self._reason = _IMPORT_ERROR
        self._peak: dict[int, int] = {}
        self._pool: Any = None
        self._inflight: list = []  # (event, host array) of non-blocking copies from pinned memory
        self._capturer = Capturer(cupy)
        self._cudnn: dict | None = None  # native_kernel names -> cuDNN callables ({} without the frontend)

    # ---- availability ---------------------------------------------------------------------------
    def _devices(self) -> int:
        if self._count is None:
            self._count = 0
            if cupy is not None:
                try:
                    self._count = int(cupy.cuda.runtime.getDeviceCount())
                except Exception as error:  # noqa: BLE001 - no driver / no device: CuPy's own runtime errors
                    self._reason = f"CuPy found no usable GPU ({type(error).__name__}: {error})"
                if self._count == 0 and not self._reason:
                    self._reason = "CuPy sees no GPU"
            if self._count:
                self._setup()
        return self._count

    def _setup(self) -> None:
        """First use on a machine with a GPU: track memory peaks, apply the TF32 flag."""
        self._pool = cupy.get_default_memory_pool()
        cupy.cuda.set_allocator(self._malloc)
        cuda_flags.on_change(apply_matmul_flags)
        apply_matmul_flags()

    def is_available(self) -> bool:
        return self._devices() > 0

    def unavailable_reason(self) -> str:
        self._devices()
        return self._reason or "the CUDA backend found no GPU"

    def device_count(self) -> int:
        return self._devices()

    def current_device(self) -> int:
        return int(cupy.cuda.runtime.getDevice())

    def set_device(self, index: int) -> None:
        self._check_index(index, "set_device")
        cupy.cuda.runtime.setDevice(int(index))

    def _check_index(self, index: int, what: str) -> int:
        count = self._devices()
        if not 0 <= int(index) < count:
            raise RuntimeError(f"ember.cuda.{what}: invalid device ordinal {index}: this machine has {count} CUDA "
                               f"device(s) (cuda:0..cuda:{count - 1})")
        return int(index)

    def _index(self, index: int | None) -> int:
        return self.current_device() if index is None else self._check_index(index, "device")

    def synchronize(self, index: int | None = 0) -> None:
        with cupy.cuda.Device(self._index(index)):
            cupy.cuda.Device().synchronize()

    def device_properties(self, index: int) -> dict:
        props = cupy.cuda.runtime.getDeviceProperties(self._check_index(index, "get_device_properties"))
        return {"name": props["name"].decode(), "total_memory": int(props["totalGlobalMem"]),
                "major": int(props["major"]), "minor": int(props["minor"]),
                "multi_processor_count": int(props["multiProcessorCount"])}

    # ---- transfers ------------------------------------------------------------------------------
    def asarray(self, data: Any, np_dtype: Any = None, index: int | None = 0) -> Any:
        idx = self._index(index)
        with cupy.cuda.Device(idx):
            if isinstance(data, cupy.ndarray):
                if data.device.id != idx:
                    data = data.copy()  # a peer copy onto the current device (CuPy's copy() does that)
                return data if np_dtype is None else data.astype(np_dtype, copy=False)
            return cupy.asarray(data, dtype=np_dtype)

    def to_numpy(self, array: Any) -> np.ndarray:
        with array.device:
            return array.get()

    def copy_from_host(self, array: np.ndarray, index: int | None = 0, non_blocking: bool = False) -> Any:
        """Host -> device. From pinned memory with ``non_blocking`` the copy is queued on the current
        stream and this returns at once (PyTorch's semantics); otherwise it is a synchronous copy."""
        if not (non_blocking and self.is_pinned(array)):
            return self.asarray(array, index=index)
        idx = self._index(index)
        with cupy.cuda.Device(idx):
            out = cupy.empty(array.shape, dtype=array.dtype)
            stream = cupy.cuda.get_current_stream()
            out.set(np.ascontiguousarray(array), stream=stream)
            done = cupy.cuda.Event(disable_timing=True)
            done.record(stream)
            # The host buffer must outlive the copy: keep it until the event has passed.
            self._inflight = [(e, a) for e, a in self._inflight if not e.done] + [(done, array)]
            return out

    def copy_to_host(self, array: Any, non_blocking: bool = False) -> np.ndarray:
        """Device -> host; ``non_blocking`` queues the copy into new pinned memory and returns at once
        (synchronize before reading the values, as with PyTorch)."""
        if not non_blocking:
            return self.to_numpy(array)
        with array.device:
            out = self.pin(np.empty(array.shape, dtype=array.dtype))
            array.get(stream=cupy.cuda.get_current_stream(), out=out, blocking=False)
            return out

    def is_array(self, value: Any) -> bool:
        return cupy is not None and isinstance(value, cupy.ndarray)

    def may_share_memory(self, a: Any, b: Any) -> bool:
        return self.is_array(a) and self.is_array(b) and bool(cupy.may_share_memory(a, b))

    def item(self, array: Any) -> Any:
        return array.item()

    def data_ptr(self, array: Any) -> int:
        return int(array.data.ptr)

    # ---- pinned host memory ---------------------------------------------------------------------
    def pin(self, array: np.ndarray) -> np.ndarray:
        """A copy of host ``array`` in page-locked memory (CuPy's pinned pool)."""
        array = np.asarray(array)
        memory = cupy.cuda.alloc_pinned_memory(max(array.nbytes, 1))
        out = np.frombuffer(memory, dtype=array.dtype, count=array.size).reshape(array.shape)
        out[...] = array
        return out

    def is_pinned(self, array: Any) -> bool:
        base = array
        while base is not None:
            if isinstance(base, cupy.cuda.PinnedMemoryPointer):
                return True
            base = getattr(base, "base", None) if isinstance(base, np.ndarray) else getattr(base, "obj", None)
        return False

    # ---- memory statistics (CuPy's caching pool) ------------------------------------------------------
    def _malloc(self, size: int) -> Any:
        memory = self._pool.malloc(size)
        device = memory.device_id
        used = self._pool.used_bytes()  # the current device's pool: the allocation happened there
        if used > self._peak.get(device, 0):
            self._peak[device] = used
        return memory

    def memory_stats(self, index: int | None = None) -> dict:
        idx = self._index(index)
        with cupy.cuda.Device(idx):
            used, total = int(self._pool.used_bytes()), int(self._pool.total_bytes())
        return {"allocated_bytes": used, "peak_allocated_bytes": max(used, self._peak.get(idx, 0)),
                "reserved_bytes": total}

    def reset_peak_memory_stats(self, index: int | None = None) -> None:
        idx = self._index(index)
        with cupy.cuda.Device(idx):
            self._peak[idx] = int(self._pool.used_bytes())

    def empty_cache(self) -> None:
        if self._pool is not None:
            self._pool.free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()

    def mem_get_info(self, index: int | None = None) -> tuple[int, int]:
        with cupy.cuda.Device(self._index(index)):
            free, total = cupy.cuda.runtime.memGetInfo()
        return int(free), int(total)

    # ---- events and streams -----------------------------------------------------------------------------
    def new_event(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> Any:
        return CudaEvent(enable_timing, blocking, interprocess)

    def new_stream(self, index: int | None = None, priority: int = 0) -> Any:
        with cupy.cuda.Device(self._index(index)):
            return CudaStream(cupy.cuda.Stream(non_blocking=False, priority=priority), self._index(index))

    def current_stream(self, index: int | None = None) -> Any:
        idx = self._index(index)
        with cupy.cuda.Device(idx):
            return CudaStream(cupy.cuda.get_current_stream(), idx)

    def default_stream(self, index: int | None = None) -> Any:
        return CudaStream(cupy.cuda.Stream.null, self._index(index))

    @contextlib.contextmanager
    def use_stream(self, stream: Any) -> Iterator[None]:
        if stream is None:
            yield
            return
        with cupy.cuda.Device(stream.device_index), stream.cupy_stream:
            yield

    @contextlib.contextmanager
    def use_device(self, index: int | None) -> Iterator[None]:
        if index is None or int(index) < 0:
            yield
            return
        with cupy.cuda.Device(self._check_index(index, "device")):
            yield

    # ---- CUDA graphs (ember/backends/cuda_capture.py) ---------------------------------------------------
    def capture_begin(self) -> None:
        """Start capturing the current device's work on a side stream (``Stream.begin_capture``)."""
        self._capturer.begin()

    def capture_end(self) -> Any:
        """End the capture: a graph whose ``replay()`` launches it on the current stream."""
        return self._capturer.end()

    def capture_abort(self) -> None:
        self._capturer.abort()

    def is_capturing(self) -> bool:
        return self._capturer.is_capturing()

    # ---- kernels ------------------------------------------------------------------------------------
    def fuse(self, kernel: Any, outputs: list = (), single_loop: bool = True) -> Callable | None:
        """A CUDA kernel for a fused group, or None for the generic replay (groups ending in a reduction).

        Also accepts the fuser's older hook form ``fuse(source, name)`` (a source string)."""
        source = kernel if isinstance(kernel, str) else kernel.source
        try:
            program = cuda_codegen.parse(source)
        except (cuda_codegen.UnsupportedKernel, kernel_text.UnsafeKernelValue):
            return None
        try:
            cuda_codegen.split_reduction(program)
        except cuda_codegen.UnsupportedKernel:
            return None
        generic = kernel
        if isinstance(kernel, str):  # the older hook form: build the generic replay from the parsed steps
            from ember.graph.passes.fuse import FusedKernel  # the graph package imports backends: on use

            generic = FusedKernel(cuda_codegen.fuser_steps(program), len(program.inputs), list(program.outputs),
                                  source, cupy)
        return FusedCudaKernel(program, generic)

    def special_function(self, name: str) -> Callable:
        """cupyx.scipy.special's function; the few it lacks (airy_ai, the orthogonal polynomials) run
        ember's NumPy version on explicit host copies."""
        fn = getattr(_cupy_special, {"lgamma": "gammaln", "digamma": "psi"}.get(name, name), None)
        if fn is not None:
            return fn
        host = special_table.FUNCTIONS[name]

        def on_host(*args: Any, out: Any = None) -> Any:
            values = cupy.asarray(host(*(cupy.asnumpy(a) if isinstance(a, cupy.ndarray) else a for a in args)))
            if out is None:
                return values
            out[...] = values
            return out

        return on_host

    def cudnn_frontend(self) -> Any:
        """The cuDNN frontend module (``ember.backends.cudnn.is_available``), or None."""
        return cuda_cudnn.frontend() if self.is_available() else None

    def native_kernel(self, name: str) -> Callable | None:
        """cuDNN kernels (``cudnn_conv2d``, ``cudnn_conv2d_input_grad``, ``cudnn_conv2d_weight_grad``,
        ``cudnn_sdpa``, ``cudnn_layer_norm``: :mod:`cuda_cudnn`; ``cudnn_layer_norm_train``/``_backward``,
        ``cudnn_batch_norm_train``/``_backward``, ``cudnn_sdpa_train``/``_backward``: :mod:`cuda_cudnn_train`)
        while ``ember.backends.cudnn.enabled``
        and the frontend loads; each returns None for a signature cuDNN refuses (the caller's CuPy path runs)."""
        if not cudnn_flags.enabled or not name.startswith("cudnn_"):
            return None
        if self._cudnn is None:
            fe = cuda_cudnn.frontend()
            ops = None if fe is None else cuda_cudnn.CudnnOps(fe, cupy)
            self._cudnn = {} if ops is None else {**ops.kernels(), **cuda_cudnn_train.kernels(ops)}
        return self._cudnn.get(name)

    # ---- random numbers ------------------------------------------------------------------------------
    device_seeded_rng = True  # make_rng takes a 0-d int64 device array as the seed (CUDA-graph replays)

    def make_rng(self, seed: Any, stream: int | None = None) -> PhiloxGenerator:
        return PhiloxGenerator(cupy, seed, stream)

    def rng_state(self, rng: PhiloxGenerator) -> dict:
        return rng.state()

    def set_rng_state(self, rng: PhiloxGenerator, state: dict) -> None:
        rng.set_state(state)


class FusedCudaKernel:
    """A fused group as ``cupy.ElementwiseKernel``s, one per input-dtype signature (compiled on first
    call, cached by the generated source; CuPy also caches the binary on disk). Dtype signatures the
    generator cannot translate run the fuser's generic replay."""

    _CACHE: dict[str, Any] = {}  # KernelSource.key -> ElementwiseKernel, shared by all fused nodes

    def __init__(self, program: cuda_codegen.Program, generic: Any) -> None:
        self.program = program
        self.generic = generic
        # A trailing sum/mean: when it is the group's only result, one ReductionKernel (cuda_codegen_reduce.py);
        # otherwise the elementwise part is one kernel that also writes the reduction's operand, then one CuPy
        # reduction (and casts) finishes: two launches instead of one per step.
        self.head, self.tail = cuda_codegen.split_reduction(program)
        self.single = cuda_codegen_reduce.single_kernel(program)
        self.by_dtypes: dict[tuple, Any] = {}

    def _build(self, dtypes: tuple) -> Any:
        if self.single:
            try:
                return SingleReduction(cuda_codegen_reduce.generate_reduction(self.program, dtypes))
            except cuda_codegen.UnsupportedKernel:
                pass  # two launches, below
        try:
            source = cuda_codegen.generate(self.head, dtypes)
        except cuda_codegen.UnsupportedKernel:
            if self.generic is None:
                raise
            return None
        kernel = self._CACHE.get(source.key)
        if kernel is None:
            # --fmad=false: a*b+c rounds twice, as in eager (NVRTC fuses it into one FMA by default).
            kernel = cupy.ElementwiseKernel(source.in_params, source.out_params, source.body, source.name,
                                            preamble=source.preamble, return_tuple=True, options=("--fmad=false",))
            self._CACHE[source.key] = kernel
        return kernel

    def __call__(self, xp: Any, *arrays: Any) -> Any:
        dtypes = tuple(a.dtype for a in arrays)
        kernel = self.by_dtypes.get(dtypes, False)
        if kernel is False:
            kernel = self.by_dtypes[dtypes] = self._build(dtypes)
        if kernel is None:
            return self.generic(xp, *arrays)
        if type(kernel) is SingleReduction:
            if any(a.size == 0 for a in arrays):  # (the kernel's count would divide by zero for an empty mean)
                return self.generic(xp, *arrays)
            return kernel(*arrays)
        outs = kernel(*arrays)
        if self.tail:
            env = dict(zip(self.head.outputs, outs))
            for step in self.tail:
                env[step.name] = _tail_step(xp, step, env)
            outs = tuple(env[o] for o in self.program.outputs)
        return outs[0] if len(outs) == 1 else outs


class SingleReduction:
    """A fused group ending in its only result, a sum/mean: one ``cupy.ReductionKernel`` (cached by source)."""

    _CACHE: dict[str, Any] = {}

    def __init__(self, source: cuda_codegen_reduce.ReductionSource) -> None:
        self.source = source
        kernel = self._CACHE.get(source.key)
        if kernel is None:
            kernel = cupy.ReductionKernel(source.in_params, source.out_params, source.map_expr, source.reduce_expr,
                                          source.post_map_expr, source.identity, source.name,
                                          reduce_type=source.reduce_type, preamble=source.preamble,
                                          options=("--fmad=false",))
            self._CACHE[source.key] = kernel
        self.kernel = kernel

    def __call__(self, *arrays: Any) -> Any:
        return self.kernel(*arrays, axis=self.source.axis, keepdims=self.source.keepdims)


def _tail_step(xp: Any, step: cuda_codegen.Step, env: dict) -> Any:
    """A reduction or a cast after a fused elementwise kernel (the fuser's replay of that step)."""
    kwargs = dict(step.kwargs)
    x = env[step.operands[0]]
    if step.fn == "cast":
        return xp.asarray(x).astype(cuda_codegen.dtype_of(kwargs["dtype"]))
    if "dtype" in kwargs:
        kwargs["dtype"] = cuda_codegen.dtype_of(kwargs["dtype"])
    return xp.asarray(getattr(xp, step.fn)(x, **kwargs))


class CudaEvent:
    """``ember.cuda.Event`` on a GPU: a CUDA event (timing in milliseconds)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self.cupy_event = cupy.cuda.Event(block=blocking, disable_timing=not enable_timing, interprocess=interprocess)

    def record(self, stream: Any = None) -> None:
        self.cupy_event.record(None if stream is None else stream.cupy_stream)

    def query(self) -> bool:
        return bool(self.cupy_event.done)

    def synchronize(self) -> None:
        self.cupy_event.synchronize()

    def wait(self, stream: Any = None) -> None:
        target = cupy.cuda.get_current_stream() if stream is None else stream.cupy_stream
        target.wait_event(self.cupy_event)

    def elapsed_time(self, end_event: "CudaEvent") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with enable_timing=True")
        return float(cupy.cuda.get_elapsed_time(self.cupy_event, end_event.cupy_event))


class CudaStream:
    """``ember.cuda.Stream`` on a GPU: a CUDA stream of one device."""

    def __init__(self, stream: Any, index: int) -> None:
        self.cupy_stream, self.device_index = stream, index

    @property
    def priority(self) -> int:
        return int(self.cupy_stream.priority)

    def synchronize(self) -> None:
        self.cupy_stream.synchronize()

    def query(self) -> bool:
        return bool(self.cupy_stream.done)

    def wait_event(self, event: CudaEvent) -> None:
        self.cupy_stream.wait_event(event.cupy_event)

    def wait_stream(self, stream: "CudaStream") -> None:
        self.cupy_stream.wait_event(stream.cupy_stream.record())

    def record_event(self, event: CudaEvent | None = None) -> CudaEvent:
        event = event if event is not None else CudaEvent()
        event.record(self)
        return event

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CudaStream) and self.cupy_stream.ptr == other.cupy_stream.ptr

    def __hash__(self) -> int:
        return hash(self.cupy_stream.ptr)

    def __repr__(self) -> str:
        return f"<ember.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cupy_stream.ptr:#x}>"


def apply_matmul_flags() -> None:
    """Set CuPy's float32 GEMM compute type from ``matmul.allow_tf32`` (TF32 tensor cores, ~10 bits of
    mantissa in products, as PyTorch's flag); off by default."""
    if _cupy_linalg is None:
        return
    tf32 = bool(matmul.allow_tf32) or getattr(matmul, "fp32_precision", "none") == "tf32"
    wanted = _cupy_linalg.COMPUTE_TYPE_TF32 if tf32 else _cupy_linalg.COMPUTE_TYPE_DEFAULT
    _cupy_linalg.set_compute_type(np.dtype(np.float32), wanted)


BACKEND = CuPyBackend()
if "cuda" not in _BACKENDS:  # the stand-in device may already serve "cuda" (tests): leave it in place
    register_backend("cuda", BACKEND)
