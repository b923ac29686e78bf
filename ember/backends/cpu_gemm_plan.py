"""A 2-D NumPy product's path, decided once per signature: the hot worker's split, or the whole chain as before.

Why (issue 11, W1 eager; docs/cpu-performance.md "w1eager22"): ``linalg._matmul_impl`` asked on every product
whether ember's AVX-512 kernel takes it (``gemm_2d`` -> ``native_kernel`` -> ``cpu_gemm_kernels.matmul`` ->
``use_ember``), whether ember splits it (``split_gemm`` -> ``_kind``, ``num_threads``, ``owns_gemm_threads``,
``worth_it``, ``cut``) and whether the hot worker is ready (``_hot_split`` -> ``ready``), after which
``split_gemm_into`` checked the operands again: ~25 Python calls, ~13 us of W1's ~100 us forward product inside
its step. The answers depend only on the product's signature (shapes, strides, dtypes) and on settings: ``_config``,
the thread counts, the kernel table, and the functions and bounds of the modules that decide (which tests replace).
Those are read into a stamp on every call (C-level ``attrgetter``s, no Python call); a signature's plan is made
again whenever its stamp differs. What changes from call to call is still read per call, as before: whether this
is a chunk of ember's pool, the worker's state (asleep, paused, busy).

Same bits: a split plan posts the very job ``split_gemm_into`` posts (the same cut, axis and BLAS); any other
plan, or a split that cannot run now, returns None and the caller runs the whole chain.

Example:
    >>> import numpy as np
    >>> a, b = np.ones((64, 1000), np.float32), np.ones((1000, 100), np.float32)
    >>> out = matmul_2d(a, b, None)   # None where the chain must decide (the worker is off, asleep or paused)
    >>> out is None or float(out[0, 0]) == 1000.0
    True
"""
from __future__ import annotations

import sys
from operator import attrgetter
from typing import Any, Callable

import numpy as np

from ember import _config
from ember.backends import cpu_blas, cpu_blas_gemm, cpu_gemm_choice, cpu_hot_worker, cpu_kernels, cpu_threads

# Everything a plan depends on besides the signature (module attributes: settings, bounds, and the deciding
# functions themselves, so a replaced one makes the plans again).
_CONFIG = attrgetter("GEMM", "HOT_WORKER", "CPU_KERNELS", "CPU_THREADS", "BLAS_SPLIT")
_SPLIT = attrgetter("split_gemm", "num_threads", "SPLIT_MACS", "_hot_split", "_kind")
_HOT = attrgetter("worth_it", "ready", "split_gemm_into", "run_split", "cut", "MIN_MACS", "MIN_SPLIT",
                  "SMALL_KERNEL_MACS")
_CHOICE = attrgetter("use_ember", "kernel_in_use", "MIN_MACS", "MIN_MACS_SPLIT")
_BLAS = attrgetter("owns_gemm_threads", "_controls")
_THREADS = attrgetter("num_threads", "_CPUS")


def _deciders() -> tuple:
    return _SPLIT(cpu_blas_gemm), _HOT(cpu_hot_worker), _CHOICE(cpu_gemm_choice), _BLAS(cpu_blas), _THREADS(cpu_threads)


# The deciding functions and bounds as imported: where one was replaced (a test's spy, a patched bound), the chain
# runs every product so that what replaced it is asked.
_ORIGINAL = _deciders()
_PLANS: dict = {}  # signature -> (stamp, plan or None)
MAX_PLANS = 512  # forgotten all at once beyond this (a program with ever-changing shapes)


def _stamp(native_kernel: Callable | None) -> tuple:
    return (_CONFIG(_config), _SPLIT(cpu_blas_gemm), _HOT(cpu_hot_worker), _CHOICE(cpu_gemm_choice),
            _BLAS(cpu_blas), _THREADS(cpu_threads), cpu_kernels._KERNELS, native_kernel)


def _kernel_takes(a: Any, b: Any, native_kernel: Callable | None) -> bool:
    """Whether ``linalg.gemm_2d`` may hand ``a @ b`` to ember's own kernel (then the chain runs)."""
    m, k = a.shape
    n = b.shape[1]
    if native_kernel is None or m * k * n < cpu_gemm_choice.MIN_MACS:
        return False
    kernel = native_kernel(np, "matmul_f32")
    if kernel is None or a.dtype != np.float32:
        return False
    module = sys.modules.get("ember.backends.cpu_gemm_kernels")
    if module is None or kernel is not module.matmul:
        return True  # a kernel this plan does not know: let the chain ask it
    threads = module.num_threads() if m * k * n >= module.THREADED_MACS else 1
    return cpu_gemm_choice.use_ember(m, k, n, b.strides[1] == 4 and b.strides[0] % 4 == 0, threads)


