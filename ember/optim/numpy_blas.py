"""``y = alpha * x + beta * y`` in one pass over memory, for the NumPy-only optimizer steps.

NumPy has no scaled add: ``y *= beta; t = alpha * x; y += t`` is three passes (and a scratch array), where
OpenBLAS's ``?axpby`` (and ``?axpy`` for ``beta = 1``) is one. NumPy's wheels ship OpenBLAS, which exports
both; they are found with ``ctypes`` in the OpenBLAS NumPy loaded (as :mod:`ember.backends.cpu_blas` finds
it) and used after a self-test on this machine (``blas_ok``: every length 1-67, unaligned, against a float64
reference within 1 ulp). Elsewhere (another BLAS, ``EMBER_OPTIM_BLAS=0``) the three NumPy passes run.

The caller holds OpenBLAS to one thread (``cpu_blas.single_threaded_blas``) and passes 1-D contiguous pieces.
Rounding: BLAS may or may not fuse the multiply-add; the NumPy-only optimizer steps do not promise torch's
bits (docs/cpu-performance.md, "adam20").

Example:
    >>> import numpy as np
    >>> x, y = np.ones(4, np.float32), np.full(4, 2.0, np.float32)
    >>> axpby(0.5, x, 0.25, y, np.empty(4, np.float32)); y.tolist()   # no addresses: NumPy's three passes
    [1.0, 1.0, 1.0, 1.0]
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from ember.backends import cpu_blas

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}
_REAL = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


def _find() -> dict:
    """{dtype: (axpby, axpy)} from NumPy's OpenBLAS (64-bit-integer names first), or {}."""
    located = cpu_blas.openblas_cblas("saxpby", "saxpy", "daxpby", "daxpy")
    if located is None:
        return {}
    (sby, spy, dby, dpy), integer = located
    found = {}
    for dtype, by, py in ((np.dtype(np.float32), sby, spy), (np.dtype(np.float64), dby, dpy)):
        real = _REAL[dtype]
        by.restype, py.restype = None, None
        by.argtypes = [integer, real, ctypes.c_void_p, integer, real, ctypes.c_void_p, integer]
        py.argtypes = [integer, real, ctypes.c_void_p, integer, ctypes.c_void_p, integer]
        found[dtype] = (by, py)
    return found


def _self_test(functions: dict) -> bool:
    """Each function against float64 arithmetic on every length 1-67 (the vector loops' tails), unaligned."""
    rng = np.random.default_rng(0)
    for dtype, (by, py) in functions.items():
        for n in range(1, 68):
            x = rng.standard_normal(n + 1).astype(dtype)[1:]  # one element in: unaligned
            y = rng.standard_normal(n + 1).astype(dtype)[1:]
            alpha, beta = dtype.type(0.3), dtype.type(-0.7)
            want_by = alpha.astype(np.float64) * x + beta.astype(np.float64) * y
            want_py = alpha.astype(np.float64) * x + y
            got_by, got_py = y.copy(), y.copy()
            with cpu_blas.single_threaded_blas():
                by(n, float(alpha), x.ctypes.data, 1, float(beta), got_by.ctypes.data, 1)
                py(n, float(alpha), x.ctypes.data, 1, got_py.ctypes.data, 1)
            for got, want in ((got_by, want_by), (got_py, want_py)):
                # two roundings at most (products, then the sum): within 2 ulp of the result plus the products'
                bound = 2 * np.spacing(np.abs(want).astype(dtype)).astype(np.float64) + np.spacing(
                    (np.abs(alpha * x) + np.abs(y)).astype(dtype)).astype(np.float64)
                if not np.all(np.abs(got.astype(np.float64) - want) <= bound):
                    return False
    return True


def blas_ok() -> dict:
    """{dtype: (axpby, axpy)} when the BLAS route passed its self-test here, else {} (found once)."""
    found = _STATE.get("blas")
    if found is None:
        with _LOCK:
            found = _STATE.get("blas")
            if found is None:
                found = {}
                if os.environ.get("EMBER_OPTIM_BLAS", "1").lower() not in ("0", "off", "none"):
                    candidates = _find()
                    if candidates and _self_test(candidates):
                        found = candidates
                _STATE["blas"] = found
    return found


def axpby(alpha: float, x: np.ndarray, beta: float, y: np.ndarray, scratch: np.ndarray,
          addresses: tuple[int, int] | None = None) -> None:
    """``y = alpha * x + beta * y`` in place on 1-D contiguous pieces of one dtype and length; ``scratch`` (same
    length, may be ``x`` itself) is used by the NumPy route. ``addresses``: ``(x, y)`` data addresses, which the
    BLAS route needs (``ndarray.ctypes.data`` costs ~1-5 us, so callers compute them once per parameter); without
    them (or with a None in them: small arrays, where a ctypes call costs more than two passes) NumPy's passes run.

    BLAS skips work for a zero ``alpha`` or ``beta`` (``0 * nan`` would not be nan), so zeros take the NumPy route.
    """
    functions = _STATE.get("blas")
    if functions is None:
        functions = blas_ok()
    pair = functions.get(y.dtype)
    if pair is not None and alpha != 0 and beta != 0 and addresses is not None and None not in addresses:
        xa, ya = addresses
        if beta == 1:
            pair[1](y.size, alpha, xa, 1, ya, 1)
        else:
            pair[0](y.size, alpha, xa, 1, beta, ya, 1)
        return
    if beta != 1:
        np.multiply(y, beta, out=y)
    np.multiply(x, alpha, out=scratch)
    np.add(y, scratch, out=y)
