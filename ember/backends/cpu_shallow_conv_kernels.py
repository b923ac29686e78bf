"""MNIST conv1's kernels (one input channel, 3x3, stride 1): the forward and the weight gradient, and their ranges of
images as numba ``cfunc`` s for the hot worker (``cpu_hot_worker.split_call_into``; mnist22).

Module-level (not built inside ``cpu_conv_kernels.build``) so the range functions can call them; ``cpu_kernels``'
table holds them under their names and this module under ``"hot_shallow"``. Imported only after numba.

A range's ``args`` is the address of ``WORDS`` int64 words: the padded input (N, 1, HP, WP), the weights (O, 1, 3, 3)
or the gradient (N, O, OH, OW), the bias (O,) or the two float64 (O, 9) totals (one per part: the part starting at
image 0 writes the first), the output (N, O, OH, OW), whether there is a bias, then N, O, OH, OW, HP, WP.

Example:
    >>> import numpy as np
    >>> xp, w = np.ones((1, 1, 4, 4), np.float32), np.ones((1, 1, 3, 3), np.float32)
    >>> out = np.empty((1, 1, 2, 2), np.float32)
    >>> conv3x3_shallow_forward(xp, w, np.zeros(1, np.float32), False, out); out.ravel().tolist()
    [9.0, 9.0, 9.0, 9.0]
"""
from __future__ import annotations

import sys
from typing import Any

import numba
import numpy as np
from numba import types

from ember.backends.cpu_hot_ufunc_kernels import as_pointer

XPAD, SECOND, THIRD, OUT, HAS_BIAS, N, O, OH, OW, HP, WP = range(11)
WORDS = 12


@numba.njit(cache=True, nogil=True, fastmath={"contract"})
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

@numba.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
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


def forward_range(start, stop, args):  # pragma: no cover - compiled
    """``conv3x3_shallow_forward`` on images ``[start, stop)`` (words: xpad, w, bias, out, has_bias, sizes)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, o, oh, ow, hp, wp = stop - start, words[O], words[OH], words[OW], words[HP], words[WP]
    xp = numba.carray(as_pointer(words[XPAD] + start * hp * wp * 4), (n, 1, hp, wp), np.float32)
    w = numba.carray(as_pointer(words[SECOND]), (o, 1, 3, 3), np.float32)
    bias = numba.carray(as_pointer(words[THIRD]), (o,), np.float32)
    out = numba.carray(as_pointer(words[OUT] + start * o * oh * ow * 4), (n, o, oh, ow), np.float32)
    conv3x3_shallow_forward(xp, w, bias, words[HAS_BIAS] != 0, out)


def weight_range(start, stop, args):  # pragma: no cover - compiled
    """``conv3x3_shallow_weight`` of images ``[start, stop)`` into the part's float64 total (words: xpad, g, totals)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, o, oh, ow, hp, wp = stop - start, words[O], words[OH], words[OW], words[HP], words[WP]
    xp = numba.carray(as_pointer(words[XPAD] + start * hp * wp * 4), (n, 1, hp, wp), np.float32)
    g = numba.carray(as_pointer(words[SECOND] + start * o * oh * ow * 4), (n, o, oh, ow), np.float32)
    totals = numba.carray(as_pointer(words[THIRD]), (2, o, 9), np.float64)
    conv3x3_shallow_weight(xp, g, totals[1 if start != 0 else 0])


_SIGNATURE = types.void(types.int64, types.int64, types.int64)
_FUNCTIONS = {"forward": forward_range, "weight": weight_range}
_CFUNCS: dict = {}


def address(kind: str) -> int:
    """The C address of the range function ``kind`` ("forward" or "weight"), compiled (or loaded from numba's cache)
    on first use."""
    compiled = _CFUNCS.get(kind)
    if compiled is None:
        compiled = _CFUNCS[kind] = numba.cfunc(_SIGNATURE, nopython=True, cache=True)(_FUNCTIONS[kind])
    return compiled.address
