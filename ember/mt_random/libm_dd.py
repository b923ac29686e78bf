"""``exp`` and ``log`` of float64 arrays to ~2^-60 relative in vectorized NumPy, with where each lies near a
rounding midpoint: a table, a short polynomial, the leading terms carried in two doubles.

``ember/mt_random/libm_vector.py`` uses them to reproduce glibc's bits without a Python call per element: where
the exact value is not near a rounding midpoint, glibc's result (within 0.511 / 0.519 ulp) is the correctly
rounded one, which is ``hi`` here. ~40-60 NumPy passes over cache-sized blocks: 10-16 ns per element against
~45 / ~30 ns for the 64-bit ``long double`` functions.

Example:
    >>> value, near = exp_near(np.array([1.0]), 1 / 32)
    >>> float(value[0]) == 2.718281828459045 and not near[0]
    True
"""
from __future__ import annotations

import functools
from decimal import Decimal, localcontext
from typing import Callable

import numpy as np

BLOCK = 1 << 14  # elements per piece: the ~20 temporaries stay in the L2 cache
_N = 256  # exp's table: 2^(j/256), so |r| <= ln2/512 = 2^-9.5


def _split(value: Decimal) -> tuple[float, float]:
    """A 40-digit value as two doubles."""
    hi = float(value)
    return hi, float(value - Decimal(hi))


@functools.lru_cache(maxsize=1)
def _tables() -> dict:
    """Built at first use (~100 ms of decimal arithmetic, kept out of ``import ember``). exp: 2^(j/256) as two doubles. log, by the top 9 bits of m in [sqrt(2)/2, sqrt(2)) (its lowest exponent
    bit and top 8 mantissa bits): 1/c with 8 significant bits (so that m/c - 1 is exact in a double) and
    -log(1/c) as two doubles. ln 2 and ln2/256 split so that their first part times an integer is exact."""
    with localcontext() as ctx:
        ctx.prec = 45
        ln2 = Decimal(2).ln()
        exp_pairs = [_split((ln2 * j / _N).exp()) for j in range(_N)]
        invc, logc = np.ones(512), np.zeros((512, 2))
        for key in range(512):
            center = (1.0 + ((key & 0xFF) + 0.5) / 256) * (0.5 if key < 256 else 1.0)
            if 0.70 <= center <= 1.42:
                invc[key] = round(128 / center) / 128
                logc[key] = _split(-Decimal(invc[key]).ln())
        step_hi = float.fromhex("0x1.62e42fep-9")  # 28 bits: k * step_hi is exact for |k| <= 708 * 256 / ln2 < 2^18
        ln2_hi = float.fromhex("0x1.62e42fefa38p-1")  # 42 bits: e * ln2_hi is exact for |e| < 2^11
        return {"exp_hi": np.array([p[0] for p in exp_pairs]), "exp_lo": np.array([p[1] for p in exp_pairs]),
                "invc": invc, "logc_hi": logc[:, 0].copy(), "logc_lo": logc[:, 1].copy(),
                "step_hi": step_hi, "step_lo": float(ln2 / _N - Decimal(step_hi)),
                "ln2_hi": ln2_hi, "ln2_lo": float(ln2 - Decimal(ln2_hi))}


_EXP_POLY = (1 / 120, 1 / 24, 1 / 6, 0.5)  # (exp(r) - 1 - r) / r^2, |r| <= 2^-9.5: error < 2^-67
_LOG_POLY = tuple((-1.0) ** (n + 1) / n for n in range(10, 1, -1))  # (log1p(r) - r) / r^2, |r| <= 2^-7.4
_POWER = np.int64(0x7FF0000000000000)
_MANTISSA = np.int64(0x000FFFFFFFFFFFFF)


def _poly(r: np.ndarray, coefficients: tuple) -> np.ndarray:
    """r^2 * (c[-1] + c[-2] r + ... + c[0] r^(n-1)) by Horner's rule."""
    acc = r * coefficients[0]
    for c in coefficients[1:-1]:
        acc += c
        acc *= r
    acc += coefficients[-1]
    acc *= r
    acc *= r
    return acc


def _near_midpoint(hi: np.ndarray, lo: np.ndarray, margin: float) -> np.ndarray:
    """Whether hi + lo (|lo| <= half an ulp of hi) lies within ``margin`` ulp of a midpoint between doubles; also
    True for hi a power of two (the ulp below is half) or zero, subnormal, inf or NaN."""
    bits = hi.view(np.int64)
    ulp = (bits & _POWER).view(np.float64) * 2.0 ** -52
    near = np.abs(lo)
    near -= 0.5 * ulp
    np.abs(near, out=near)
    out = near <= margin * ulp
    out |= (bits & _MANTISSA) == 0
    out |= ~(np.abs(hi) >= 2.2250738585072014e-308)
    out |= np.isinf(hi)
    return out


