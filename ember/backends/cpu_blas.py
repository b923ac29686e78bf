"""NumPy's BLAS thread count, so ember's own thread pool can run GEMMs side by side.

A convolution is many medium GEMMs plus copies and transforms around them. Left to itself,
OpenBLAS splits each GEMM over all cores and its worker threads then spin (busy-wait with
``sched_yield``) for tens of milliseconds after every call, waiting for the next one; on a 2-core
machine those spinning workers take the second core from ember's thread pool, so the transforms
and copies ember splits over the cores ran no faster than on one core, and a ResNet-18 step took
as long on two cores as on one (docs/cpu-performance.md). ``blas_for`` instead gives each of
ember's threads a contiguous part of the work (images, tiles, channels), GEMMs included, with
OpenBLAS limited to one thread for the duration: every core does its own GEMMs, transforms and
copies with no barrier in between, and OpenBLAS's workers are never woken.

The thread count is a global setting of the library (OpenBLAS's ``openblas_set_num_threads``,
found with ``ctypes`` in the libraries the process has loaded). ``single_threaded_blas`` changes
it for the outermost caller only and restores it afterwards; another thread of the program calling
BLAS meanwhile runs on one thread, which is correct, only slower. Where no OpenBLAS is found
(MKL, Apple Accelerate, a BLAS without the call), or with ``EMBER_BLAS_SPLIT=0``, ``blas_for`` runs
its work on the calling thread, and BLAS uses its own threads as before.

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_blas import blas_for
    >>> a, out = np.ones((8, 4)), np.zeros((8, 8))
    >>> blas_for(lambda start, stop: np.matmul(a[start:stop], a.T, out=out[start:stop]), 8, min_chunk=1)
    >>> float(out.sum())
    256.0
"""
from __future__ import annotations

import ctypes
import math
import threading
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Iterator

import numpy  # noqa: F401  (loads NumPy's BLAS, which _controls looks for)

from ember import _config
from ember.backends import native_kernel
from ember.backends.cpu_threads import num_threads, parallel_for

# (get, set) symbol pairs, most specific first: NumPy's wheels bundle "scipy_openblas64_" builds
# with prefixed, suffixed names; distribution builds use the plain ones.
_SYMBOLS = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"found": None, "depth": 0, "saved": 0}


def _loaded_openblas() -> list[str]:
    """Paths of the OpenBLAS libraries mapped into this process (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return []
    # NumPy's own copy first: it is the one numpy.matmul calls.
    return sorted(paths, key=lambda p: ("numpy" not in p, p))


# How NumPy's OpenBLAS names its cblas functions: scipy-openblas's 64-bit-integer build, a plain ILP64 build, then
# 32-bit integers (with the integer type each form takes).
_CBLAS_FORMS = (("scipy_cblas_", "64_", ctypes.c_int64), ("cblas_", "64_", ctypes.c_int64),
                ("scipy_cblas_", "", ctypes.c_int), ("cblas_", "", ctypes.c_int))


def openblas_cblas(*names: str) -> tuple[list[Any], Any] | None:
    """The cblas functions ``names`` (e.g. ``"sgemm"``, ``"daxpy"``) of the OpenBLAS NumPy loaded, all under
    one naming form, with that form's integer type; None where no loaded OpenBLAS has them all. The caller sets
    ``argtypes``/``restype``.

    Example: found = openblas_cblas("saxpy", "daxpy")  # ([saxpy, daxpy], ctypes.c_int64) with NumPy 2 wheels
    """
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)  # (CDLL releases the GIL during each call)
        except OSError:
            continue
        for prefix, suffix, integer in _CBLAS_FORMS:
            functions = [getattr(lib, f"{prefix}{name}{suffix}", None) for name in names]
            if all(fn is not None for fn in functions):
                return functions, integer
    return None


def _controls() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """OpenBLAS's (get, set) thread-count functions for the BLAS NumPy uses, or None."""
    if _STATE["found"] is None:
        found: Any = False
        for path in _loaded_openblas():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for get_name, set_name in _SYMBOLS:
                if hasattr(lib, get_name) and hasattr(lib, set_name):
                    get, put = getattr(lib, get_name), getattr(lib, set_name)
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    found = (get, put)
                    break
            if found:
                break
        _STATE["found"] = found
    return _STATE["found"] or None


def available() -> bool:
    """Whether ember splits BLAS work over its own threads: NumPy's BLAS thread count can be set (an
    OpenBLAS was found) and ``EMBER_BLAS_SPLIT`` (``ember._config.BLAS_SPLIT``) says ``1``, or is unset on a
    CPU where ember's own AVX-512 convolution kernels run (``native_split``)."""
    setting = _config.BLAS_SPLIT
    if setting is None:
        setting = native_split()
    return bool(setting and _controls() is not None)


def native_split() -> bool:
    """Whether the split is on by default here: ember's AVX-512 kernels (direct convolutions, ember's GEMM)
    exist for NumPy, so the convolutions' chunks multiply with them and OpenBLAS's threads would only wake to
    spin against ember's (docs/cpu-performance.md, "Both cores by default"). A table look-up (``EMBER_CPU_KERNELS``
    may change at run time)."""
    return native_kernel(numpy, "conv_direct_forward") is not None


# Concurrent callers: NumPy's OpenBLAS is a threaded build (its thread pool exists, MAX_THREADS=64), and
# such builds take their own locks (or per-thread buffers) for every call, whatever the thread count
# set at run time, so GEMMs called from several threads at once are correct; on one BLAS thread each
# gives bit for bit what it gives alone (tests/backends/test_blas_concurrent_callers.py). For an
# afternoon of 2026-11-24 the split was opt-in over a suspected race: a ResNet-18 step at batch 16 gave
# gradients up to 9% away from torch's. That step amplifies any rounding change that much (3e-6 of
# noise on each convolution's output moves its gradients by 8-35%), and torch's own float32 loss there
# is 0.3% away from its float64 one, while ember's split agrees with float64 (docs/cpu-performance.md,
# "The BLAS split is safe").


