"""The C library's ``log1p``/``log``/``exp``/``tan`` over float64 arrays in vectorized NumPy, bit for bit.

PyTorch's float64 samplers call glibc per element; ``ember/mt_random/libm.py`` needs the same bits without
Numba, where a Python call per element (``np.frompyfunc``) was the NumPy-only install's cliff. Two methods:

- ``log1p``: glibc's ``log1p`` (x86-64, no FMA variant up to 2.39 at least) is fdlibm's algorithm in plain
  double arithmetic, so the same sequence of roundings in NumPy gives the same bits (``log1p_fdlibm``).
- ``log``/``exp``/``tan``: glibc's are nearly correctly rounded (documented: ``log`` within 0.519 ulp,
  ``exp`` within 0.511 ulp; ``tan`` measured within 0.567 ulp on the samplers' range). So
  where the exact value lies more than ``MARGINS`` ulp away from a rounding midpoint, glibc returns the
  correctly rounded double. That double comes from the 64-bit ``long double`` function (glibc's ``logl``
  etc., ~2^-63 relative, NumPy's ``longdouble`` ufuncs: a C loop), rounded once; the elements near a
  midpoint (~2 * MARGINS of them) are marked for the caller to compute with the C function itself
  (``near_correct``).

Neither method is trusted blindly: ``libm.py`` compares each with the C function once per process
(``self_check``) on values across the range and near hard cases, and uses it only when they agree everywhere
(other C libraries, or platforms whose ``long double`` is a double, keep the per-element path).

Example:
    >>> import math
    >>> float(log1p_fdlibm(np.array([-0.5]))[0]) == math.log1p(-0.5)
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.mt_random import libm_dd
from ember.ops import fma_fast
from ember.ops.fma import fma_arrays

# A midpoint is "near" when the exact value is within this many ulp of it: more than glibc's excess over half an
# ulp (documented: 0.019 for log, 0.011 for exp; measured on 21M values here: 0.019, 0.007, and 0.066 for tan,
# which documents none) plus the long double function's error (~2^-11 ulp).
MARGINS = {"exp": 1.0 / 32, "log": 1.0 / 24, "tan": 1.0 / 8}
TAN_LIMIT = 1.6  # |x| beyond this: tan's zeros at k pi, where the long double tan is not relatively accurate
BLOCK = 1 << 14  # elements per piece: the ~20 temporaries stay in the L2 cache

_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that k * _LN2_HI is exact for |k| < 2000 (fdlibm's)
_LN2_LO = 1.90821492927058770002e-10
# fdlibm's minimax coefficients of R(z) in log(1+f) = 2s + s*R, s = f/(2+f), z = s*s
_LP = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, 2.222219843214978396e-01,
       1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01)


def _high_words(x: np.ndarray) -> np.ndarray:
    """The upper 32 bits of each double as signed int32 (fdlibm's ``GET_HIGH_WORD``), little-endian."""
    return x.view(np.int32)[1::2].copy()


def log1p_fdlibm(x: np.ndarray, fused: bool = False) -> np.ndarray:
    """``log1p`` of float64 values in fdlibm's (so glibc's) order of operations, any shape. ``fused``: glibc's
    x86-64 FMA build (chosen at load time on CPUs with FMA and AVX2), where the compiler contracted the
    polynomial's and the correction's multiply-adds into fmas (read off its machine code)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    flat, out = x.reshape(-1), np.empty(x.size)
    for start in range(0, flat.size, BLOCK):
        out[start:start + BLOCK] = _log1p_block(flat[start:start + BLOCK], fused)
    return out.reshape(x.shape)


def _fused(a: np.ndarray, b: Any, c: Any, own: bool = False) -> np.ndarray:
    """fma(a, b, c) for a block: BLAS axpy when ``b`` is a number, NumPy's fused complex multiply otherwise
    (ember/ops/fma_fast.py, each verified once per process), ``fma_arrays``' exact emulation without them."""
    if np.ndim(b) == 0:
        y = np.full(a.shape, c) if np.ndim(c) == 0 else c if own else c.copy()
        if fma_fast.axpy_into(b, a, y):
            return y
    else:
        out = np.empty_like(a)
        if fma_fast.complex_fma_into(a, b, c, out, quiet=True):
            return out
    return fma_arrays(np, a, b, c)


def _log1p_block(x: np.ndarray, fused: bool) -> np.ndarray:
    def mad(a, b, c, own=False):  # a * b + c as the build computes it (own: c is a temporary to write over)
        return _fused(a, b, c, own) if fused else a * b + c

    # (branches are blended arithmetically: np.where and masked copies on random masks cost 5-10 products)
    hx = _high_words(x)
    with np.errstate(all="ignore"):
        # 1 + x = 2^k (1 + f) with sqrt(2)/2 <= 1 + f < sqrt(2)
        u = 1.0 + x
        big = hx >= 0x43400000  # x >= 2**53: 1 + x would round to x
        if big.any():
            u[big] = x[big]
        # c: the rounding error of u = 1 + x (fdlibm's two formulas are both this exact error), over u
        back = u - x
        c = 1.0 - back
        c += x - (u - back)
        c /= u
        if big.any():
            c[big] = 0.0
        hu = _high_words(u)
        k = (hu >> 20) - 1023
        hu &= np.int32(0x000FFFFF)
        up = (hu >= 0x6A09E).view(np.int8)  # normalize u into [sqrt(2)/2, sqrt(2)): u/2 above
        k += up
        u.view(np.int32)[1::2] = hu | (np.int32(0x3FF00000) - up * np.int32(0x00100000))
        hu += up * (((np.int32(0x00100000) - hu) >> 2) - hu)
        # -0.2929 < x < 0.41422: no reduction (k = 0, f = x); 0xbfd2bec3 as int32 is -1076707645
        direct = ((hx < 0x3FDA827A) & ((hx > 0) | (hx <= np.int32(-1076707645)))).view(np.int8)
        keep = 1 - direct
        f = u - 1.0
        f *= keep
        f += x * direct
        k *= keep
        hu *= keep
        hu += direct
        c *= k != 0  # with c = 0 the k != 0 formula gives the k = 0 one's bits
        kd = k.astype(np.float64)  # k * _LN2_HI is exact: a plain product equals the fused one
        hfsq = 0.5 * f
        hfsq *= f
        s = 2.0 + f
        np.divide(f, s, out=s)
        z = s * s
        z2 = z * z
        z4 = z2 * z2
        r = mad(z, _LP[0], z2 * mad(z, _LP[2], _LP[1]), own=True)
        r = mad(z4, mad(z, _LP[4], _LP[3]), r)
        z4 *= z2
        r = mad(z4, mad(z, _LP[6], _LP[5]), r)
        # k ln2_hi - ((hfsq - (s (hfsq + R) + (k ln2_lo + c))) - f)
        r += hfsq
        r *= s
        r += mad(kd, _LN2_LO, c)
        np.subtract(hfsq, r, out=r)
        r -= f
        out = kd * _LN2_HI
        out -= r
        tiny_f = hu == 0  # |f| < 2**-20: a short series
        if tiny_f.any():
            ft, kt = f[tiny_f], kd[tiny_f]
            rt = mad(-ft, 0.66666666666666666, 1.0) * hfsq[tiny_f]
            low = mad(kt, _LN2_LO, c[tiny_f])
            short = np.where(kt == 0, ft - rt, kt * _LN2_HI - ((rt - low) - ft))
            exact_f = ft == 0.0  # 1 + x is a power of two: k ln 2 (plus the correction)
            short[exact_f] = np.where(kt[exact_f] == 0, 0.0, kt[exact_f] * _LN2_HI + low[exact_f])
            out[tiny_f] = short
        ax = hx & np.int32(0x7FFFFFFF)
        small = ax < 0x3E200000  # |x| < 2**-29
        if small.any():
            xs = x[small]
            out[small] = np.where(ax[small] < 0x3C900000, xs, mad(-(xs * xs), 0.5, xs))
        edge = (ax >= 0x3FF00000) & (hx < 0) | (hx >= 0x7FF00000)  # x <= -1, inf, nan: NumPy's special values
        if edge.any():
            out[edge] = np.log1p(x[edge])
    return out


def near_correct(name: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the correctly rounded float64 ``name`` of each element of ``x``, where it may not be glibc's).

    ``name`` is ``log``, ``exp`` or ``tan``; the second array is True where the exact value lies within
    ``MARGINS[name]`` ulp of a midpoint, where the result is subnormal, zero or not finite, and for ``tan``
    where ``|x| > TAN_LIMIT``: there the caller asks the C function. ``exp``/``log``: ``libm_dd``; ``tan``: the
    long double ``tanl``, on ``pi/2 - |x|`` above ``pi/4`` (tan x = 1 / tan(pi/2 - x): tanl is 3x faster
    below pi/4)."""
    if name == "exp":
        return libm_dd.exp_near(x, MARGINS[name])
    if name == "log":
        return libm_dd.log_near(x, MARGINS[name])
    x = np.ascontiguousarray(x, dtype=np.float64)
    flat = x.reshape(-1)
    values, unsure = np.empty(flat.size), np.empty(flat.size, dtype=bool)
    for start in range(0, flat.size, BLOCK):
        values[start:start + BLOCK], unsure[start:start + BLOCK] = _tan_block(flat[start:start + BLOCK])
    return values.reshape(x.shape), unsure.reshape(x.shape)


_PIO2_HI = 1.5707963267948966  # pi/2 rounded to a double; the rest as a long double
_PIO2_LO = np.longdouble("6.1232339957367658861303296613750053e-17")


def _tan_block(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.abs(x)
    w = a.astype(np.longdouble)
    with np.errstate(all="ignore"):
        far = np.flatnonzero(a > 0.7853981633974483)
        b = (_PIO2_HI - a[far]).astype(np.longdouble)  # exact: Sterbenz
        b += _PIO2_LO  # pi/2 - |x| with a relative error of 2^-64 (|x| < pi/2; beyond, marked doubtful)
        np.tan(b, out=b)
        np.divide(1.0, b, out=b)
        w[far] = 0.0  # (tanl of the rest only: it is 3x slower above pi/4)
        np.tan(w, out=w)
        w[far] = b
        hi = w.astype(np.float64)  # rounded once
        np.copysign(hi, x, out=hi)
    # where the long double sits within its double's ulp: its 11 mantissa bits below the double's 53
    position = w.view(np.int64)[::w.itemsize // 8] & 0x7FF
    position -= 1024
    np.abs(position, out=position)
    doubtful = position <= int(MARGINS["tan"] * 2048)
    doubtful |= ~(np.abs(hi) >= 2.2250738585072014e-308)  # subnormal, 0, nan
    doubtful |= np.isinf(hi)
    doubtful |= ~(a <= TAN_LIMIT)  # tanl loses relative accuracy near the zeros k pi, k != 0
    doubtful |= a >= _PIO2_HI  # pi/2 - |x| would not be computed accurately above pi/2
    return hi, doubtful


def usable() -> bool:
    """Whether ``long double`` is x86's 80-bit format (64-bit mantissa, little-endian, 16 bytes): elsewhere (a
    64-bit or a 128-bit one) the ``tan`` route is not used."""
    info = np.finfo(np.longdouble)
    return info.nmant == 63 and np.dtype(np.longdouble).itemsize == 16 and np.little_endian
