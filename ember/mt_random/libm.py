"""The C library's ``log``/``log1p``/``sin``/``cos``/``tan``/``exp`` on float64 arrays, bit for bit.

PyTorch's double-precision samplers call these per element (``normal_fill_16`` for float64 ``randn``,
``exponential_``'s ``log1p``, ``cauchy_``'s ``tan``, ``log_normal_``'s ``exp``), so their last bits are the
C library's. NumPy's float64 ``log``/``log1p``/``exp``/``tan`` are its own SIMD code and differ from glibc in
0.3-7% of values (``sin``/``cos`` already call the C library). Two ways to call the C library over an array:
Numba (when installed: ``math.log`` in a compiled loop is the C library's ``log``; one compile per function
per process, used from ``NUMBA_MIN`` elements) and otherwise ``np.frompyfunc`` over Python's ``math``
functions (a C loop calling the C function through Python's call protocol, ~0.1 us per element; no Python
bytecode per element, but 16x Numba's time: float64 ``randn`` without Numba is the one cliff left that
``tests/ops/test_optional_extras_no_cliff.py`` knows of). ``sin``/``cos`` take NumPy's own where a one-time
check finds them equal to the C library's.

Example:
    >>> import math
    >>> float(log1p(np.array([-0.5]))[0]) == math.log1p(-0.5)
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ember import _config

NUMBA_MIN = 1 << 15  # below this, frompyfunc's per-call cost is less than a first compile would take
_NAMES = ("log", "log1p", "sin", "cos", "tan", "exp")
_UFUNCS = {name: np.frompyfunc(getattr(math, name), 1, 1) for name in _NAMES}
_COMPILED: dict[str, Any] = {}


def _numpy_is_libm(name: str) -> bool:
    """Whether NumPy's float64 ``name`` gives the C library's bits here (its ``sin``/``cos`` call the C
    library in common builds; an SIMD build would not): checked once against ``math`` on 4096 values over
    a wide range, and used then without Numba (a C loop instead of a Python call per element)."""
    if name not in _NUMPY_IS_LIBM:
        x = np.random.default_rng(7).standard_normal(4096) * np.exp2(np.random.default_rng(8).integers(-30, 30, 4096))
        with np.errstate(all="ignore"):
            mine = getattr(np, name)(x)
        _NUMPY_IS_LIBM[name] = bool(np.array_equal(mine, _UFUNCS[name](x).astype(np.float64)))
    return _NUMPY_IS_LIBM[name]


_NUMPY_IS_LIBM: dict[str, bool] = {}


def _compiled(name: str) -> Callable | None:
    """A Numba loop calling the C function (None without Numba, or with ``EMBER_CPU_KERNELS=numpy``)."""
    if _config.CPU_KERNELS != "numba":
        return None
    if name in _COMPILED:
        return _COMPILED[name]
    try:
        import numba
    except ImportError:
        _COMPILED[name] = None
        return None
    fn = getattr(math, name)

    def loop(x: np.ndarray, out: np.ndarray) -> None:
        for i in range(x.size):
            out[i] = fn(x[i])

    _COMPILED[name] = numba.njit(nogil=True)(loop)
    return _COMPILED[name]


def _apply(name: str, x: Any) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.size >= NUMBA_MIN:
        if name in ("sin", "cos") and _numpy_is_libm(name):
            return getattr(np, name)(x)
        loop = _compiled(name)
        if loop is not None:
            out = np.empty_like(x)
            loop(x.reshape(-1), out.reshape(-1))
            return out
    if x.size == 0:
        return np.empty_like(x)
    return _UFUNCS[name](x).astype(np.float64)


def log(x: Any) -> np.ndarray:
    """The C library's natural log (``math.log`` raises at 0; this gives -inf, as C's ``log``)."""
    x = np.asarray(x, dtype=np.float64)
    positive = x > 0
    if positive.all():
        return _apply("log", x)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(x)  # 0, negatives, nan: C's special values (-inf, nan)
    out[positive] = _apply("log", x[positive])
    return out


def log1p(x: Any) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    ok = x > -1
    if ok.all():
        return _apply("log1p", x)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log1p(x)
    out[ok] = _apply("log1p", x[ok])
    return out


def sin(x: Any) -> np.ndarray:
    return _finite_only("sin", x)


def cos(x: Any) -> np.ndarray:
    return _finite_only("cos", x)


def tan(x: Any) -> np.ndarray:
    return _finite_only("tan", x)


def exp(x: Any) -> np.ndarray:
    """The C library's exp (``math.exp`` raises on overflow; this gives inf as C's)."""
    x = np.asarray(x, dtype=np.float64)
    ok = x < 709.0  # no overflow (or nan) inside math.exp; underflow gives 0 there, as C
    if ok.all():
        return _apply("exp", x)
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.exp(x)
    out[ok] = _apply("exp", x[ok])
    return out


def _finite_only(name: str, x: Any) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    ok = np.isfinite(x)
    if ok.all():
        return _apply(name, x)
    with np.errstate(invalid="ignore"):
        out = getattr(np, name)(x)
    out[ok] = _apply(name, x[ok])
    return out
