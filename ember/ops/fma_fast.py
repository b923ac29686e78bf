"""One-pass exact fused multiply-adds on NumPy arrays, from code NumPy already ships.

NumPy has no fma ufunc, and the exact float64 method of :mod:`ember.ops.fma` takes ~8 sweeps (3.5x a
native loop). Two routes give the single rounding in one sweep; each is used only after it passed a
self-test on this machine (its outcome depends on the CPU and on how NumPy and its BLAS were built):

* **BLAS axpy** (``y += alpha * x``, a scalar ``alpha``): OpenBLAS's saxpy/daxpy kernels for x86-64 since
  Haswell and for ARMv8 are written with fused multiply-add instructions. Found with ``ctypes`` in the
  OpenBLAS NumPy loaded (as :mod:`ember.backends.cpu_blas` finds it); called on pieces of at most
  ``_AXPY_PIECE`` elements, below OpenBLAS's threading threshold, so it never wakes BLAS threads.
* **complex multiply**: NumPy's SIMD loop for complex ``multiply`` computes the real part as
  ``fma(x.re, y.re, -(x.im * y.im))`` (one ``fmaddsub``) on x86-64-v3/AVX-512 and aarch64. With
  ``x = a + c i`` and ``y = b - i``, ``x.im * y.im = -c`` exactly, so the real part is ``fma(a, b, c)``.
  Three interleaving copies and one extraction around one complex multiply: ~2x faster than the
  float64 method in cache.

The self-test (``verified``) compares each route with :func:`ember.ops.fma_exact._fma32` (exact: round-to-odd,
proved) or exact rationals for float64, on values where two roundings differ, at every length from 1
to 67 (the vector loops' tails) and unaligned, with zeros of both signs, infinities, NaN, subnormals
and overflow; bitwise. ``EMBER_FMA_ROUTES=none`` turns both routes off.

Example:
    >>> import numpy as np
    >>> a, b, c = np.float32([1 + 2**-12] * 3), np.float32([1 - 2**-12] * 3), np.float32([-1] * 3)
    >>> out = np.empty(3, np.float32)
    >>> bool(complex_fma_into(a, b, c, out)) in (True, False)   # False where the route failed its test
    True
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from fractions import Fraction
from typing import Any

import numpy as np

from ember.backends import cpu_blas
from ember.ops.fma_exact import _fma32, _fma64

_LITTLE = sys.byteorder == "little"
_AXPY_PIECE = 8192  # OpenBLAS runs ?axpy on one thread up to 10000 elements
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128}
_LOCK = threading.Lock()
_STATE: dict[Any, Any] = {}  # route name / (route, dtype) -> found function / verdict


def _enabled() -> bool:
    return os.environ.get("EMBER_FMA_ROUTES", "").lower() not in ("none", "off", "0")


# ---- BLAS axpy ----------------------------------------------------------------------------------------
def _axpy_functions() -> dict:
    """{float32: saxpy, float64: daxpy} from NumPy's OpenBLAS (ILP64 names first), or {}."""
    if "axpy" not in _STATE:
        found: dict = {}
        located = cpu_blas.openblas_cblas("saxpy", "daxpy")
        if located is not None:
            functions, integer = located
            for fn, dtype, real in zip(functions, (np.float32, np.float64), (ctypes.c_float, ctypes.c_double)):
                fn.restype = None
                fn.argtypes = [integer, real, ctypes.c_void_p, integer, ctypes.c_void_p, integer]
                found[np.dtype(dtype)] = fn
        _STATE["axpy"] = found
    return _STATE["axpy"]


def axpy_addresses(alpha: float, n: int, px: int, py: int, dtype: np.dtype) -> None:
    """``y += alpha * x`` on n contiguous elements at addresses ``px``, ``py`` (the caller verified the route;
    ``alpha != 0``). For callers that know the addresses: ``ndarray.ctypes.data`` costs ~1-5 us."""
    fn = _STATE["axpy"][dtype]
    step = dtype.itemsize
    for start in range(0, n, _AXPY_PIECE):
        fn(min(_AXPY_PIECE, n - start), alpha, px + start * step, 1, py + start * step, 1)


def _axpy_raw(alpha: float, x: np.ndarray, y: np.ndarray) -> None:
    axpy_addresses(alpha, y.size, x.ctypes.data, y.ctypes.data, y.dtype)


def axpy_into(alpha: Any, x: np.ndarray, y: np.ndarray) -> bool:
    """``y += alpha * x`` rounded once per element, in place, for C-contiguous float32/float64 arrays of one
    shape and dtype and a number ``alpha`` taken in that dtype. False (nothing done) when the route is not
    available here or the arrays do not fit it.

    Example: axpy_into(0.1, x, y)  # y = fma(0.1f, x, y) elementwise
    """
    dtype = y.dtype
    if not (dtype in _COMPLEX and x.dtype == dtype and x.shape == y.shape and x.flags.c_contiguous
            and y.flags.c_contiguous and y.flags.writeable and verified("axpy", dtype)):
        return False
    alpha = float(dtype.type(alpha))
    if alpha == 0.0:  # BLAS skips the update for alpha = 0; fma(0, x, y) is y + (+-0 or NaN): exact in two steps
        y += alpha * x
    elif y.size:
        _axpy_raw(alpha, x, y)
    return True


