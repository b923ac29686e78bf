"""Direct stride-1 convolutions (forward, input gradient) on ember's AVX-512 micro-kernel.

The products are those of ``ember/backends/cpu_direct_conv_kernels.py``: every tap's input is the padded
input plane shifted, so no im2col columns are built and the GEMM micro-kernel reads the data in place. Each
pass splits the images over ember's threads (``parallel_for``; the kernels release the GIL, and no BLAS call
is made, so no OpenBLAS thread is left spinning against them); each thread pads its images, runs the
kernel and writes its outputs. (The weight gradient of these layers runs in ``conv_indirect``, whose sums are
blocked over pixels: faster than this module's former direct weight kernel, docs/cpu-performance.md "conv13".)

conv.py uses it (``applicable``) for float32, one group, stride 1, on CPUs where the kernel exists (numba,
AVX-512F), for the layers where it measured faster than Winograd and im2col (docs/cpu-performance.md).
Non-finite weights take the other paths in the input gradient: the columns past the output width (computed,
then dropped) would turn an inf into NaN there, where PyTorch's convolution never multiplies them.

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 16, 5, 5), np.float32), np.ones((16, 16, 3, 3), np.float32)
    >>> y = forward(np, x, w, (1, 1, 1, 1), (1, 1)) if available(np) else np.full((1, 16, 5, 5), 144.0)
    >>> float(y[0, 0, 2, 2])
    144.0
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import cpu_hot_worker, native_kernel
from ember.backends.cpu_threads import parallel_for

MIN_FLOPS_PER_THREAD = 4e6  # a thread's share below this runs on the calling thread


def available(xp: Any) -> bool:
    """Whether the native direct kernels exist for ``xp`` (NumPy on an AVX-512 CPU with numba)."""
    return xp is np and native_kernel(xp, "conv_direct_forward") is not None


def _padded(x: Any, start: int, stop: int, padding: tuple, dilation: tuple, kh: int, kw: int) -> Any:
    """Images ``[start, stop)`` of ``x`` zero-padded (negative padding crops), float32, contiguous."""
    top, bottom, left, right = padding
    part = x[start:stop, :, max(0, -top):x.shape[2] - max(0, -bottom), max(0, -left):x.shape[3] - max(0, -right)]
    top, bottom, left, right = (max(0, p) for p in padding)
    h, w = part.shape[2] + top + bottom, part.shape[3] + left + right
    out = np.empty((stop - start, x.shape[1], h, w), np.float32)
    if top or bottom or left or right:  # zero only the borders
        out[:, :, :top] = 0
        out[:, :, h - bottom:] = 0
        out[:, :, top:h - bottom, :left] = 0
        out[:, :, top:h - bottom, w - right:] = 0
    out[:, :, top:h - bottom, left:w - right] = part
    return out


def _split(fn: Any, n: int, flops: float) -> None:
    parallel_for(fn, n, max(1, int(MIN_FLOPS_PER_THREAD // max(1.0, flops / max(1, n))) + 1))


def _correlate(x: Any, a: Any, a_strides: tuple, a_taps: Any, rows: int, padding: tuple, dilation: tuple,
               kh: int, kw: int) -> Any:
    """``y[n, r] = sum_{t, k} A_t[r, k] * xpad[n, k, shifted by tap t]``, (N, rows, OH, OW): the forward
    (A the weights) and the input gradient (A the flipped, transposed weights) alike."""
    forward = native_kernel(np, "conv_direct_forward")
    n, c = x.shape[:2]
    hp = x.shape[2] + padding[0] + padding[1]
    wp = x.shape[3] + padding[2] + padding[3]
    oh, ow = hp - dilation[0] * (kh - 1), wp - dilation[1] * (kw - 1)
    y = np.empty((n, rows, oh, ow), np.float32)
    p_total = (oh - 1) * wp + ow  # the last row's dropped columns are not computed: no read past the plane
    b_taps = np.array([i * dilation[0] * wp + j * dilation[1] for i in range(kh) for j in range(kw)], np.int64)
    sai, sak = a_strides

    def run(start: int, stop: int) -> None:
        xpad = _padded(x, start, stop, padding, dilation, kh, kw)
        out = np.empty((stop - start, rows, oh, wp), np.float32)
        forward(0, stop - start, rows, c, p_total, a.ctypes.data, sai, sak, a_taps, xpad.ctypes.data, c * hp * wp,
                hp * wp, b_taps, out.ctypes.data, rows * oh * wp, oh * wp)
        y[start:stop] = out[:, :, :, :ow]

    _split(run, n, 2.0 * n * rows * c * kh * kw * oh * wp)
    return y


def forward(xp: Any, x: Any, w: Any, padding: tuple, dilation: tuple) -> Any:
    """The stride-1 convolution of float32 ``x`` (N, C, H, W) with ``w`` (O, C, kh, kw), NCHW."""
    o, c, kh, kw = w.shape
    # A_t (O, C) from w laid out (kh, kw, C, O): a tile's 12 broadcasts per k are neighbours (one cache line);
    # through w's own strides they were 12 lines apart (the forward of MNIST's conv2 ran ~6% slower)
    a = np.ascontiguousarray(np.asarray(w, np.float32).transpose(2, 3, 1, 0))
    taps = np.arange(kh * kw, dtype=np.int64) * (c * o)
    return _correlate(x, a, (1, o), taps, o, padding, dilation, kh, kw)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x``: ``g`` padded by ``d*(k-1) - p`` on each side, correlated with the kernel
    flipped and transposed (``A_t[c, o] = w[o, c, kh-1-i, kw-1-j]``)."""
    o, c, kh, kw = w.shape
    a = np.ascontiguousarray(np.asarray(w, np.float32).transpose(2, 3, 0, 1))  # (kh, kw, O, C): A_t's rows neighbours
    taps = np.array([(kh - 1 - i) * kw + (kw - 1 - j) for i in range(kh) for j in range(kw)], np.int64) * (o * c)
    dh, dw = dilation
    pads = (dh * (kh - 1) - padding[0], dh * (kh - 1) - padding[1], dw * (kw - 1) - padding[2],
            dw * (kw - 1) - padding[3])
    gx = _correlate(g, a, (1, c), taps, c, pads, dilation, kh, kw)
    assert gx.shape == tuple(input_shape), (gx.shape, input_shape)
    return gx