def _blocks(block: Callable, x: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    x = np.ascontiguousarray(x, dtype=np.float64)
    flat = x.reshape(-1)
    values, near = np.empty(flat.size), np.empty(flat.size, dtype=bool)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, BLOCK):
            values[start:start + BLOCK], near[start:start + BLOCK] = block(flat[start:start + BLOCK], margin)
    return values.reshape(x.shape), near.reshape(x.shape)


def exp_near(x: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(correctly rounded exp(x) where the second array is False; True: within ``margin`` ulp of a midpoint,
    or |x| > 708 (subnormal or huge results), or not finite)."""
    return _blocks(_exp_block, x, margin)


def _exp_block(x: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    _T = _tables()
    outside = ~(np.abs(x) <= 708.0)
    x = np.clip(x, -708.0, 708.0)
    k = np.rint(x * (_N / 0.6931471805599453))
    r = k * _T["step_hi"]
    np.subtract(x, r, out=r)  # exact: Sterbenz, or k = 0
    p = k * _T["step_lo"]
    rr = r - p  # x - k ln2/256 = rr + dr (|p| < 2^-19, so any rounding in dr is below 2^-72)
    dr = r - rr
    dr -= p
    # exp(rr + dr) - 1 = e_hi + e_lo: rr + q with q = rr^2/2 + ... (|q| < 2^-19.9), dr added to the tail
    q = _poly(rr, _EXP_POLY)
    e_hi = rr + q
    e_lo = rr - e_hi
    e_lo += q
    e_lo += dr
    ki = k.astype(np.int64)
    j = ki & (_N - 1)
    t_hi, t_lo = _T["exp_hi"][j], _T["exp_lo"][j]
    # T (1 + e) = t_hi + t_hi e_hi + (t_hi e_lo + t_lo + t_lo e_hi); t_hi e_hi rounds within 2^-63.5 of t_hi
    small = t_hi * e_lo
    small += t_lo
    small += t_lo * e_hi
    big = t_hi * e_hi
    hi = t_hi + big
    lo = t_hi - hi
    lo += big
    lo += small
    value = hi + lo
    hi -= value
    hi += lo  # value + hi: renormalized (|hi| <= half an ulp of value)
    near = _near_midpoint(value, hi, margin)
    near |= outside
    scale = ((ki >> 8) + 1023) << 52  # 2^floor(k / 256): exact for normal results
    value *= scale.view(np.float64)
    return value, near


def log_near(x: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(correctly rounded log(x) where the second array is False; True: within ``margin`` ulp of a midpoint,
    or x subnormal, zero, negative, inf or NaN, or log(x) = 0)."""
    return _blocks(_log_block, x, margin)


def _log_block(x: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    _T = _tables()
    outside = ~(x >= 2.2250738585072014e-308) | np.isinf(x)
    bits = np.where(outside, 1.0, x).view(np.int64)
    # x = 2^e m, sqrt(2)/2 <= m < sqrt(2)
    e = (bits >> 52) - 1023
    m_bits = bits & _MANTISSA
    up = (m_bits >= 0x6A09E667F3BCD).astype(np.int64)
    e += up
    m_bits |= (1023 - up) << 52
    m = m_bits.view(np.float64)
    key = (m_bits >> 44) - (1022 << 8)
    invc = _T["invc"][key]
    # r = m invc - 1, exact: m's head (45 bits) times invc (8 bits) is exact, as is its tail times invc, and
    # their sum minus 1 is a multiple of 2^-61 below 2^-7.4 (53 bits)
    head = (m_bits & np.int64(~0xFF)).view(np.float64)
    r = head * invc
    r -= 1.0
    r += (m - head) * invc
    q = _poly(r, _LOG_POLY)  # log1p(r) - r, |q| < 2^-15.8
    ed = e.astype(np.float64)
    # log x = e ln2_hi + (-log invc)_hi + r + (q + e ln2_lo + (-log invc)_lo), summed with exact errors
    a = ed * _T["ln2_hi"]
    b = _T["logc_hi"][key]
    s1 = a + b
    err = _two_sum_error(a, b, s1)
    s2 = s1 + r
    err += _two_sum_error(s1, r, s2)
    err += q
    err += ed * _T["ln2_lo"]
    err += _T["logc_lo"][key]
    value = s2 + err
    s2 -= value
    s2 += err  # value + s2, renormalized
    near = _near_midpoint(value, s2, margin)
    near |= outside
    return value, near


def _two_sum_error(a: np.ndarray, b: np.ndarray, s: np.ndarray) -> np.ndarray:
    """(a + b) - s exactly, s = fl(a + b) (Knuth's TwoSum)."""
    bb = s - a
    err = s - bb
    np.subtract(a, err, out=err)
    bb = b - bb
    err += bb
    return err
