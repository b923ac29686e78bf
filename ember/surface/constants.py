"""PyTorch's constants, dtype info, legacy tensor types and process-wide settings.

Example:
    >>> import ember as torch
    >>> torch.finfo(torch.float32).eps, torch.iinfo(torch.int8).max
    (1.1920928955078125e-07, 127)
    >>> torch.FloatTensor([1, 2]).dtype
    ember.float32
"""
from __future__ import annotations

import math
import os
import warnings
from typing import Any

import numpy as np

from ember.dtypes import set_default_dtype
from ember import _config, dtypes, float8
from ember.device import device as _device, get_default as _get_default, set_default as _set_default
from ember.legacy_types import legacy_types
from ember import _warn_once
from ember._warn_once import warn_once
from ember.tensor import Tensor
from ember.ops.extra_math import _finfo
from ember.surface.functions import is_nonzero as _is_nonzero
from ember.storage import TypedStorage, UntypedStorage

__all__ = [
    "pi", "e", "inf", "nan", "newaxis", "finfo", "iinfo", "layout", "strided", "sparse_coo", "sparse_csr", "sparse_csc", "jagged", "memory_format",
    "contiguous_format", "channels_last", "channels_last_3d", "preserve_format", "FloatTensor", "DoubleTensor",
    "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor",
    "BoolTensor", "set_num_threads", "get_num_threads", "get_num_interop_threads", "set_num_interop_threads", "set_printoptions",
    "set_default_device", "get_default_device", "set_default_tensor_type", "set_flush_denormal", "has_lapack",
    "has_mkl", "has_openmp", "has_spectral", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode", "get_deterministic_debug_mode",
    "init_num_threads", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "set_warn_always", "is_warn_always_enabled", "typename", "is_storage",
    "get_device", "is_inference", "is_complex", "cfloat", "cdouble",
    "uint16", "uint32", "uint64", "is_nonzero",
]

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None


class finfo:
    """``torch.finfo(dtype)``: machine limits of a floating dtype (eps, max, min, tiny, resolution, bits)."""

    def __init__(self, type: Any = None) -> None:  # noqa: A002 - PyTorch's argument name
        dt = dtypes.get_default_dtype() if type is None else dtypes.to_dtype(type)
        if not dt.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle "
                            f"'{dt}'")

        if dt in dtypes.FLOAT8_DTYPES:  # torch's values (e5m2fnuz's eps is 0.125 there)
            for key, value in float8.finfo(dt.name).items():
                setattr(self, key, value)
            self.dtype = dt.name
            return
        info = _finfo(dt.np)
        self.dtype = dt.name
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.tiny if hasattr(info, "tiny") else info.smallest_normal)
        # PyTorch: 10 ** -digits10 as a Python float (exactly 1e-06 for float32; NumPy's is a float32 1e-06)
        self.resolution = 10.0 ** -int(info.precision)

    def __repr__(self) -> str:  # PyTorch prints the values as C++ streams do: 6 significant digits
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")

    __str__ = __repr__


class iinfo:
    """``torch.iinfo(dtype)``: limits of an integer dtype."""

    def __init__(self, type: Any) -> None:  # noqa: A002
        dt = dtypes.to_dtype(type)
        if dt.is_floating_point:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to handle '{dt}'")
        info = np.iinfo(dt.np) if dt is not dtypes.bool_ else None
        self.dtype = dt.name
        self.bits = int(info.bits) if info is not None else 8
        self.max = int(info.max) if info is not None else 1
        self.min = int(info.min) if info is not None else 0

    def __repr__(self) -> str:  # as PyTorch: the limits printed as doubles with 6 significant digits
        return f"iinfo(min={float(self.min):g}, max={float(self.max):g}, dtype={self.dtype})"

    __str__ = __repr__


