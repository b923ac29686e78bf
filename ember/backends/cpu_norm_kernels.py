"""Training batch norm, forward and backward, as native loops over blocks of channels (numba).

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

from typing import Any, Callable

# Only reassociation (and fused multiply-adds): lets LLVM vectorize the float64 sums with several partial sums
# (a serial chain of float64 adds ran the forward at half NumPy's speed); NaN and inf keep their meaning.
_REASSOCIATE = {"reassoc", "contract"}


def build(numba: Any) -> dict[str, Callable]:
    """``batch_norm_train`` and ``batch_norm_backward`` compiled with ``numba``."""

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def batch_norm_train(x, weight, bias, eps, c0, c1, y, mean, var):  # pragma: no cover - compiled
        """``y = (x - mean) * (weight / sqrt(var + eps)) + bias`` per channel, with the batch ``mean`` and
        biased ``var`` written out (two passes: the mean, then the centered squares)."""
        n, _, length = x.shape
        count = n * length
        for c in range(c0, c1):
            total = 0.0
            for b in range(n):
                for i in range(length):
                    total += x[b, c, i]
            m = total / count
            squares = 0.0
            for b in range(n):
                for i in range(length):
                    d = x[b, c, i] - m
                    squares += d * d
            v = squares / count
            mean[c] = m
            var[c] = v
            mc = mean[c]  # the stored (rounded) mean, as the NumPy path subtracts it
            scale = weight[c] / (v + eps) ** 0.5
            shift = bias[c]
            for b in range(n):
                for i in range(length):
                    y[b, c, i] = (x[b, c, i] - mc) * scale + shift

    @numba.njit(cache=True, nogil=True, fastmath=_REASSOCIATE)
    def batch_norm_backward(g, x, mean, invstd, weight, c0, c1, gx, gw, gb):  # pragma: no cover - compiled
        """``gb = sum g``, ``gw = sum g * xhat``, ``gx = a * (g - gb / count - xhat * gw / count)`` per channel,
        ``xhat = (x - mean) * invstd``, ``a = weight * invstd``."""
        n, _, length = x.shape
        count = n * length
        for c in range(c0, c1):
            m = mean[c]
            sum_g = 0.0
            sum_gx = 0.0
            for b in range(n):
                for i in range(length):
                    gv = g[b, c, i]
                    sum_g += gv
                    sum_gx += gv * (x[b, c, i] - m)
            s = invstd[c]
            gb[c] = sum_g
            gw[c] = sum_gx * s
            a = weight[c] * s
            k_x = -(a * s * (sum_gx * s) / count)
            k_0 = -(a * sum_g / count)
            for b in range(n):
                for i in range(length):  # centered first: precise when the mean is large against the spread
                    gx[b, c, i] = g[b, c, i] * a + (x[b, c, i] - m) * k_x + k_0

    return {"batch_norm_train": batch_norm_train, "batch_norm_backward": batch_norm_backward}