class _SingleThreadedBlas:
    """The context ``single_threaded_blas()`` returns: a class, not a generator, because every BLAS product
    ember makes above OpenBLAS's own one-thread size enters it (0.8 us a call against 2.2 us)."""

    __slots__ = ("held",)

    def __enter__(self) -> bool:
        controls = _controls()
        if controls is None:
            self.held = False
            return False
        get, put = controls
        with _LOCK:
            if _STATE["depth"] == 0:
                _STATE["saved"] = get()
                if _STATE["saved"] != 1:
                    put(1)
            _STATE["depth"] += 1
        self.held = True
        return True

    def __exit__(self, *exc: Any) -> None:
        if not self.held:
            return
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0 and _STATE["saved"] != 1:
                _STATE["found"][1](_STATE["saved"])


def single_threaded_blas() -> _SingleThreadedBlas:
    """Limit NumPy's BLAS to one thread inside the block (the outermost block restores the count).
    Yields whether the limit is in force (False: no controllable BLAS found)."""
    return _SingleThreadedBlas()


@contextmanager
def one_thread(xp: Any = numpy) -> Iterator[None]:
    """``single_threaded_blas`` for NumPy arrays when ember splits BLAS work (``available()``);
    otherwise nothing. For the small GEMMs between split passes (a few hundred microseconds at
    most), which BLAS would otherwise spread over its threads and then leave them spinning."""
    if xp is numpy and available():
        with single_threaded_blas():
            yield
    else:
        yield


# ember's products and OpenBLAS's threads (blas18, issue 11). OpenBLAS's workers busy-wait (``sched_yield``) for
# ~0.1 s after each threaded call, and the calling thread busy-waits for them at the end of every call; on a loaded
# machine (a DataLoader's workers, another program, other jobs) a descheduled worker stalls the whole product for
# a time slice. W1's step (two 64 x 1000 x 100 products) took 20-42 ms of wall time per step with OpenBLAS's two
# threads under load 8 on 2 cores, against 1.7-1.8 ms with every product on one BLAS thread (torch: 10 ms at two
# threads, 1.3 ms at one; docs/cpu-performance.md, "blas18"). So every product ember hands to NumPy's OpenBLAS
# above OpenBLAS's own one-thread size runs with OpenBLAS held to one thread, and products of
# ``cpu_blas_gemm.SPLIT_MACS``+ multiply-adds use the second core through ember's pool (one one-thread BLAS call
# per ember thread, ``cpu_blas_gemm.split_gemm``; its workers sleep on a lock instead of spinning). The count is
# held for the call only: a program's own NumPy products keep OpenBLAS's threads. ``EMBER_BLAS_SPLIT=0`` restores
# the old rule (below ``SMALL_GEMM_MACS`` one thread, above it BLAS's own threads, no split).
SMALL_GEMM_MACS = 4e6
OPENBLAS_ONE_THREAD_MACS = 4 * 65536  # OpenBLAS runs products up to this size on one thread by itself


def owns_gemm_threads() -> bool:
    """Whether ember runs its BLAS products on one OpenBLAS thread each (splitting large ones over its own
    threads): NumPy's OpenBLAS thread count can be set and ``EMBER_BLAS_SPLIT`` is not ``0``."""
    return _config.BLAS_SPLIT is not False and _controls() is not None


def small_gemm(xp: Any, a: Any, b: Any) -> Any:
    """``single_threaded_blas()`` for ``a @ b`` (a matrix or a stack of them) when OpenBLAS would spread each
    product over its threads (more than ``OPENBLAS_ONE_THREAD_MACS`` multiply-adds) and ember holds them
    (``owns_gemm_threads``); otherwise a no-op context. With ``EMBER_BLAS_SPLIT=0`` only medium products
    (fewer than ``SMALL_GEMM_MACS``, stacks counted whole) are held, as before blas18."""
    m = a.shape[-2] if a.ndim >= 2 else 1
    n = b.shape[-1] if b.ndim >= 2 else 1
    macs = m * n * a.shape[-1]
    if macs <= OPENBLAS_ONE_THREAD_MACS or xp is not numpy or _controls() is None:
        return nullcontext()
    if _config.BLAS_SPLIT is False:
        stack = max(math.prod(a.shape[:-2]), math.prod(b.shape[:-2]))  # broadcast batch dims: the larger
        if macs * stack >= SMALL_GEMM_MACS:
            return nullcontext()
    return _SingleThreadedBlas()


def blas_for(fn: Callable[[int, int], object], total: int, min_chunk: int = 1, xp: Any = numpy) -> None:
    """``parallel_for(fn, total, min_chunk)`` for work that calls BLAS: one chunk per thread, each
    thread's GEMMs on that thread alone (work too small to split runs on the calling thread, still
    with BLAS on one thread: it gains nothing from BLAS's threads and would leave them spinning).
    Runs ``fn(0, total)`` as it is, BLAS keeping its own threads, when ember has one thread
    (``EMBER_CPU_THREADS=1``), no BLAS thread control is found, ``EMBER_BLAS_SPLIT=0``, or ``xp``
    is not NumPy (a device backend brings its own parallelism)."""
    if num_threads() <= 1 or xp is not numpy or not available():
        fn(0, total)
        return
    with single_threaded_blas():
        parallel_for(fn, total, min_chunk)