class layout:
    """Tensor layouts: ember tensors are always ``strided``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"


strided = layout("strided")
sparse_coo = layout("sparse_coo")
sparse_csr = layout("sparse_csr")
sparse_csc = layout("sparse_csc")
jagged = layout("jagged")  # torch.nested's jagged layout (ember/nested)


class memory_format:
    """Memory formats: accepted where PyTorch takes them; ember arrays are row-major (``contiguous_format``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")


_CPU_TYPES = legacy_types("cpu")
FloatTensor = _CPU_TYPES["FloatTensor"]
DoubleTensor = _CPU_TYPES["DoubleTensor"]
HalfTensor = _CPU_TYPES["HalfTensor"]
BFloat16Tensor = _CPU_TYPES["BFloat16Tensor"]
LongTensor = _CPU_TYPES["LongTensor"]
IntTensor = _CPU_TYPES["IntTensor"]
ShortTensor = _CPU_TYPES["ShortTensor"]
CharTensor = _CPU_TYPES["CharTensor"]
ByteTensor = _CPU_TYPES["ByteTensor"]
BoolTensor = _CPU_TYPES["BoolTensor"]


from ember.dtypes import cdouble, cfloat  # noqa: E402  (complex dtypes exist now: re-exported under their old names)
from ember.dtypes import uint16, uint32, uint64  # noqa: E402  (torch's limited-support unsigned dtypes)

_SETTINGS: dict[str, Any] = {"num_threads": None, "interop_threads": 1, "deterministic": False,
                             "deterministic_warn_only": False, "matmul_precision": "highest", "warn_always": False,
                             "default_device": None}


def get_num_threads() -> int:
    """Threads for ember's native kernels: what ``set_num_threads`` set, else ``EMBER_CPU_THREADS``, else
    ``OMP_NUM_THREADS`` (as PyTorch reads it at start), else the machine's CPU count."""
    if _SETTINGS["num_threads"]:
        return _SETTINGS["num_threads"]
    if _config.CPU_THREADS > 0:
        return _config.CPU_THREADS
    env = os.environ.get("OMP_NUM_THREADS", "")
    return int(env) if env.isdigit() and int(env) > 0 else os.cpu_count() or 1


def set_num_threads(num: int) -> None:
    """Threads for ember's thread pool (``cpu_threads.parallel_for``: its split GEMMs, elementwise passes and
    native kernels; ``set_num_threads(1)`` runs everything on the calling thread, as in PyTorch) and, where
    threadpoolctl is installed, BLAS. ember's own products run on one BLAS thread each either way."""
    if int(num) < 1:
        raise RuntimeError(f"set_num_threads: number of threads must be positive, got {num}")
    _SETTINGS["num_threads"] = int(num)
    _config.CPU_THREADS = int(num)
    os.environ["NUMBA_NUM_THREADS"] = str(int(num))
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(int(num))
    except ImportError:  # without threadpoolctl, BLAS keeps the thread count it started with
        pass


def get_num_interop_threads() -> int:
    return _SETTINGS["interop_threads"]


def set_num_interop_threads(num: int) -> None:
    if int(num) < 1:
        raise RuntimeError(f"set_num_interop_threads: number of threads must be positive, got {num}")
    _SETTINGS["interop_threads"] = int(num)


def set_printoptions(precision: int | None = None, threshold: int | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """How tensors print (PyTorch's options and profiles ``default``, ``short``, ``full``)."""
    from ember import _repr

    if profile is not None:
        profiles = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80), "full": (4, math.inf, 3, 80)}
        if profile not in profiles:
            raise ValueError(f"set_printoptions: profile must be default, short or full, got {profile!r}")
        p, t, eitems, lw = profiles[profile]
        _repr.OPTIONS.update(precision=p, threshold=t if t != math.inf else 2**62, edgeitems=eitems, linewidth=lw)
    for key, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                       ("linewidth", linewidth)):
        if value is not None:
            _repr.OPTIONS[key] = int(value) if value != math.inf else 2**62
    _repr.OPTIONS["sci_mode"] = sci_mode


def set_default_device(device: Any) -> None:
    """The device of tensors made without ``device=`` (None: the CPU): ``set_default_device("meta")``."""
    _set_default(None if device is None else _device(device))  # a device that cannot load raises here
    _SETTINGS["default_device"] = device


def get_default_device() -> Any:
    return _get_default()


def set_default_tensor_type(t: Any) -> None:
    """Deprecated in PyTorch: sets the default floating dtype from ``torch.FloatTensor``/``DoubleTensor``."""
    warn_once("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please use torch.set_default_dtype() "
              "and torch.set_default_device() as alternatives.")
    dtype = getattr(t, "_dtype", None) or {"torch.FloatTensor": dtypes.float32,
                                            "torch.DoubleTensor": dtypes.float64}.get(str(t))
    if dtype is None or not dtype.is_floating_point:
        raise TypeError(f"set_default_tensor_type: only floating-point types are supported as the default type, "
                        f"got {t}")
    set_default_dtype(dtype)


def set_flush_denormal(mode: bool) -> bool:
    """Denormal flushing is a CPU flag NumPy does not expose: unsupported, as on CPUs without SSE3."""
    return False


has_lapack = True  # through NumPy
has_mkl = False
has_openmp = False
has_spectral = True


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Accepted: every ember CPU kernel is deterministic already."""
    _SETTINGS["deterministic"], _SETTINGS["deterministic_warn_only"] = bool(mode), bool(warn_only)


def set_deterministic_debug_mode(debug_mode: "str | int") -> None:
    """``torch.set_deterministic_debug_mode``: 0/"default", 1/"warn", 2/"error" (the same switch as
    ``use_deterministic_algorithms``)."""
    modes = {"default": 0, "warn": 1, "error": 2}
    mode = modes.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of {list(modes)} or 0, 1, 2, "
                           f"but got {debug_mode!r}")
    use_deterministic_algorithms(mode > 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    if not _SETTINGS["deterministic"]:
        return 0
    return 1 if _SETTINGS["deterministic_warn_only"] else 2


def init_num_threads() -> None:
    """Nothing to do: ember's thread pools start on first use."""


def are_deterministic_algorithms_enabled() -> bool:
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _SETTINGS["deterministic_warn_only"]


def set_float32_matmul_precision(precision: str) -> None:
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: invalid precision {precision!r}; use highest, high or "
                           "medium")
    _SETTINGS["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return _SETTINGS["matmul_precision"]


def set_warn_always(b: bool) -> None:
    _SETTINGS["warn_always"] = _warn_once.WARN_ALWAYS[0] = bool(b)


def is_warn_always_enabled() -> bool:
    return _SETTINGS["warn_always"]


def typename(obj: Any) -> str:
    if isinstance(obj, Tensor):
        return dtypes.legacy_type_name(obj.dtype, obj.device.type)
    module = type(obj).__module__
    return type(obj).__qualname__ if module in ("builtins", None) else f"{module}.{type(obj).__qualname__}"


def is_storage(obj: Any) -> bool:
    """Whether ``obj`` is a storage (``tensor.untyped_storage()``, ``torch.FloatStorage(...)``)."""
    return isinstance(obj, (UntypedStorage, TypedStorage))


def is_inference(input: Tensor) -> bool:
    """False: ember has no separate inference tensors (``inference_mode`` is ``no_grad``)."""
    return False


def get_device(input: Tensor) -> int:
    return -1 if input.device.type == "cpu" else (input.device.index or 0)


def is_complex(input: Tensor) -> bool:
    """True for complex64/complex128 tensors (``torch.is_complex``)."""
    return input.dtype.is_complex


def is_nonzero(input: Tensor) -> bool:
    return _is_nonzero(input)
