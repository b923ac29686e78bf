"""Eager elementwise passes (``+ - * /`` and fills) in two halves, the second on the hot worker, while it spins.

Why (issue 11, W1; docs/cpu-performance.md "w1hot21"): ``cpu_hot_worker`` runs half of each medium GEMM on a
second core, so half of a weight gradient (and of the weight it read) sits in that core's cache afterwards; the
eager passes that follow (the gradient sum into ``.grad``, ``lr * grad``, ``w.sub_(...)``, ``grad.zero_()``:
100K-1M elements, ~20-50 us each) ran on the calling core alone, pulling that half across. PyTorch runs them on
both of its threads. Here such a pass runs as two ranges of its elements, the caller's and the worker's
(``split_call_into``: a native hand-off of ~2 us to a worker that spins for ~1 ms after each product), cut where
``cpu_hot_worker`` cuts a product of the same rows, so each core mostly touches what it wrote.

Numerics: each element is one IEEE operation rounded once, as in NumPy's loop, so the result is the bits of one
NumPy call (a Python number is converted to the array's dtype first, as NumPy 2 does with a weak scalar).
Taken only when it cannot differ from NumPy: float32/float64 C-contiguous arrays of one shape and dtype (no
broadcasting), a Python float/int, an output that is fresh or is one of the operands (no partial overlap),
an error state that only warns or ignores, ``MIN_ELEMENTS`` or more, and the hot worker spinning (``cpu_hot_worker``'s
rules: ``EMBER_HOT_WORKER=0``, one ember thread, no numba or ``EMBER_CPU_KERNELS=numpy`` turn it off). Anything
else returns None/False and the caller runs NumPy.

Example:
    >>> import numpy as np
    >>> x = np.ones((1000, 100), np.float32)
    >>> out = binary(np.multiply, 0.5, x)   # None where the worker is not spinning: then call NumPy
    >>> out is None or float(out[999, 99]) == 0.5
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import _config
from ember.backends import cpu_hot_worker, cpu_kernels, cpu_threads

try:  # NumPy 2: the error state in force (numpy/_core/_ufunc_config.py), read without building a dict
    from numpy._core._ufunc_config import _extobj_contextvar as _ERRSTATE
except ImportError:  # NumPy 1.x: never split (its error state cannot be read cheaply)
    _ERRSTATE = None
_DEFAULT_ERRSTATE = _ERRSTATE.get() if _ERRSTATE is not None else None

# Passes below this many elements run whole: the hand-off from Python (~3-4 us with the checks) costs what the
# second core saves. Measured on W1's passes (docs/cpu-performance.md, "w1hot21").
MIN_ELEMENTS = 1 << 15
# The cut is on a multiple of this many elements (a 64-byte cache line of float32) when no row cut applies.
ALIGN = 16

_OPS = {np.add: 0, np.subtract: 1, np.multiply: 2, np.true_divide: 3}
_F4, _F8 = np.dtype(np.float32), np.dtype(np.float64)  # native byte order only (a swapped '>f4' also has char 'f')
_NATIVE = (_F4, _F8)
_FILL, _COPY = 4, 5
_ARRAYS, _ARRAY_SCALAR, _SCALAR_ARRAY = range(3)
_STATE: dict = {"kernels": None, "failed": False}


def _kernels() -> Any:
    """The native module (``cpu_kernels``' "hot_ufuncs"); None without numba or with ``EMBER_CPU_KERNELS=numpy``."""
    kernels = _STATE["kernels"]
    if kernels is None and not _STATE["failed"]:
        kernels = _STATE["kernels"] = cpu_kernels.get("hot_ufuncs")
        _STATE["failed"] = kernels is None
    return kernels


def _spinning() -> bool:
    """Whether a pass may be split now (cheap tests first): the hot worker exists (a product started it) and is
    not asleep or paused, ``EMBER_HOT_WORKER`` is on with numba's kernels, ember has more than one thread, and
    NumPy's error state only warns or ignores (a caller's ``errstate(all="raise")`` is NumPy's to honour)."""
    worker = cpu_hot_worker._STATE["worker"]
    if worker is None or worker.slot[worker.kernels.ASLEEP] or worker.paused_until != 0.0 or not _config.HOT_WORKER \
            or _config.CPU_KERNELS != "numba":
        return False
    return _ERRSTATE is not None and _quiet(_ERRSTATE.get()) and cpu_threads.num_threads() > 1


def _quiet(state: Any) -> bool:
    """Whether NumPy's error state ``state`` only warns or ignores (the halves raise nothing and warn nothing;
    NumPy's RuntimeWarnings from inside ember are filtered out, ``ember/_fp_warnings.py``), not "raise", "call" or
    "log", which are NumPy's to honour. Cached per state object (an ``errstate`` block makes a new one)."""
    if state is _DEFAULT_ERRSTATE:
        return True
    hit = _QUIET.get(id(state))
    if hit is not None and hit[0] is state:
        return hit[1]
    if len(_QUIET) > 64:
        _QUIET.clear()
    quiet = all(mode in ("ignore", "warn") for mode in np.geterr().values())
    _QUIET[id(state)] = (state, quiet)  # (the state kept alive: its id is not reused while cached)
    return quiet


_QUIET: dict = {}


def cut(shape: tuple, size: int) -> int:
    """Where a pass over ``size`` elements of ``shape`` is cut: at ``cpu_hot_worker.cut``'s row of a 2-D or larger
    array (the rows the worker's half of a product of those rows wrote), else near the middle on a multiple of
    ``ALIGN`` elements.

    Example:
        >>> cut((1000, 100), 100000), cut((100000,), 100000)
        (49600, 50000)
    """
    if len(shape) >= 2 and shape[0] >= 2:
        return cpu_hot_worker.cut(shape[0]) * (size // shape[0])
    return size // 2 // ALIGN * ALIGN


def _scalar(value: Any, dtype: Any) -> float | None:
    """``value`` (a Python float or int) converted to ``dtype`` as NumPy 2 converts a weak scalar, as a Python
    float (a float32 value is exact in it); None where that conversion overflows (NumPy warns: its path) or an int
    is not exact in a float64."""
    if value.__class__ is int:
        if abs(value) > 1 << 53:
            return None
        value = float(value)
    if dtype.char == "d":
        return value
    if _F32_OVERFLOW <= abs(value) < _INF:  # rounds to inf in float32
        return None
    return float(np.float32(value))


_INF = float("inf")
_F32_OVERFLOW = 2.0 ** 128 - 2.0 ** 103  # halfway from float32's largest value to 2^128: this and above round to inf


def binary(ufunc: Any, x: Any, y: Any, out: Any = None) -> Any:
    """``ufunc(x, y)`` (into ``out``, which may be ``x`` or ``y`` itself) in two halves on the hot worker; the
    result array, or None with nothing computed where this does not apply (then call NumPy). ``ufunc`` is
    ``np.add``, ``np.subtract``, ``np.multiply`` or ``np.true_divide``; ``x``/``y`` are NumPy arrays or one of them
    a Python number."""
    op = _OPS.get(ufunc)
    if op is None:
        return None
    scalar = 0.0
    if x.__class__ is np.ndarray:
        array = x
        if y.__class__ is np.ndarray:
            if y.shape != x.shape or y.dtype is not x.dtype or not y.flags.c_contiguous:
                return None
            form = _ARRAYS
        elif y.__class__ is float or y.__class__ is int:
            form, scalar = _ARRAY_SCALAR, y
        else:
            return None
    elif y.__class__ is np.ndarray and (x.__class__ is float or x.__class__ is int):
        array, form, scalar = y, _SCALAR_ARRAY, x
    else:
        return None
    size = array.size
    dtype = array.dtype
    if size < MIN_ELEMENTS or (dtype is not _F4 and dtype is not _F8) or not array.flags.c_contiguous \
            or not _spinning():
        return None
    if form != _ARRAYS:
        scalar = _scalar(scalar, dtype)
        if scalar is None:
            return None
    if out is None:
        out = np.empty(array.shape, dtype)
    elif not (out is x or out is y) or not out.flags.writeable:
        return None  # an output that may overlap an operand in part: NumPy's buffering handles it
    elif form == _ARRAYS and x is not y and (x.base is not None or y.base is not None):
        return None  # (an operand that is a view could overlap the output in part)
    kernels = _STATE["kernels"] or _kernels()
    if kernels is None:
        return None
    b = y if form == _ARRAYS else out
    if not cpu_hot_worker.split_native(kernels.split_pass, kernels.address(dtype.char), op, form, out, array, b,
                                       scalar, cut(array.shape, size)):
        ufunc(x, y, out=out)  # the worker was busy (another thread's pass) or fell asleep: NumPy, whole
    return out


def add_into(buffer: Any, value: Any) -> bool:
    """``buffer += value`` (same shape and dtype) in two halves on the hot worker; False, nothing done, where it
    does not apply."""
    return binary(np.add, buffer, value, out=buffer) is not None


def copy_into(target: Any, value: Any) -> bool:
    """``target[...] = value`` (two C-contiguous arrays of one shape and dtype that do not overlap: a compiled
    step's write-back of a state, ``w.grad``'s zeros) in two halves on the hot worker; False, nothing done, where it
    does not apply. A ``value`` that is one element broadcast (a graph's constant zeros) is a fill."""
    if target.__class__ is not np.ndarray or value.__class__ is not np.ndarray or target.size < MIN_ELEMENTS \
            or target.dtype not in _NATIVE or value.dtype != target.dtype or value.shape != target.shape:
        return False
    if not any(value.strides):  # every element the same one
        return fill(target, value.item(0))
    if not target.flags.c_contiguous or not value.flags.c_contiguous or not target.flags.writeable \
            or not _spinning() or np.may_share_memory(target, value):
        return False
    kernels = _STATE["kernels"] or _kernels()
    if kernels is None:
        return False
    if not cpu_hot_worker.split_native(kernels.split_pass, kernels.address(target.dtype.char), _COPY, 0, target,
                                       value, target, 0.0, cut(target.shape, target.size)):
        target[...] = value
    return True


def fill(buffer: Any, value: Any) -> bool:
    """``buffer.fill(value)`` (a Python float or int) in two halves on the hot worker (``zero_()`` of a
    gradient); False, nothing done, where it does not apply."""
    if buffer.__class__ is not np.ndarray or buffer.size < MIN_ELEMENTS or buffer.dtype not in _NATIVE \
            or not buffer.flags.c_contiguous or not buffer.flags.writeable or not _spinning():
        return False
    scalar = _scalar(value, buffer.dtype)
    kernels = _STATE["kernels"] or _kernels()
    if scalar is None or kernels is None:
        return False
    if not cpu_hot_worker.split_native(kernels.split_pass, kernels.address(buffer.dtype.char), _FILL, 0, buffer,
                                       buffer, buffer, scalar, cut(buffer.shape, buffer.size)):
        buffer.fill(value)
    return True


