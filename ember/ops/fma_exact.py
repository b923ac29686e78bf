"""The exact fused multiply-add in plain array arithmetic (NumPy or a device namespace such as CuPy).

:mod:`ember.ops.fma` uses these where no one-pass route of :mod:`ember.ops.fma_fast` applies (and on devices);
``fma_fast`` checks its routes against them. Proofs: Boldo and Melquiond, "Emulation of FMA and correctly
rounded sums: proved algorithms using rounding to odd" (2008), see ``ember/ops/fma.py``.

Example:
    >>> import numpy as np
    >>> a, b, c = np.float32([1 + 2**-12]), np.float32([1 - 2**-12]), np.float32([-1])
    >>> float(_fma32(np, a, b, c)[0]) == -2.0**-24
    True
"""
from __future__ import annotations

from ember.backends import capture_state

from typing import Any

import numpy as np

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into two 26-bit halves
_SAFE_PRODUCT = 2.0 ** 995  # |a|, |b| below this: the split cannot overflow
_TINY_PRODUCT = 2.0 ** -969  # |a * b| above this: the product's error is representable (no underflow)


def _two_sum(xp: Any, x: Any, y: Any) -> tuple:
    """s, e with s = fl(x + y) and s + e == x + y exactly (Knuth's TwoSum, no ordering needed)."""
    s = x + y
    bv = s - x
    e = (x - (s - bv)) + (y - bv)
    return s, e


def _round_to_odd(xp: Any, s: Any, e: Any) -> Any:
    """The round-to-odd value of s + e (s = fl(s + e)): an inexact s with an even last bit becomes its
    neighbour on e's side (the two neighbours of an exact value differ in the last bit, so that one is odd)."""
    bits = s.view(xp.int64)
    move = (e != 0) & xp.isfinite(e) & ((bits & 1) == 0)  # (e is NaN when s is infinite: leave s)
    if not capture_state.ACTIVE and not bool(move.any()):  # (no host read while a CUDA graph is captured)
        return s
    # a step toward e: +1 on the bit pattern when e has s's sign (away from zero), else -1
    step = xp.where((e > 0) == (s > 0), 1, -1).astype(xp.int64)
    return xp.where(move, (bits + step).view(xp.float64), s)


def _split(xp: Any, x: Any) -> tuple:
    t = x * _SPLIT
    hi = t - (t - x)
    return hi, x - hi


def _fma64(xp: Any, a: Any, b: Any, c: Any) -> Any:
    uh = a * b
    ah, al = _split(xp, a)
    bh, bl = _split(xp, b)
    ul = ((ah * bh - uh) + ah * bl + al * bh) + al * bl  # uh + ul == a * b exactly (Dekker)
    th, tl = _two_sum(xp, c, uh)
    v = _round_to_odd(xp, *_two_sum(xp, tl, ul))
    out = th + v
    # out of the proof's range (overflowing split, underflowing product error, inf/nan): the plain formula
    risky = ~((xp.abs(a) < _SAFE_PRODUCT) & (xp.abs(b) < _SAFE_PRODUCT)
              & ((xp.abs(uh) > _TINY_PRODUCT) | (uh == 0)) & xp.isfinite(out))
    if bool(risky.any()):
        out = xp.where(risky, a * b + c, out)
    return out


_CHUNK = 1 << 15  # elements per piece: float64 temporaries of 256 KiB stay in cache
_LOW29 = np.uint64((1 << 29) - 1)
_MID29 = np.uint64(1 << 28)  # a float64 whose 29 dropped bits are 1000...0 lies on a float32 rounding midpoint


def _fma32_numpy(a: np.ndarray, b: np.ndarray, c: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 path on NumPy arrays, fast: the float64 sum rounded to float32 is already right unless it
    landed exactly on a float32 midpoint (or in float32's subnormal range), which only those elements
    recompute with the round-to-odd method. In cache-sized pieces; each piece reads all its inputs before it
    writes, so ``out`` may be one of the inputs (a compiled optimizer's update in place)."""
    if out is None:
        out = np.empty(a.shape, dtype=np.float32)
    fa, fb, fc = a.reshape(-1), b.reshape(-1), c.reshape(-1)
    fo = out.reshape(-1)  # a view: `out` is contiguous (fresh, or a planner-chosen state of this shape)
    n = fo.size
    s = np.empty(min(n, _CHUNK), dtype=np.float64)
    low = np.empty(s.size, dtype=np.uint64)
    for start in range(0, n, _CHUNK):
        stop = min(n, start + _CHUNK)
        piece = s[:stop - start]
        np.multiply(fa[start:stop], fb[start:stop], out=piece, dtype=np.float64)  # exact
        np.add(piece, fc[start:stop], out=piece, dtype=np.float64)
        bits = np.bitwise_and(piece.view(np.uint64), _LOW29, out=low[:stop - start])
        suspect = np.equal(bits, _MID29)
        # float32's subnormal range (below 2^-126) with a margin; judged on the float64 sum, before writing
        magnitude = np.abs(piece)
        if magnitude.min() < 2.0 ** -124:  # (an exact 0 is never a double rounding: the sum was exact)
            suspect |= (magnitude < 2.0 ** -124) & (magnitude != 0)
        k = np.flatnonzero(suspect) + start if suspect.any() else None
        fixed = _fma32(np, fa[k], fb[k], fc[k]) if k is not None else None  # read before `out` is written
        fo[start:stop] = piece
        if k is not None:
            fo[k] = fixed
    return out


def _fma32(xp: Any, a: Any, b: Any, c: Any) -> Any:
    p = a.astype(xp.float64) * b.astype(xp.float64)  # exact: 24 + 24 bits
    s = _round_to_odd(xp, *_two_sum(xp, p, c.astype(xp.float64)))
    return s.astype(xp.float32)