# ---- complex multiply -----------------------------------------------------------------------------------
_SCRATCH = threading.local()  # per thread: {dtype: (x, y)}, y's imaginary parts kept at -1


def _scratch(dtype: np.dtype, n: int) -> tuple:
    pairs = getattr(_SCRATCH, "pairs", None)
    if pairs is None:
        pairs = _SCRATCH.pairs = {}
    pair = pairs.get(dtype)
    if pair is None or pair[0].size < n:
        size = max(n, 1 << 14)
        x, y = np.zeros(size, _COMPLEX[dtype]), np.zeros(size, _COMPLEX[dtype])
        y.imag = -1
        pair = pairs[dtype] = (x, y)
    return pair


def _complex_raw(a: Any, b: Any, c: Any, out: np.ndarray) -> None:
    """out = Re((a + c i) (b - i)) on 1-D pieces (a, b, c arrays of out's length or scalars)."""
    n = out.size
    x, y = _scratch(out.dtype, n)
    # NumPy multiplies a single element outside its vector loop (two roundings): take two (the second,
    # whatever the scratch holds, is ignored)
    x, y = x[:max(n, 2)], y[:max(n, 2)]
    xf, yf = x.view(out.dtype)[:2 * n], y.view(out.dtype)[:2 * n]
    xf[0::2], xf[1::2] = a, c
    yf[0::2] = b
    np.multiply(x, y, out=x)
    real_parts(x[:n], out)


def real_parts(x: np.ndarray, out: np.ndarray) -> None:
    """out = x.real for a contiguous complex64/complex128 ``x``: for complex64 on a little-endian machine one
    contiguous uint64 -> uint32 cast (the low half of each element is its real part; 2.5x faster than the
    strided copy), else the strided copy."""
    if x.dtype == np.complex64 and _LITTLE:
        np.copyto(out.view(np.uint32), x.view(np.uint64), casting="unsafe")
    else:
        np.copyto(out, x.view(out.dtype)[0::2])


def complex_fma_into(a: Any, b: Any, c: Any, out: np.ndarray, quiet: bool = False) -> bool:
    """``out = fma(a, b, c)`` for a 1-D C-contiguous float32/float64 ``out`` and operands of its dtype and
    length (or 0-d/numbers); ``out`` may be one of them. False (nothing done) when the route is not
    available here. ``quiet``: the caller already ignores floating-point warnings (the imaginary part
    computes ``b * c``, which may overflow where the result does not).

    Example: complex_fma_into(a, b, c, out)  # out = fma(a, b, c), one rounding
    """
    dtype = out.dtype
    if not (dtype in _COMPLEX and out.ndim == 1 and out.flags.c_contiguous and verified("complex", dtype)):
        return False
    if quiet:
        _complex_raw(a, b, c, out)
    else:
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            _complex_raw(a, b, c, out)
    return True


# ---- one piece, either route ------------------------------------------------------------------------------
def fma_into(a: Any, b: Any, c: Any, out: np.ndarray) -> bool:
    """``out = fma(a, b, c)`` on one piece: ``out`` 1-D C-contiguous float32/float64, each operand a 1-D
    contiguous array of its length and dtype or 0-d; ``out`` may be ``c`` (in place) or another operand.
    The axpy route when ``a`` or ``b`` is 0-d, else the complex one; False (nothing done) when the route
    needed is not verified here. The caller ignores floating-point warnings (see ``complex_fma_into``).

    Example: fma_into(np.float32(0.1), d, m, m)  # m = fma(0.1f, d, m): one BLAS axpy
    """
    dtype = out.dtype
    scalar = a if a.ndim == 0 else b if b.ndim == 0 else None
    if scalar is not None and (a.ndim or b.ndim) and verified("axpy", dtype):
        x = b if scalar is a else a
        alpha = float(scalar)
        if alpha == 0.0:
            np.add(c, alpha * x, out=out)  # exact: +-0 or NaN added (see axpy_into)
            return True
        if c is not out and not (c.ndim and c.ctypes.data == out.ctypes.data):
            if np.may_share_memory(x, out):  # the result goes over the vector operand: keep a copy of it
                x = x.copy()
            np.copyto(out, c)
        _axpy_raw(alpha, x, out)
        return True
    if out.size and verified("complex", dtype):
        _complex_raw(a, b, c, out)
        return True
    return False


