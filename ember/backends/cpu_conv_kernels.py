"""Native (numba) kernels for the Winograd transforms of ``ember/ops/conv_winograd.py``.

NumPy runs each transform as a few dozen full-array ufunc sweeps; these run each tile once, in
registers and cache. Each kernel does the tiles ``[start, stop)`` and releases the GIL, so
``ember.backends.cpu_threads.parallel_for`` splits the tiles over the cores. (Not numba's
``parallel=True``: its OpenMP workers spin at every barrier, which on a loaded machine made a
transform 4x slower; the thread pool's workers sleep on a lock.) Each computes the same sums as
the NumPy path, term by term in the same order, so the results agree to rounding.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> callable(get("winograd_input")) or get("winograd_input") is None
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def build(numba: Any) -> dict[str, Callable]:
    """The kernels, compiled with ``numba`` (cached on disk)."""
    njit = numba.njit

    @njit(cache=True, nogil=True)
    def winograd_input(x: Any, bt: Any, m: int, top: int, left: int, th: int, tw: int, v: Any,
                       start: int, stop: int) -> None:  # pragma: no cover - compiled
        """``v[i*a + j, tile, c] = (B^T d B)[i, j]`` for every tile ``d`` of the NCHW input ``x``
        padded by ``top``/``left`` (zeros outside). ``v`` is (a*a, N*th*tw, C)."""
        n, c, h, w = x.shape
        a = bt.shape[0]
        for tile in range(start, stop):
            b = tile // (th * tw)
            r0 = (tile // tw) % th * m - top
            c0 = tile % tw * m - left
            d = np.zeros((a, a, c), dtype=v.dtype)  # the input tile, channels last
            for i in range(a):
                r = r0 + i
                if 0 <= r < h:
                    for j in range(a):
                        s = c0 + j
                        if 0 <= s < w:
                            for ch in range(c):
                                d[i, j, ch] = x[b, ch, r, s]
            rows = np.zeros((a, a, c), dtype=v.dtype)  # B^T d
            for i in range(a):
                for k in range(a):
                    coeff = bt[i, k]
                    if coeff != 0:
                        for j in range(a):
                            for ch in range(c):
                                rows[i, j, ch] += coeff * d[k, j, ch]
            for i in range(a):
                for j in range(a):
                    out = v[i * a + j, tile]
                    out[:] = 0
                    for k in range(a):
                        coeff = bt[j, k]
                        if coeff != 0:
                            for ch in range(c):
                                out[ch] += coeff * rows[i, k, ch]

    @njit(cache=True, nogil=True)
    def winograd_output(mt: Any, at: Any, th: int, tw: int, y: Any, start: int, stop: int) -> None:  # pragma: no cover - compiled
        """``y[b, :, tile rows, tile cols] = A^T M A`` of (a*a, N*th*tw, O) products, cropped to
        the NCHW output ``y``."""
        n, o, oh, ow = y.shape
        m, a = at.shape
        for tile in range(start, stop):
            b = tile // (th * tw)
            r0 = (tile // tw) % th * m
            c0 = tile % tw * m
            half = np.zeros((m, a, o), dtype=y.dtype)  # A^T M
            for i in range(m):
                for k in range(a):
                    coeff = at[i, k]
                    if coeff != 0:
                        for j in range(a):
                            src = mt[k * a + j, tile]
                            for ch in range(o):
                                half[i, j, ch] += coeff * src[ch]
            acc = np.empty(o, dtype=y.dtype)
            for i in range(m):
                if r0 + i >= oh:
                    break
                for j in range(m):
                    if c0 + j >= ow:
                        break
                    acc[:] = 0
                    for k in range(a):
                        coeff = at[j, k]
                        if coeff != 0:
                            for ch in range(o):
                                acc[ch] += coeff * half[i, k, ch]
                    for ch in range(o):
                        y[b, ch, r0 + i, c0 + j] = acc[ch]

    @njit(cache=True, nogil=True)
    def winograd_grad_output(g: Any, at: Any, th: int, tw: int, dm: Any, start: int, stop: int) -> None:  # pragma: no cover - compiled
        """``dm[k*a + q, tile] = (A dY A^T)[k, q]`` for every m x m block ``dY`` of the NCHW output
        gradient ``g`` (zero past its edge): the adjoint of ``winograd_output``."""
        n, o, oh, ow = g.shape
        m, a = at.shape
        for tile in range(start, stop):
            b = tile // (th * tw)
            r0 = (tile // tw) % th * m
            c0 = tile % tw * m
            gy = np.zeros((m, m, o), dtype=dm.dtype)
            for i in range(m):
                if r0 + i < oh:
                    for j in range(m):
                        if c0 + j < ow:
                            for ch in range(o):
                                gy[i, j, ch] = g[b, ch, r0 + i, c0 + j]
            half = np.zeros((m, a, o), dtype=dm.dtype)  # dY A^T
            for i in range(m):
                for q in range(a):
                    for j in range(m):
                        coeff = at[j, q]
                        if coeff != 0:
                            for ch in range(o):
                                half[i, q, ch] += coeff * gy[i, j, ch]
            for k in range(a):
                for q in range(a):
                    out = dm[k * a + q, tile]
                    out[:] = 0
                    for i in range(m):
                        coeff = at[i, k]
                        if coeff != 0:
                            for ch in range(o):
                                out[ch] += coeff * half[i, q, ch]

    from ember.backends import cpu_shallow_conv_kernels as shallow  # module-level kernels: the hot worker's cfuncs call them

    return {"winograd_input": winograd_input, "winograd_output": winograd_output,
            "winograd_grad_output": winograd_grad_output, "conv3x3_shallow_forward": shallow.conv3x3_shallow_forward,
            "conv3x3_shallow_weight": shallow.conv3x3_shallow_weight, "hot_shallow": shallow}
