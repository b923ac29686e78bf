"""Native (numba) kernels for max pooling with any window (``ember/ops/pooling.py``).

The NumPy path loops over the kernel taps, each a few full-output sweeps (compare, select, index
bookkeeping; ~3x slower), and its backward for overlapping windows (ResNet's 3x3, stride 2) is a float64
``bincount``; these do one pass. Both work on planes ``[start, stop)`` of the (N*C, H, W) input
and release the GIL, so ``ember.backends.cpu_threads.parallel_for`` runs them on all cores.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> callable(get("max_pool2d_planes")) or get("max_pool2d_planes") is None
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np


def build(numba: Any) -> dict[str, Callable]:
    """The kernels, compiled with ``numba`` (cached on disk)."""
    njit = numba.njit

    @njit(cache=True, nogil=True)
    def max_pool2d_planes(x: Any, kh: int, kw: int, sh: int, sw: int, ph: int, pw: int, dh: int, dw: int,
                          out: Any, indices: Any, start: int, stop: int) -> int:  # pragma: no cover - compiled
        """PyTorch's CPU rule per window: start at -inf with the first in-bounds position, take a
        value when ``val > best``, taps in row-major order; padding is never read. ``x`` is
        (P, H, W), ``out``/``indices`` (P, OH, OW).

        Returns how many windows held a NaN: for those PyTorch's rule also takes each NaN, and the
        caller redoes the op on the exact NumPy path. A NaN test inside the compare doubled the time.
        """
        _, h, w = x.shape
        _, oh, ow = out.shape
        lowest = np.full(1, -np.inf, dtype=x.dtype)[0]  # x's type: a float64 best converts each compare
        nans = 0
        for p in range(start, stop):
            for i in range(oh):
                r0 = i * sh - ph
                rs = r0  # the first row inside the input (an if: a select would divide every time)
                if r0 < 0:
                    rs = r0 + (-r0 + dh - 1) // dh * dh
                for j in range(ow):
                    c0 = j * sw - pw
                    cs = c0
                    if c0 < 0:
                        cs = c0 + (-c0 + dw - 1) // dw * dw
                    best = lowest
                    odd = False
                    where = rs * w + cs
                    for a in range(kh):
                        r = r0 + a * dh
                        if r < 0 or r >= h:
                            continue
                        for b in range(kw):
                            c = c0 + b * dw
                            if c < 0 or c >= w:
                                continue
                            v = x[p, r, c]
                            odd |= v != v  # off the compare chain's critical path
                            take = v > best  # a select, not a branch: on random data a branch
                            best = v if take else best  # mispredicts half the compares
                            where = r * w + c if take else where
                    nans += odd
                    out[p, i, j] = best
                    indices[p, i, j] = where
        return nans

    @njit(cache=True, nogil=True)
    def unpool_scatter_add(g: Any, indices: Any, out: Any, start: int, stop: int) -> int:  # pragma: no cover - compiled
        """``out[plane, indices[plane, k]] += g[plane, k]`` for planes ``[start, stop)`` (``out``
        zeroed; windows may overlap). Indices outside the plane are skipped and counted."""
        size = out.shape[1]
        count = g.shape[1]
        bad = 0
        for plane in range(start, stop):
            for k in range(count):
                index = indices[plane, k]
                if 0 <= index < size:
                    out[plane, index] += g[plane, k]
                else:
                    bad += 1
        return bad

    return {"max_pool2d_planes": max_pool2d_planes, "unpool_scatter_add": unpool_scatter_add}