# ---- self-test ------------------------------------------------------------------------------------------
def _cases(dtype: np.dtype) -> tuple:
    """(a, b, c, first special): random scales, products that land exactly on a rounding midpoint with a tiny
    c (where two roundings differ), cancellation, then every combination of special values (zeros of both
    signs, inf, NaN, the smallest normal and subnormal, overflow)."""
    rng = np.random.default_rng(20261125)
    info = np.finfo(dtype)
    bits = info.nmant + 1
    n = 600
    a = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
    b = rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))
    c = rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))
    # (1 + 2^-k)(1 + 2^-(bits-k)) = 1 + ... + 2^-bits: half a unit in the last place of 1, exactly
    mid_a, mid_b = np.full(64, 1 + 2.0 ** -(bits // 2)), np.full(64, 1 + 2.0 ** -(bits - bits // 2))
    mid_c = np.concatenate([rng.choice([-1.0, 1.0], 32) * 2.0 ** -(bits + rng.integers(2, 40, 32)),
                            -(mid_a[:32] * mid_b[:32]).astype(dtype) + rng.standard_normal(32) * 2.0 ** -bits])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, info.tiny, -info.smallest_subnormal, info.max, -1.5])
    grid = np.array(np.meshgrid(specials, specials, specials)).reshape(3, -1)
    cast = [np.concatenate(v).astype(dtype) for v in ((a, mid_a, grid[0]), (b, mid_b, grid[1]), (c, mid_c, grid[2]))]
    return (*cast, n + 64)


def _exact(a: np.ndarray, b: np.ndarray, c: np.ndarray, special: int) -> np.ndarray:
    """The correctly rounded a * b + c: float32 by the proved round-to-odd method; float64 by the proved
    Dekker + round-to-odd method before ``special`` (values within its range), from rationals after."""
    with np.errstate(all="ignore"):
        if a.dtype == np.float32:
            return _fma32(np, a, b, c)
        out = _fma64(np, a, b, c)
        for i in range(special, a.size):
            x, y, z = float(a[i]), float(b[i]), float(c[i])
            if not (np.isfinite(x) and np.isfinite(y)):
                out[i] = np.float64(x) * np.float64(y) + np.float64(z)  # an inf/NaN product: IEEE's rules
                continue
            if not np.isfinite(z):  # a finite product (even beyond the range) leaves c as it is
                out[i] = z
                continue
            value = Fraction(x) * Fraction(y) + Fraction(z)
            if value == 0:  # an exact zero: its sign as IEEE adds the signed zero product and c
                out[i] = np.float64(x) * np.float64(y) + np.float64(z)
            else:
                try:
                    out[i] = float(value)
                except OverflowError:
                    out[i] = np.copysign(np.inf, float(value > 0) - 0.5)
    return out


def _route_result(route: str, a: Any, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    if route == "axpy":
        y = c.copy()
        _axpy_raw(float(a), b, y) if float(a) != 0.0 else np.add(y, a * b, out=y)  # axpy_into's rule
        return y
    out = np.empty_like(c)
    with np.errstate(all="ignore"):
        _complex_raw(a, b, c, out)
    return out


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    """Bitwise equal, NaN payloads aside."""
    nan = np.isnan(want)
    return bool(np.array_equal(np.isnan(got), nan) and np.array_equal(got[~nan].view(np.uint8),
                                                                        want[~nan].view(np.uint8)))


def _self_test(route: str, dtype: np.dtype) -> bool:
    if route == "axpy" and not _axpy_functions():
        return False
    a, b, c, special = _cases(dtype)
    if route == "complex":
        want = _exact(a, b, c, special)
        if not _same(_route_result(route, a, b, c), want):
            return False
        for length in (*range(1, 68), 1000):  # the vector loop's tails, aligned or not
            for offset in (0, 1):
                sl = slice(offset, offset + length)
                if not _same(_route_result(route, a[sl].copy(), b[sl].copy(), c[sl].copy()), want[sl]):
                    return False
    # A scalar factor (axpy's form; the complex loop's broadcast case)
    for alpha in (a[special - 1], dtype.type(0.1), dtype.type(-3.0), a[special]):
        want = _exact(np.full(b.size, alpha, dtype), b, c, special)
        if not _same(_route_result(route, alpha, b, c), want):
            return False
        for length in (*range(1, 68), 1000):
            for offset in (0, 1):
                sl = slice(offset, offset + length)
                if not _same(_route_result(route, alpha, b[sl].copy(), c[sl].copy()), want[sl]):
                    return False
    return True


def verified(route: str, dtype: Any) -> bool:
    """Whether ``route`` ("axpy" or "complex") computes exact fmas for ``dtype`` here (tested once, cached)."""
    key = (route, np.dtype(dtype))
    verdict = _STATE.get(key)
    if verdict is None:
        with _LOCK:
            verdict = _STATE.get(key)
            if verdict is None:
                try:
                    verdict = _enabled() and _self_test(route, np.dtype(dtype))
                except Exception:  # noqa: BLE001 - any failure of a route means: do not use it
                    verdict = False
                _STATE[key] = verdict
    return verdict