def shallow_applicable(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, dilation: tuple, groups: int,
                       dtype: Any) -> bool:
    """Whether the forward runs ``conv3x3_shallow_forward``: NumPy float32 with the kernel (numba), one group, one
    input channel, a 3x3 kernel at stride 1 without dilation (MNIST's conv1), where im2col's GEMMs have K = 9."""
    return (xp is np and groups == 1 and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and tuple(w_shape[2:]) == (3, 3) and w_shape[1] == 1 and x_shape[1] == 1
            and np.dtype(dtype) == np.float32 and native_kernel(xp, "conv3x3_shallow_weight") is not None)


def shallow_forward(x: Any, w: Any, bias: Any, padding: tuple) -> Any:
    """The 3x3 stride-1 forward of a shallow layer (``shallow_applicable``), the bias (or None) added in the kernel:
    images shared out over ember's threads, each thread padding its images and writing its outputs."""
    n, c, h, width = x.shape
    o = w.shape[0]
    oh, ow = h + padding[0] + padding[1] - 2, width + padding[2] + padding[3] - 2
    y = np.empty((n, o, oh, ow), np.float32)
    w32 = np.ascontiguousarray(w, dtype=np.float32)
    b32 = np.zeros(o, np.float32) if bias is None else np.ascontiguousarray(bias, dtype=np.float32)
    if _hot_shallow(n, "forward", (x, padding), (w32, b32, y), bias is not None, (n, o, oh, ow)):
        return y
    kernel = native_kernel(np, "conv3x3_shallow_forward")

    def run(start: int, stop: int) -> None:
        kernel(_padded(x, start, stop, padding, (1, 1), 3, 3), w32, b32, bias is not None, y[start:stop])

    _split(run, n, 2.0 * n * o * c * 9 * oh * ow)
    return y


HOT_MIN_IMAGES = 8  # MNIST's batches of 64 (0.6 ms a pass on one thread) gain; a few images would not


def _hot_shallow(n: int, kind: str, padded_from: tuple, arrays: tuple, has_bias: bool, sizes: tuple) -> bool:
    """Images ``[0, n/2)`` here and the rest on the hot worker (``cpu_hot_worker.split_call_into``, woken if it
    sleeps: each half is ~0.3 ms) for ``cpu_shallow_conv_kernels``' range function ``kind``; False, nothing done, where
    the worker is off or busy. The cut is where ember's pool cuts the images for two threads, so a weight gradient's
    two float64 totals (``arrays[1]``, (2, O, 9)) are the pool's two parts on two threads: the same bits."""
    shallow = native_kernel(np, "hot_shallow")
    if shallow is None or n < HOT_MIN_IMAGES or not cpu_hot_worker.available():
        return False
    x, padding = padded_from
    xpad = _padded(x, 0, n, padding, (1, 1), 3, 3)
    words = np.zeros(shallow.WORDS, np.int64)
    words[shallow.XPAD] = xpad.ctypes.data
    words[shallow.SECOND:shallow.OUT + 1] = [a.ctypes.data for a in arrays] + [0] * (3 - len(arrays))
    words[shallow.HAS_BIAS] = int(has_bias)
    words[shallow.N:shallow.WP + 1] = (*sizes, xpad.shape[2], xpad.shape[3])
    cut = n // 2
    own, other = (0, cut, words.ctypes.data), (cut, n, words.ctypes.data)
    return cpu_hot_worker.split_call_into(shallow.address(kind), own, other, wake_split=True)


def shallow_weight_grad(x: Any, g: Any, weight_shape: tuple, padding: tuple) -> Any:
    """The weight gradient of ``shallow_forward``'s layers (``x`` finite): each thread sums its images into its own
    float64 (O, 9) total, the totals added in image order and rounded once."""
    n = x.shape[0]
    _, o, oh, ow = g.shape
    g32 = np.ascontiguousarray(g, dtype=np.float32)
    totals = np.zeros((2, o, 9))
    if _hot_shallow(n, "weight", (x, padding), (g32, totals), False, (n, o, oh, ow)):
        return (totals[0] + totals[1]).astype(np.float32).reshape(weight_shape)  # the pool's parts, in image order
    kernel = native_kernel(np, "conv3x3_shallow_weight")
    parts: dict[int, Any] = {}

    def run(start: int, stop: int) -> None:
        total = np.zeros((o, 9))
        kernel(_padded(x, start, stop, padding, (1, 1), 3, 3), g32[start:stop], total)
        parts[start] = total

    _split(run, n, 2.0 * n * o * 9 * oh * ow)
    total = parts[0]
    for key in sorted(parts)[1:]:
        total += parts[key]
    return total.astype(np.float32).reshape(weight_shape)