def _plan(a: Any, b: Any, native_kernel: Callable | None, bias: Any = None) -> tuple | None:
    """``(rows, columns, dtype, axis, cut, macs)`` when the chain would split ``a @ b (+ bias)`` on the hot worker
    (its answers now, asked in its order), else None."""
    m, k = a.shape
    n = b.shape[1]
    macs = m * k * n
    dtype = a.dtype
    if b.dtype != dtype or dtype.char not in "fd" or not dtype.isnative or _deciders() != _ORIGINAL \
            or _kernel_takes(a, b, native_kernel) or cpu_blas_gemm._kind(a, b, bias) is None \
            or (bias is not None and (bias.__class__ is not np.ndarray or bias.shape != (n,))):
        return None
    threads = cpu_blas_gemm.num_threads()
    if threads <= 1 or not cpu_blas.owns_gemm_threads() or not (macs < cpu_blas_gemm.SPLIT_MACS or threads == 2) \
            or not cpu_hot_worker.worth_it(m, k, n, None):
        return None
    axis = 0 if m >= n else 1
    total = m if axis == 0 else n
    c0 = cpu_hot_worker.cut(total)
    if min(c0, total - c0) * k * (n if axis == 0 else m) <= cpu_hot_worker.SMALL_KERNEL_MACS:
        return None
    return m, n, dtype, axis, c0, macs


def matmul_2d(a: Any, b: Any, native_kernel: Callable | None, bias: Any = None) -> Any:
    """``a @ b`` (``+ bias``, a row of b's columns added as ``cpu_blas_gemm.split_gemm`` adds it: the output starts as
    the bias and the GEMM adds into it) of 2-D NumPy arrays, split on the hot worker when the chain
    (``linalg._matmul_impl``, ``nn_ops._linear_gemm``) would split it so now; None otherwise, nothing computed (then
    run the chain). ``native_kernel``: ``linalg``'s look-up of ember's kernels (its GEMM may take the product first)."""
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray or getattr(cpu_threads._LOCAL, "inside", False):
        return None
    key = (a.shape, b.shape, a.strides, b.strides, a.dtype, b.dtype,
           None if bias is None else (bias.__class__, bias.shape, bias.dtype))
    stamp = _stamp(native_kernel)
    entry = _PLANS.get(key)
    if entry is None or entry[0] != stamp:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        entry = _PLANS[key] = (stamp, _plan(a, b, native_kernel, bias))
    plan = entry[1]
    if plan is None:
        return None
    m, n, dtype, axis, c0, macs = plan
    worker = cpu_hot_worker._STATE["worker"]
    if worker is None or not cpu_hot_worker._ready(worker, macs):
        return None
    out = np.empty((m, n), dtype)
    if bias is None:
        return out if cpu_hot_worker.run_split(worker, a, b, out, 0, axis, c0) else None
    np.copyto(out, bias)
    return out if cpu_hot_worker.run_split(worker, a, b, out, 1, axis, c0) else None


def _plan_into(a: Any, b: Any, out: Any) -> tuple | None:
    """``(axis, cut, macs)`` when ``split_gemm_into(a, b, out)`` would split (its checks and ``worth_it``'s), ``()``
    where it would not, None where a decider was replaced (then ask it)."""
    if _deciders() != _ORIGINAL:
        return None
    dtype = out.dtype
    if a.dtype != dtype or b.dtype != dtype or dtype.char not in "fd" or not dtype.isnative \
            or not out.flags.c_contiguous or out.__class__ is not np.ndarray:
        return ()
    m, k = a.shape
    n = b.shape[1]
    if out.shape != (m, n) or not cpu_hot_worker.worth_it(m, k, n, None):
        return ()
    axis = 0 if m >= n else 1
    total = m if axis == 0 else n
    c0 = cpu_hot_worker.cut(total)
    if min(c0, total - c0) * k * (n if axis == 0 else m) <= cpu_hot_worker.SMALL_KERNEL_MACS:
        return ()
    return axis, c0, m * k * n


def plan_into(a: Any, b: Any, out: Any) -> tuple | None:
    """The plan of ``split_gemm_into(a, b, out, beta)`` (``out = a @ b (+ out)`` split on the hot worker) when
    ``cpu_hot_worker.worth_it`` and its checks accept these operands now (made once per signature; run it with
    :func:`run_into`), ``()`` where they decline, None where the caller must ask them (a decider was replaced)."""
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray or getattr(cpu_threads._LOCAL, "inside", False):
        return ()
    key = (a.shape, b.shape, a.strides, b.strides, a.dtype, b.dtype, out.shape, out.strides, out.dtype)
    stamp = _stamp(None)
    entry = _PLANS.get(key)
    if entry is None or entry[0] != stamp:
        if len(_PLANS) >= MAX_PLANS:
            _PLANS.clear()
        entry = _PLANS[key] = (stamp, _plan_into(a, b, out))
    return entry[1] if out.flags.c_contiguous else ()


def run_into(plan: tuple, a: Any, b: Any, out: Any, beta: int) -> bool:
    """Run :func:`plan_into`'s plan: True when done, False with nothing computed (the worker is asleep, paused or
    busy: ``split_gemm_into``'s answers)."""
    axis, c0, macs = plan
    worker = cpu_hot_worker._STATE["worker"] or cpu_hot_worker._worker()
    if worker is None or not cpu_hot_worker._ready(worker, macs):
        return False
    return cpu_hot_worker.run_split(worker, a, b, out, beta, axis, c0)
