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

    @njit(cache=True, nogil=True, fastmath={"contract"})
    def conv3x3_shallow_forward(xp: Any, w: Any, bias: Any, has_bias: bool, out: Any) -> None:  # pragma: no cover - compiled
        """``out[b, q] = corr(xp[b, 0], w[q, 0]) (+ bias[q])``: a one-input-channel 3x3 convolution at stride 1 on the
        zero-padded input ``xp`` (B, 1, OH + 2, OW + 2) into ``out`` (B, O, OH, OW), where im2col's GEMMs have K = 9.
        Per image and output channel, the nine taps are nine shifted views of the flat padded plane (in L1) and the
        outputs are computed on the padded width in one vectorized loop (rows of 28 left a scalar tail costing as
        much as the vector part), then the rows are copied out. Taps in row-major order (fused multiply-adds), the
        bias added last, as the GEMM's sum followed by the bias add."""
        nb, _, _, wp = xp.shape
        o, oh, ow = out.shape[1], out.shape[2], out.shape[3]
        span = (oh - 1) * wp + ow
        tmp = np.empty(oh * wp, np.float32)
        for b in range(nb):
            flat = xp[b, 0].reshape(-1)
            x0, x1, x2 = flat[0:span], flat[1:span + 1], flat[2:span + 2]
            x3, x4, x5 = flat[wp:wp + span], flat[wp + 1:wp + span + 1], flat[wp + 2:wp + span + 2]
            x6, x7, x8 = flat[2 * wp:2 * wp + span], flat[2 * wp + 1:2 * wp + span + 1], flat[2 * wp + 2:2 * wp + span + 2]
            for q in range(o):
                w0, w1, w2 = w[q, 0, 0, 0], w[q, 0, 0, 1], w[q, 0, 0, 2]
                w3, w4, w5 = w[q, 0, 1, 0], w[q, 0, 1, 1], w[q, 0, 1, 2]
                w6, w7, w8 = w[q, 0, 2, 0], w[q, 0, 2, 1], w[q, 0, 2, 2]
                for k in range(span):
                    tmp[k] = (x0[k] * w0 + x1[k] * w1 + x2[k] * w2 + x3[k] * w3 + x4[k] * w4 + x5[k] * w5
                              + x6[k] * w6 + x7[k] * w7 + x8[k] * w8)
                if has_bias:
                    bq = bias[q]
                    for k in range(span):
                        tmp[k] += bq
                for r in range(oh):
                    row, part = out[b, q, r], tmp[r * wp:r * wp + ow]
                    for s in range(ow):
                        row[s] = part[s]

    @njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def conv3x3_shallow_weight(xp: Any, g: Any, total: Any) -> None:  # pragma: no cover - compiled
        """``total[q, t] += sum_{b, r, s} g[b, q, r, s] * xp[b, 0, r + t // 3, s + t % 3]`` (float64 ``total`` (O, 9)):
        the weight gradient of ``conv3x3_shallow_forward``. Per image, ``g`` is copied onto the padded width with zeros
        in the extra columns (so ``x`` must be finite: those zeros meet real pixels), and each pair of output channels
        runs 18 dot products over the flat plane in vector accumulators (reassociated: a fixed order per image); the
        per-image sums join ``total`` in float64."""
        nb, _, _, wp = xp.shape
        o, oh, ow = g.shape[1], g.shape[2], g.shape[3]
        span = (oh - 1) * wp + ow
        gpad = np.zeros((o, span), np.float32)
        zero = np.float32(0.0)
        for b in range(nb):
            flat = xp[b, 0].reshape(-1)
            x0, x1, x2 = flat[0:span], flat[1:span + 1], flat[2:span + 2]
            x3, x4, x5 = flat[wp:wp + span], flat[wp + 1:wp + span + 1], flat[wp + 2:wp + span + 2]
            x6, x7, x8 = flat[2 * wp:2 * wp + span], flat[2 * wp + 1:2 * wp + span + 1], flat[2 * wp + 2:2 * wp + span + 2]
            for q in range(o):
                for r in range(oh):
                    src, dst = g[b, q, r], gpad[q, r * wp:r * wp + ow]
                    for s in range(ow):
                        dst[s] = src[s]
            for q in range(0, o, 2):
                u_row, v_row = gpad[q], gpad[min(q + 1, o - 1)]  # an odd last channel is summed twice, kept once
                a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = zero
                c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = c8 = zero
                for k in range(span):
                    u, v = u_row[k], v_row[k]
                    a0 += u * x0[k]
                    a1 += u * x1[k]
                    a2 += u * x2[k]
                    a3 += u * x3[k]
                    a4 += u * x4[k]
                    a5 += u * x5[k]
                    a6 += u * x6[k]
                    a7 += u * x7[k]
                    a8 += u * x8[k]
                    c0 += v * x0[k]
                    c1 += v * x1[k]
                    c2 += v * x2[k]
                    c3 += v * x3[k]
                    c4 += v * x4[k]
                    c5 += v * x5[k]
                    c6 += v * x6[k]
                    c7 += v * x7[k]
                    c8 += v * x8[k]
                t = total[q]
                t[0] += a0
                t[1] += a1
                t[2] += a2
                t[3] += a3
                t[4] += a4
                t[5] += a5
                t[6] += a6
                t[7] += a7
                t[8] += a8
                if q + 1 < o:
                    t = total[q + 1]
                    t[0] += c0
                    t[1] += c1
                    t[2] += c2
                    t[3] += c3
                    t[4] += c4
                    t[5] += c5
                    t[6] += c6
                    t[7] += c7
                    t[8] += c8

    return {"winograd_input": winograd_input, "winograd_output": winograd_output,
            "winograd_grad_output": winograd_grad_output, "conv3x3_shallow_forward": conv3x3_shallow_forward,
            "conv3x3_shallow_weight": conv3x3_shallow_weight}
