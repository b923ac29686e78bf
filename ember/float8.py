"""The four float8 formats PyTorch 2.13 stores (float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz):
their values, and conversions to and from float32 that round and saturate exactly as torch does, in NumPy alone.

The bits are computed here (a 256-entry table decodes, a search over the sorted finite values encodes with
round-half-to-even), so the results do not depend on ml_dtypes' own rounding, which differs from torch's for
float8_e4m3fn (torch saturates finite overflow and +-inf to +-448; ml_dtypes gives NaN) and in NaN sign bits.
ml_dtypes only supplies the NumPy dtypes that hold the bytes (as for bfloat16).

Rules (checked on all 256 codes and on float32 inputs around every rounding boundary against torch 2.13):

* e4m3fn: no infinities; |x| above 448 (and +-inf) saturates to +-448; NaN keeps its sign (0x7F / 0xFF).
* e5m2: IEEE-like; |x| >= 61440 (half an ulp above 57344) becomes +-inf; NaN keeps its sign.
* e4m3fnuz / e5m2fnuz: one zero (-0 is +0), no infinities; overflow (beyond max + half an ulp, ties included)
  and +-inf and NaN become the one NaN (0x80).

Example:
    >>> import numpy as np
    >>> encode(np.array([1.0, 500.0, np.inf], np.float32), "float8_e4m3fn").tolist()
    [56, 126, 126]
    >>> decode(np.array([56, 126], np.uint8), "float8_e4m3fn").tolist()
    [1.0, 448.0]
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np


class Format(NamedTuple):
    exponent_bits: int
    mantissa_bits: int
    bias: int
    ieee: bool          # all-ones exponent is inf/NaN (e5m2); else only the NaN codes below are special
    unsigned_zero: bool  # "fnuz": 0x80 is the one NaN, no -0, no infinities


FORMATS = {
    "float8_e4m3fn": Format(4, 3, 7, False, False),
    "float8_e5m2": Format(5, 2, 15, True, False),
    "float8_e4m3fnuz": Format(4, 3, 8, False, True),
    "float8_e5m2fnuz": Format(5, 2, 16, False, True),
}


@functools.lru_cache(maxsize=None)
def decode_table(name: str) -> np.ndarray:
    """float32 value of each of the 256 codes of format ``name``."""
    f = FORMATS[name]
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exponent = (codes >> f.mantissa_bits) & ((1 << f.exponent_bits) - 1)
    mantissa = codes & ((1 << f.mantissa_bits) - 1)
    scale = 2.0 ** f.mantissa_bits
    normal = (1.0 + mantissa / scale) * 2.0 ** (exponent - f.bias)
    subnormal = (mantissa / scale) * 2.0 ** (1 - f.bias)
    values = sign * np.where(exponent == 0, subnormal, normal)
    top = (1 << f.exponent_bits) - 1
    if f.ieee:  # (NaN keeps its sign bit, as torch's conversion to float does)
        values = np.where((exponent == top) & (mantissa == 0), sign * np.inf, values)
        values = np.where((exponent == top) & (mantissa != 0), np.copysign(np.nan, sign), values)
    elif f.unsigned_zero:
        values[0x80] = np.nan
    else:
        values[0x7F], values[0xFF] = np.nan, -np.nan
    return values.astype(np.float32)


@functools.lru_cache(maxsize=None)
def _positive(name: str) -> tuple:
    """(finite non-negative values in increasing order, their codes, max finite value, its code)."""
    table = decode_table(name).astype(np.float64)
    codes = np.arange(128)
    finite = np.isfinite(table[:128])
    values, kept = table[:128][finite], codes[finite]
    order = np.argsort(values, kind="stable")
    return values[order], kept[order], float(values[order][-1]), int(kept[order][-1])


def encode(x: np.ndarray, name: str) -> np.ndarray:
    """The float8 codes (uint8) of float32 values ``x``, rounded half to even with torch's overflow rules."""
    f = FORMATS[name]
    x = np.asarray(x, dtype=np.float32)
    values, codes, top, top_code = _positive(name)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.abs(x).astype(np.float64)
        finite = np.isfinite(magnitude)
        m = np.where(finite, magnitude, 0.0)
        hi = np.clip(np.searchsorted(values, m, side="left"), 1, len(values) - 1)
        lo = hi - 1
        below, above = values[lo], values[hi]
        to_lo = (m - below < above - m) | ((m - below == above - m) & (codes[lo] % 2 == 0))
        code = np.where(m <= values[0], codes[0], np.where(to_lo, codes[lo], codes[hi]))
        # beyond the largest finite value: the next step up would be top + one ulp (the spacing below top)
        ulp = top - values[-2]
        over = m > top
        rounds_up = over & ((m > top + ulp / 2) | ((m == top + ulp / 2) & (top_code % 2 == 1)))
        code = np.where(over & ~rounds_up, top_code, code)
    sign = np.signbit(x)
    nan = np.isnan(x)
    inf = ~finite & ~nan
    code = code.astype(np.uint8)
    if f.unsigned_zero:
        out = np.where(sign & (code != 0), code | 0x80, code).astype(np.uint8)
        return np.where(nan | inf | rounds_up, np.uint8(0x80), out).astype(np.uint8)
    out = np.where(sign, code | 0x80, code).astype(np.uint8)
    if f.ieee:  # overflow and infinities are +-inf, NaN keeps its sign
        inf_code = np.uint8((((1 << f.exponent_bits) - 1) << f.mantissa_bits))
        out = np.where(inf | rounds_up, np.where(sign, inf_code | 0x80, inf_code), out)
        return np.where(nan, np.where(sign, np.uint8(0xFF), np.uint8(0x7F)), out).astype(np.uint8)
    out = np.where(inf | rounds_up, np.where(sign, np.uint8(top_code | 0x80), np.uint8(top_code)), out)  # saturate
    return np.where(nan, np.where(sign, np.uint8(0xFF), np.uint8(0x7F)), out).astype(np.uint8)


def decode(codes: np.ndarray, name: str) -> np.ndarray:
    """float32 values of float8 ``codes`` (uint8 array or any 1-byte view of one)."""
    return decode_table(name)[np.asarray(codes).view(np.uint8)]


def finfo(name: str) -> dict:
    """torch.finfo's fields for format ``name`` (bits, eps, max, min, tiny/smallest_normal, resolution)."""
    f = FORMATS[name]
    values, _, top, _ = _positive(name)
    smallest_normal = 2.0 ** (1 - f.bias)
    eps = 0.125 if name == "float8_e5m2fnuz" else 2.0 ** -f.mantissa_bits  # torch 2.13's finfo says 0.125 there
    return {"bits": 8, "eps": eps, "max": top, "min": -top, "tiny": smallest_normal,
            "smallest_normal": smallest_normal, "resolution": 1.0}
