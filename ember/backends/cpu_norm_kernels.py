"""Training batch norm and layer norm, forward and backward, as native loops over blocks of channels or rows (numba).

Why: the NumPy path (``ember/ops/normalization.py``) makes 5 sweeps each way with broadcast ufuncs and
``einsum``; split over ember's threads by channel blocks it gained nothing (the calling thread's CPU time on
ResNet-18's layer1 shape, 128 x 64 x 8x8: 0.35 ms forward and 1.15 ms backward on one thread, 0.37 and 1.22 ms
with the work split over two): the broadcast ufuncs on a channel block's strided view take as long as on the
whole array. These kernels read a channel's data twice (statistics, then the output) and release the GIL, so
``split_channels`` runs their blocks on both cores. Sums are taken in float64 (NumPy's ``einsum`` sums float32
in float32), so results agree with the NumPy path to float32 rounding, not bit for bit.

``x``, ``g``, ``y``, ``gx`` are (N, C, L) C-contiguous arrays of one float dtype; the kernels handle channels
``[c0, c1)``.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> kernel = get("batch_norm_train")   # None without numba
    >>> kernel is None or callable(kernel)
    True
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

# Only reassociation (and fused multiply-adds): lets LLVM vectorize the float64 sums with several partial sums
# (a serial chain of float64 adds ran the forward at half NumPy's speed); NaN and inf keep their meaning.
_REASSOCIATE = {"reassoc", "contract"}
_LN_ROW_TERMS = None  # set by build()
_LN_BACKWARD_ROWS = None  # set by build()
_BN_RUN = 256  # batch norm: values summed in the data's dtype before the run's sum joins the float64 total


def build(numba: Any) -> dict[str, Callable]:
    """``batch_norm_train`` and ``batch_norm_backward`` compiled with ``numba``."""

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def batch_norm_train(x, weight, bias, eps, c0, c1, y, mean, var):  # pragma: no cover - compiled
        """``y = (x - mean) * (weight / sqrt(var + eps)) + bias`` per channel, with the batch ``mean`` and
        biased ``var`` written out (two passes: the mean, then the squares about the stored mean).

        Runs of ``_BN_RUN`` values are summed in the data's dtype (vectorized, 16 float32 lanes) and the runs in
        float64; the output is computed in the data's dtype with the scale and shift rounded to it. Summing every
        float32 value in float64 (two conversions per value, 8 lanes) ran 2-3x slower, forward and backward, and
        its errors against float64 were no smaller (1e-7 of the largest value, as torch's)."""
        n, _, length = x.shape
        count = n * length
        zero = np.zeros(1, x.dtype)[0]
        cast = np.zeros(2, x.dtype)  # scalars rounded to the data's dtype
        for c in range(c0, c1):
            total = 0.0
            for b in range(n):
                if length <= _BN_RUN:  # a row is one run (no views: a view per row cost 1x1 maps 1.4x)
                    part = zero
                    for i in range(length):
                        part += x[b, c, i]
                    total += part
                    continue
                row = x[b, c]
                for i0 in range(0, length, _BN_RUN):
                    run = row[i0:i0 + _BN_RUN]  # a slice: a min() bound here kept LLVM from vectorizing (2x slower)
                    part = zero
                    for i in range(run.shape[0]):
                        part += run[i]
                    total += part
            m = total / count
            mean[c] = m
            mc = mean[c]  # the stored (rounded) mean: the squares are taken about it, the output subtracts it
            squares = 0.0
            for b in range(n):
                if length <= _BN_RUN:
                    part = zero
                    for i in range(length):
                        d = x[b, c, i] - mc
                        part += d * d
                    squares += part
                    continue
                row = x[b, c]
                for i0 in range(0, length, _BN_RUN):
                    run = row[i0:i0 + _BN_RUN]
                    part = zero
                    for i in range(run.shape[0]):
                        d = run[i] - mc
                        part += d * d
                    squares += part
            shift_of_mean = m - mc
            v = squares / count - shift_of_mean * shift_of_mean  # squares about mc = var + (m - mc)^2
            if v < 0.0:  # rounding; NaN (an inf or NaN in the channel) stays NaN
                v = 0.0
            var[c] = v
            cast[0] = weight[c] / (v + eps) ** 0.5
            cast[1] = bias[c]
            scale, shift = cast[0], cast[1]
            for b in range(n):
                for i in range(length):
                    y[b, c, i] = (x[b, c, i] - mc) * scale + shift

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def batch_norm_backward(g, x, mean, invstd, weight, c0, c1, gx, gw, gb):  # pragma: no cover - compiled
        """``gb = sum g``, ``gw = sum g * xhat``, ``gx = a * (g - gb / count - xhat * gw / count)`` per channel,
        ``xhat = (x - mean) * invstd``, ``a = weight * invstd``; sums by runs as ``batch_norm_train``'s, ``gx`` in
        the data's dtype."""
        n, _, length = x.shape
        count = n * length
        zero = np.zeros(1, x.dtype)[0]
        cast = np.zeros(3, x.dtype)
        for c in range(c0, c1):
            m = mean[c]
            sum_g = 0.0
            sum_gx = 0.0
            for b in range(n):
                if length <= _BN_RUN:
                    part_g = zero
                    part_gx = zero
                    for i in range(length):
                        gv = g[b, c, i]
                        part_g += gv
                        part_gx += gv * (x[b, c, i] - m)
                    sum_g += part_g
                    sum_gx += part_gx
                    continue
                gr, xr = g[b, c], x[b, c]
                for i0 in range(0, length, _BN_RUN):
                    run_g, run_x = gr[i0:i0 + _BN_RUN], xr[i0:i0 + _BN_RUN]
                    part_g = zero
                    part_gx = zero
                    for i in range(run_g.shape[0]):
                        gv = run_g[i]
                        part_g += gv
                        part_gx += gv * (run_x[i] - m)
                    sum_g += part_g
                    sum_gx += part_gx
            s = invstd[c]
            gb[c] = sum_g
            gw[c] = sum_gx * s
            a = weight[c] * s
            cast[0] = a
            cast[1] = -(a * s * (sum_gx * s) / count)
            cast[2] = -(a * sum_g / count)
            a_d, k_x, k_0 = cast[0], cast[1], cast[2]
            for b in range(n):
                for i in range(length):  # centered first: precise when the mean is large against the spread
                    gx[b, c, i] = g[b, c, i] * a_d + (x[b, c, i] - m) * k_x + k_0

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def layer_norm_rows(x, weight, bias, eps, one_pass, r0, r1, y, mean, rstd):  # pragma: no cover - compiled
        """Rows ``[r0, r1)`` of a (rows, n) ``x``: ``mean``, ``rstd = 1 / sqrt(var + eps)`` (sums in float64, the
        variance from the centered values), ``y = (x - mean) * rstd * weight + bias``. Returns the number of rows
        whose variance is not finite (inf/NaN inputs, float64 squares that overflow): the caller redoes those
        calls with the NumPy code, which gives them PyTorch's values. The variance is ``E[x^2] - mean^2`` from one
        pass where that keeps its digits (``var > one_pass * mean^2``; float32 inputs, whose squares are exact in
        float64: ``one_pass`` 1e-6), else the mean of centered squares (float64 inputs: ``one_pass`` inf)."""
        n = x.shape[1]
        bad = 0
        for r in range(r0, r1):
            xr, yr = x[r], y[r]
            total = 0.0
            total_sq = 0.0
            for i in range(n):  # one pass: float32 squares are exact in float64
                xv = np.float64(xr[i])
                total += xv
                total_sq += xv * xv
            m = total / n
            v = total_sq / n - m * m
            if not v > one_pass * m * m:  # cancellation (a mean far above the spread), inf/NaN: centered squares
                squares = 0.0
                for i in range(n):
                    d = xr[i] - m
                    squares += d * d
                v = squares / n
            if not abs(v) < math.inf:
                bad += 1
            s = 1.0 / math.sqrt(v + eps)
            mean[r] = m
            rstd[r] = s
            # The output pass in x's dtype (twice the vector lanes of float64 for float32): x - mean is exact for x
            # near the mean, and the stored mean's rounding error is taken off after, so a mean far above the
            # spread keeps the spread's digits.
            m_low = mean[r]
            rest = m - m_low
            m_rest = x.dtype.type(rest)
            s_low = rstd[r]
            for i in range(n):
                yr[i] = ((xr[i] - m_low) - m_rest) * s_low * weight[i] + bias[i]
        return bad

    global _LN_ROW_TERMS  # a module global, not a closure cell: numba's disk cache keys on the pickled closure

    @numba.njit(inline="always", fastmath=_REASSOCIATE)
    def _row_terms(xr, gr, weight, m, s):  # pragma: no cover - compiled
        """(shift, mean(gy), mean(gy * (xhat - shift))) of one row, ``shift`` the mean of ``xhat``."""
        n = xr.shape[0]
        sum_gy = 0.0
        sum_gy_xhat = 0.0
        sum_xhat = 0.0
        for i in range(n):
            xh = (xr[i] - m) * s
            gy = gr[i] * np.float64(weight[i])
            sum_gy += gy
            sum_gy_xhat += gy * xh
            sum_xhat += xh
        shift = sum_xhat / n
        a = sum_gy / n
        return shift, a, sum_gy_xhat / n - shift * a

    _LN_ROW_TERMS = _row_terms

    @numba.njit(fastmath=_REASSOCIATE)
    def _backward_rows(g, x, mean, rstd, weight, r0, r1, gx, gw, gb):  # pragma: no cover - compiled
        """Rows ``[r0, r1)``: ``gx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat))`` with ``gy = g * weight``,
        ``xhat = (x - mean) * rstd``; adds ``g * xhat`` and ``g`` into the float64 row sums ``gw`` and ``gb``.
        ``xhat`` is re-centered by its own mean (zero but for the stored mean's rounding: a mean far above the
        spread), as the NumPy code's correction pass does, here inside the same two passes. One row at a time
        (the row's second pass reads it from L1): rows in fours (one read of the column sums per four rows)
        measured 2.23-2.26 ms against 1.87-1.92 for GPT's 4096 x 384 from memory, as a step reads it (0.95-0.98
        against 0.80-0.86 ms at W4's 2048 x 256): twelve streams at once defeated the prefetcher; in cache the
        fours were 7% faster."""
        n = x.shape[1]
        for r in range(r0, r1):
            m0 = np.float64(mean[r])
            s0 = np.float64(rstd[r])
            x0, g0, o0 = x[r], g[r], gx[r]
            h0, a0, c0 = _LN_ROW_TERMS(x0, g0, weight, m0, s0)
            for i in range(n):
                e0 = (x0[i] - m0) * s0 - h0
                v0 = np.float64(g0[i])
                o0[i] = s0 * (v0 * np.float64(weight[i]) - a0 - e0 * c0)
                gw[i] += v0 * e0
                gb[i] += v0

    global _LN_BACKWARD_ROWS
    _LN_BACKWARD_ROWS = _backward_rows

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def layer_norm_backward_rows(g, x, mean, rstd, weight, per_block, k0, k1, gx, gw_parts,
                                 gb_parts):  # pragma: no cover - compiled
        """Blocks ``[k0, k1)`` of ``per_block`` rows (the last one shorter): each block's rows as
        ``_backward_rows``, its weight and bias gradient sums into ``gw_parts[k]`` and ``gb_parts[k]``. One call
        per thread, not one per block: numba's call of ~5 us with eleven arguments, 48 times for GPT's 4096 rows,
        was a fifth of the backward's time in cache (0.25 of 1.2 ms)."""
        total = x.shape[0]
        for k in range(k0, k1):
            _LN_BACKWARD_ROWS(g, x, mean, rstd, weight, k * per_block, min(total, (k + 1) * per_block), gx,
                              gw_parts[k], gb_parts[k])

    return {"batch_norm_train": batch_norm_train, "batch_norm_backward": batch_norm_backward,
            "layer_norm_rows": layer_norm_rows, "layer_norm_backward_rows": layer_norm_backward_rows}
