"""Convolution primitives (2-D; 1-D convolutions run as 2-D with a height of 1).

Three op records close under differentiation, so gradients of any order stay convolutions:

* ``conv2d(x, w)``                   the forward, im2col + one batched matmul;
* ``conv2d_input_grad(g, w)``        its adjoint in ``x`` (a transposed convolution), matmul + col2im;
* ``conv2d_weight_grad(x, g)``       its adjoint in ``w``, im2col + matmul summed over the batch.

Each is bilinear in its two inputs, and each one's vjp is written with the other two.
All share the attrs ``stride=(sh, sw)``, ``padding=(top, bottom, left, right)``,
``dilation=(dh, dw)``, ``groups``; the adjoints add the shape they produce.

Example:
    >>> import ember
    >>> from ember.nn import functional as F
    >>> F.conv2d(ember.ones(1, 1, 4, 4), ember.ones(2, 1, 3, 3), padding=1).shape
    ember.Size([1, 2, 4, 4])
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from ember import _config
from ember.backends import cpu_blas, native_kernel
from ember.backends.cpu_blas import blas_for
from ember.backends.cpu_mkl import xp_matmul
from ember.backends.cpu_threads import num_threads, parallel_for, split_channels
from ember.ops import conv_geometry, conv_im2col as im2col, conv_per_image as per_image
from ember.ops import conv_winograd as winograd
from ember.ops import conv_direct as direct
from ember.ops import conv_indirect as indirect
from ember.ops import conv_unrolled as unrolled
from ember.ops import conv_tap_sum as tap_sum
from ember.ops import cnn_halves, cost, dispatch
from ember.ops.registry import OPS, OpDef, Spec, register
from ember.ops import batching
from ember.onnx import emitters as to_onnx
from ember.amp.policy import autocast_policy
from ember.ops.conv_dtypes import conv_other_dtypes
from ember.autograd.node import named_backward


# ---- geometry and im2col (array-level helpers, written against xp) ---------------------------
out_size = conv_geometry.out_size
_tap_range = conv_geometry.tap_range


def _live_taps(size: int, out: int, k: int, stride: int, pad: int, dilation: int) -> tuple[int, int]:
    """The kernel taps ``[first, stop)`` along one axis that read at least one real input element
    for some output position; the others multiply only padding. They are contiguous."""
    live = [i for i in range(k) if _tap_range(size, out, i * dilation, stride, pad) is not None]
    return (live[0], live[-1] + 1) if live else (0, 0)


def _trim(x_hw: tuple, w_hw: tuple, stride: tuple, padding: tuple, dilation: tuple) -> tuple | None:
    """Drop the kernel rows and columns that read only padding: ``(rows, cols, padding)`` of the
    equivalent smaller convolution (the same output size; a padding may come out negative, which
    only crops), or None when every tap is live.

    A 3x3, pad 1 convolution on a 1x1 map (ResNet-18's last stage on 32x32 images) is then a 1x1
    convolution: 9x less GEMM work and no im2col. On a 2x2 map with stride 2, 4 of 9 taps remain.
    """
    (h, w), (kh, kw) = x_hw, w_hw
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(w, kw, stride[1], padding[2], padding[3], dilation[1])
    r0, r1 = _live_taps(h, oh, kh, stride[0], padding[0], dilation[0])
    c0, c1 = _live_taps(w, ow, kw, stride[1], padding[2], dilation[1])
    if (r0, r1, c0, c1) == (0, kh, 0, kw) or r1 == r0 or c1 == c0:
        return None  # all live, or (a degenerate geometry) none: the general path handles both
    pads = (padding[0] - r0 * dilation[0], padding[1] - (kh - r1) * dilation[0],
            padding[2] - c0 * dilation[1], padding[3] - (kw - c1) * dilation[1])
    return slice(r0, r1), slice(c0, c1), pads


def _cols(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
    """The im2col matrix as (groups, C/groups*kh*kw, N*OH*OW), contiguous (one copy of the windows).

    Rows are (channel, tap) pairs and columns are (image, pixel) pairs, so the forward is one GEMM
    per group ``(O, K) @ (K, N*L)`` and the weight gradient one GEMM ``(O, N*L) @ (N*L, K)`` on a
    transposed view (BLAS takes the transpose for free). Filled tap by tap from the unpadded input,
    with only the padding borders zeroed: no padded copy of the input (10-20% faster than copying
    the windows of a padded input, more on small feature maps; docs/cpu-performance.md).
    """
    n, c, h, w = x.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(w, kw, stride[1], padding[2], padding[3], dilation[1])
    cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    im2col.fill_windows(x, lambda i, j: cols[:, i, j].transpose(1, 0, 2, 3), kh, kw, stride, padding, dilation, oh, ow)
    return cols.reshape(groups, (c // groups) * kh * kw, n * oh * ow)


# The weight gradient needs the same im2col matrix as the forward (the costliest copy of a conv);
# keep it, keyed by the input array, until that array dies. Autograd's version counters guarantee
# the saved input is unchanged when its weight gradient runs.
_COLS_MEMO: dict[int, tuple] = {}
_COLS_MEMO_LIMIT = 8


def _remember_cols(x: Any, key: tuple, cols: Any) -> None:
    xid = id(x)
    try:
        ref = weakref.ref(x, lambda _ref, xid=xid: _COLS_MEMO.pop(xid, None))
    except TypeError:  # an array type without weak references: no memo
        return
    _COLS_MEMO.pop(xid, None)
    _COLS_MEMO[xid] = (ref, key, cols)
    while len(_COLS_MEMO) > _COLS_MEMO_LIMIT:
        _COLS_MEMO.pop(next(iter(_COLS_MEMO)))


def _recall_cols(x: Any, key: tuple) -> Any:
    entry = _COLS_MEMO.get(id(x))
    if entry is not None and entry[0]() is x and entry[1] == key:
        return entry[2]
    return None


def _cols_cached(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple,
                 groups: int, remember: bool) -> Any:
    key = (kh, kw, stride, padding, dilation, groups, x.shape, x.dtype, x.strides)
    if remember:  # the forward: always fresh (the input may have changed since), then kept
        cols = _cols(xp, x, kh, kw, stride, padding, dilation, groups)
        _remember_cols(x, key, cols)
        return cols
    cols = _recall_cols(x, key)
    return cols if cols is not None else _cols(xp, x, kh, kw, stride, padding, dilation, groups)


def winograd_tile(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                  groups: int, dtype: Any) -> int:
    """The Winograd output tile (4 or 2) this convolution runs with, or 0 for im2col + GEMM.

    Measured per layer against im2col on ResNet-18 and the MNIST CNN (docs/cpu-performance.md,
    ``benchmarks/bench_conv_layers.py``): Winograd wins every 3x3 stride-1 layer with 16 or more
    channels each way. F(4x4, 3x3) does 4x fewer multiplies than im2col, F(2x2, 3x3) 2.25x fewer;
    F(4x4)'s transforms are only fast with the native (numba) kernels, and on maps smaller than
    4x4 its tiles are mostly padding, so it runs with those kernels on maps of 4x4 and more. Without
    them (the NumPy-only install) F(2x2) runs only on wide layers (``_numpy_winograd_pays``).
    float32 only: float64 callers asked for accuracy. ``EMBER_CONV_ALGORITHM``: ``auto`` (this
    rule), ``winograd2`` (F(2x2) at most: rounding within ~1.5x of im2col's; F(4x4)'s is ~20x
    larger, about 1e-5 of the output's largest value), ``im2col`` (never Winograd).
    """
    choice = _config.CONV_ALGORITHM
    if xp is not np:  # measured on the CPU only; a GPU backend brings its own convolutions
        return 0
    if choice == "im2col" or not winograd.applicable(w_shape, stride, padding, dilation, groups, dtype):
        return 0
    if np.dtype(dtype) != np.float32 or x_shape[1] < 16 or w_shape[0] < 16:
        return 0
    oh = out_size(x_shape[2], 3, 1, padding[0], padding[1], 1)
    ow = out_size(x_shape[3], 3, 1, padding[2], padding[3], 1)
    native = native_kernel(xp, "winograd_input") is not None
    if choice != "winograd2" and min(oh, ow) >= 4 and native:
        return 4
    if not native and not _numpy_winograd_pays(min(x_shape[1], w_shape[0]), min(oh, ow)):
        return 0
    return 2


def _numpy_winograd_pays(channels: int, side: int) -> bool:
    """Whether F(2x2) with NumPy's transforms (no numba) is kept over im2col on a layer with ``channels`` (the fewer
    of in and out) and output maps of ``side`` (unused: no map size decided it): its transforms are ~30 NumPy
    passes and its GEMMs small (a K of ``channels``), so narrow layers take im2col. Measured forward + backward, one
    thread, CPU time, on the Xeon (cliff21; Winograd / im2col, near idle): 16 -> 64 on 16x16 2.38, 16 -> 32 on
    16x16 1.90, 16 -> 16 on 32x32 1.62, 32 -> 64 on 14x14 1.72, 32 -> 32 on 28x28 1.43; 64 -> 64 on 8x8 1.13 and on
    32x32 1.05, 128 on 16x16 0.89, 256 on 8x8 0.94, 512 on 4x4 1.10, 64 on 56x56 0.86. From 64 channels the two are
    within ~10% near idle, and under load (17) im2col's columns (9x the input, written to and read from memory) lost
    more than Winograd's image chunks in cache (64 -> 64 on 8x8: 3.16x the numba kernels against 2.7x): Winograd."""
    return channels >= 64


FUSED_WINOGRAD_MIN_CHANNELS = 32


def fused_winograd_tile(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                        groups: int, dtype: Any) -> int:
    """The tile (2, or 4 with ``EMBER_CONV_ALGORITHM=winograd4``) the fused Winograd kernels run this layer with,
    or 0: float32, 3x3, stride 1, no dilation, one group, padding 0-2, ``FUSED_WINOGRAD_MIN_CHANNELS``+ channels each way
    (16-channel layers keep the indirect/direct kernels: K = 16 products ran the forward 1.3x slower), on CPUs with
    the kernels (``conv_winograd.fused_available``: numba, AVX-512F). Asked after the dense and unrolled layers,
    before the direct and indirect kernels, for all three passes.

    Why F(2x2) by default: its float32 error against a float64 reference is torch's (oneDNN's direct
    convolution's) order, 1.0-1.6x it on the forward and input gradient and below it on the weight gradient,
    where F(4x4)'s is 10-25x (ResNet-18's layer1, MNIST's conv2, layer2: docs/cpu-performance.md, "conv15").
    Measured per pass on one thread (Intel Xeon, AVX-512), against what ran before: ResNet-18's layer1 (64 -> 64 on
    8x8, batch 128), MNIST's conv2 (32 -> 64 on 14x14, batch 64), where the direct kernel ran at ~110 GFLOP/s
    against oneDNN's ~160 and the unfused Winograd's transforms took as long as its GEMMs."""
    choice = _config.CONV_ALGORITHM
    if (xp is not np or choice == "im2col" or np.dtype(dtype) != np.float32
            or min(x_shape[1], w_shape[0]) < FUSED_WINOGRAD_MIN_CHANNELS):
        return 0
    if not winograd.applicable(w_shape, stride, padding, dilation, groups, dtype) or not winograd.fused_available(xp):
        return 0
    return 4 if choice == "winograd4" else 2


DIRECT_MIN_WIDTH = 10  # output columns: each row also computes kw - 1 dropped ones (2 of 16 at 14 wide)
# Where the direct forward applies (stride 1, 16+ channels each way), the weight gradient runs indirect
# (``conv_indirect.weight_grad``, the sums blocked over 256 pixels) up to this many (input, output) channel pairs:
# one thread, 32 -> 64 on 14x14 (MNIST's conv2) 3.1 ms against the direct kernel's 3.6, 64 -> 64 on 28x28 9.9
# against 14.2, 128 -> 64 on 32x32 62 against 101; 128 -> 128 on 16x16 27 against Winograd's 22
# (docs/cpu-performance.md, "conv13").
INDIRECT_WEIGHT_MAX_PAIRS = 8192


def _direct(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, dilation: tuple, groups: int, dtype: Any) -> bool:
    """Whether the input gradient (and the forward, where ``_indirect`` does not take it: output rows under
    ``INDIRECT_MIN_WIDTH``) run as direct convolutions (``conv_direct``: ember's AVX-512
    micro-kernel on the padded input, no columns): float32, one group, stride 1, a kernel of 2+ taps, 16+
    channels each way, output rows of ``DIRECT_MIN_WIDTH``+ pixels, on CPUs with the kernel; not with
    ``EMBER_CONV_ALGORITHM=im2col``. Measured faster than Winograd F(4x4) and im2col on such layers (MNIST's
    conv2, 32 -> 64 on 14x14: forward 4.98 -> 2.93 ms, input gradient 5.53 -> 2.95 ms, one thread), slower
    on ResNet's 8x8 and smaller maps, where Winograd stays (docs/cpu-performance.md). The weight gradient
    runs indirect on such layers (``_indirect_weight``)."""
    if xp is not np or _config.CONV_ALGORITHM == "im2col" or groups != 1 or tuple(stride) != (1, 1):
        return False
    if np.dtype(dtype) != np.float32 or x_shape[1] < 16 or w_shape[0] < 16 or w_shape[2] * w_shape[3] < 2:
        return False
    return x_shape[3] - dilation[1] * (w_shape[3] - 1) >= DIRECT_MIN_WIDTH and direct.available(xp)


INDIRECT_MIN_WIDTH = 12  # output columns: each row also computes (kw - 1) * dw // sw dropped ones
# Stride-1 layers with this many output channels or more (and fewer than 16) run the indirect forward and input gradient;
# fewer take ``conv_tap_sum`` with or without the kernels (one thread, 64 x 64 x 32x32 input: 1 output channel
# forward 2.3 ms against the kernel's 5.1, input gradient 1.3 against 2.4; 8 channels on 32 x 28x28: the kernel's
# 3.2 and 2.1 ms against 5.1 and 4.0; docs/cpu-performance.md, "conv14").
INDIRECT_MIN_OUT_STRIDE1 = 8
TAP_SUM_MAX_OUT = 16  # output channels below which stride-1 layers with as many inputs or more run conv_tap_sum
INDIRECT_MIN_DEPTH = 16  # C*kh*kw: shorter sums store each output tile for too few multiply-adds
INDIRECT_WEIGHT_MIN_OUT = 32  # output channels: the weight gradient's columns, 32 to a tile


def _indirect_base(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                   groups: int, dtype: Any) -> bool:
    """What every indirect pass needs: NumPy float32, one group, the kernels (numba, AVX-512F), not
    ``EMBER_CONV_ALGORITHM=im2col``, and output rows of ``INDIRECT_MIN_WIDTH``+ pixels."""
    if xp is not np or _config.CONV_ALGORITHM == "im2col" or groups != 1 or np.dtype(dtype) != np.float32:
        return False
    ow = out_size(x_shape[3], w_shape[3], stride[1], padding[2], padding[3], dilation[1])
    return ow >= INDIRECT_MIN_WIDTH and indirect.available(xp)


def _indirect(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int,
              dtype: Any) -> bool:
    """Whether the forward runs as an indirect convolution on the input's phases (``conv_indirect``: ember's
    AVX-512 micro-kernel reading shifted rows of the input through a table, no im2col columns), asked after
    ``_direct``: 16+ output channels (the tiles' rows) and sums ``INDIRECT_MIN_DEPTH``+ deep (``_indirect_base``
    besides). Measured against what ran before (one thread): ResNet's 7x7/2 stem 9.7 -> 5.6 ms; a DCGAN
    discriminator's 4x4/2 64 -> 128 on 32x32 73 -> 29; 3 -> 16 on 32x32 1.4 -> 0.8. Not: one input channel with
    a 3x3 kernel (9-deep sums: MNIST's 1 -> 32 per-image im2col 0.75 against 0.91; 1 -> 16 stride 2 0.17 against
    0.22); maps of 8x8 and less (ResNet-18's stride-2 layers
    on 32x32 images), where the dropped columns are a third of each row; and layers with fewer output channels,
    where the kernels measured 4-28x faster than the NumPy-only install's per-image im2col (a generator's 64 -> 1
    output layer forward 27 -> 4.0 ms, input gradient 73 -> 2.6): a cliff the NumPy path must close first
    (docs/cpu-performance.md, "conv13")."""
    few = tuple(stride) == (1, 1) and w_shape[0] >= INDIRECT_MIN_OUT_STRIDE1  # else tap_sum's NumPy (1.6x slower)
    if (w_shape[0] < 16 and not few) or w_shape[1] * w_shape[2] * w_shape[3] < INDIRECT_MIN_DEPTH:
        return False
    return _indirect_base(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype)


def _indirect_input(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                    groups: int, dtype: Any) -> bool:
    """Whether the input gradient of a strided layer runs as ``conv_indirect.input_grad`` (each phase of the
    input a stride-1 indirect convolution of ``g``; also ``conv_transpose2d``'s forward): no dilation, 16+
    channels each way, input rows of 16+ pixels per phase, ``_indirect_base``. Measured (one thread): 4x4/2
    64 -> 128 on 32x32 78 -> 43 ms (torch 27); not on 16x16 with 128 channels (40 against 43) nor to 3
    channels (8 against 23). Also stride-1 layers with ``INDIRECT_MIN_OUT_STRIDE1`` to 15 output channels (32 -> 8
    on 28x28: 2.1 ms against ``conv_tap_sum``'s 4.0)."""
    if (tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and x_shape[1] >= 16
            and TAP_SUM_MAX_OUT > w_shape[0] >= INDIRECT_MIN_OUT_STRIDE1):  # few outputs: else conv_tap_sum's
        return x_shape[3] >= 16 and _indirect_base(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype)
    if tuple(dilation) != (1, 1) or tuple(stride) == (1, 1) or x_shape[1] < 16 or w_shape[0] < 16:
        return False
    return x_shape[3] // stride[1] >= 16 and _indirect_base(xp, x_shape, w_shape, stride, padding, dilation,
                                                            groups, dtype)


def _indirect_weight(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                     groups: int, dtype: Any) -> bool:
    """Whether the weight gradient runs as ``conv_indirect.weight_grad`` (``x`` must be finite as well):
    ``INDIRECT_WEIGHT_MIN_OUT``+ output channels (its columns: 16 fill half of each vector, and measured a tie
    or slower) and ``_indirect_base``; at stride 1 with 16+ input channels (the direct
    path's layers) only up to ``INDIRECT_WEIGHT_MAX_PAIRS`` channel pairs. Measured (one thread): the stem 7.4 ->
    5.0 ms, MNIST's conv1 1.04 -> 0.71 and conv2 3.6 -> 3.1 (the direct kernel), 128 -> 64 on 32x32 101 -> 62."""
    if w_shape[0] < INDIRECT_WEIGHT_MIN_OUT or not _indirect_base(xp, x_shape, w_shape, stride, padding, dilation,
                                                                   groups, dtype):
        return False
    if tuple(stride) == (1, 1) and _direct(xp, _padded_shape(x_shape, padding), w_shape, stride, dilation, groups,
                                           dtype):
        return w_shape[0] * w_shape[1] <= INDIRECT_WEIGHT_MAX_PAIRS
    return True


def _shallow(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int,
             dtype: Any) -> bool:
    """Whether the forward and the weight gradient run ``conv_direct.shallow_forward`` / ``shallow_weight_grad`` (one
    input channel, 3x3, stride 1: MNIST's conv1; the nine taps as shifted views of the padded plane, the bias added in
    the kernel), not with ``EMBER_CONV_ALGORITHM=im2col``. Like im2col the forward multiplies the padding (an inf
    weight gives NaN there, as im2col's and torch's float64 do). Measured against per-image im2col (forward) and the
    indirect weight gradient: docs/cpu-performance.md, "conv17"."""
    if _config.CONV_ALGORITHM == "im2col" or min(padding) < 0:
        return False
    oh = out_size(x_shape[2], w_shape[2], stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x_shape[3], w_shape[3], stride[1], padding[2], padding[3], dilation[1])
    return oh > 0 and ow > 0 and direct.shallow_applicable(xp, x_shape, w_shape, stride, dilation, groups, dtype)


def _unrolled(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int,
              dtype: Any) -> bool:
    """Whether all three passes run as one GEMM with the unrolled kernel (``conv_unrolled``): maps so small that
    every output pixel's window covers the whole input (ResNet-18's layer3 on 32x32 images: 3x3, pad 1, 2x2 maps),
    NumPy float32/float64, not ``EMBER_CONV_ALGORITHM=im2col``. Asked after the dense layer. Measured against
    Winograd F(2x2) on that layer (one thread): forward 4.0 -> 2.2 ms, input gradient 3.2 -> 2.0, weight
    gradient 3.9 -> 2.2 (docs/cpu-performance.md, "conv14")."""
    if xp is not np or _config.CONV_ALGORITHM == "im2col" or np.dtype(dtype) not in (np.float32, np.float64):
        return False
    return unrolled.applicable(tuple(x_shape[2:]), tuple(w_shape), stride, padding, dilation, groups)


def _tap_sum(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, groups: int, dtype: Any) -> bool:
    """Whether a layer with few output channels runs column-free (``conv_tap_sum``: products per tap on the input as
    it is, no im2col columns): NumPy float32/float64, one group, stride 1, a kernel of 2+ taps, fewer than
    ``TAP_SUM_MAX_OUT`` output channels and no more than input channels; asked after the native kernels. Measured
    against the per-image im2col it replaces (one thread): a GAN generator's 64 -> 1 output layer on 32x32 (batch 64)
    forward 28.8 -> 2.3 ms, input gradient 74 -> 1.3, weight gradient 30 -> 2.6 (torch: 9.7, 7.4, 8.2); 64 -> 3 on
    64x64 148 -> 17, 150 -> 16, 158 -> 20 (docs/cpu-performance.md, "conv14")."""
    if xp is not np or groups != 1 or tuple(stride) != (1, 1) or np.dtype(dtype) not in (np.float32, np.float64):
        return False
    return w_shape[0] < TAP_SUM_MAX_OUT and w_shape[0] <= x_shape[1] and w_shape[2] * w_shape[3] >= 2


def _finite(xp: Any, *arrays: Any) -> bool:
    """Whether every value is finite (a sum is, unless a value is inf/NaN or the sum overflows).

    Winograd mixes a whole tile before multiplying, so one inf turns its tile's outputs into NaN
    where a direct convolution gives inf in only the windows that read it; such inputs take
    im2col, which matches PyTorch at inf and NaN. One reduction: ~5% of the convolution, shared out over
    ember's threads by blocks of the first axis (ResNet-18's 512 x 512 x 3x3 weights: ~0.4 ms on one thread,
    three times a step on the calling thread before)."""
    return all(_finite_one(xp, a) for a in arrays)


def _finite_one(xp: Any, a: Any) -> bool:
    if xp is not np or a.ndim == 0 or a.size < FINITE_SPLIT_ELEMENTS:
        return bool(xp.isfinite(a.sum()))
    sums: dict[int, Any] = {}

    def block(start: int, stop: int) -> None:
        sums[start] = a[start:stop].sum()

    split_channels(xp, block, a.shape[0], a.size // a.shape[0])
    return all(bool(np.isfinite(total)) for total in sums.values())


FINITE_SPLIT_ELEMENTS = 1 << 18  # smaller arrays are summed on the calling thread


def _winograd_key(x: Any, padding: tuple, m: int) -> tuple:
    return ("winograd", m, padding, x.shape, x.dtype, x.strides)


def _winograd_forward(xp: Any, x: Any, w: Any, padding: tuple, m: int) -> Any:
    """The Winograd forward, or None when ``x`` holds inf/NaN; its input transform is kept for the
    weight gradient like im2col's columns (so a kept transform also says ``x`` was finite)."""
    out = winograd.forward(xp, x, w, padding, m, finite_only=True)
    if out is None:
        return None
    if out[1] is not None:  # the NumPy-only passes keep none (their weight gradient remakes V chunk by chunk)
        _remember_cols(x, _winograd_key(x, padding, m), out[1])
    return out[0]


def _winograd_input(xp: Any, x: Any, padding: tuple, m: int) -> Any:
    """The forward's Winograd input transform: the kept one, else made anew; None when ``x``
    holds inf/NaN."""
    v = _recall_cols(x, _winograd_key(x, padding, m))
    if v is not None:
        return v
    if not _finite(xp, x):
        return None
    # the NumPy-only weight gradient makes V chunk by chunk itself: an empty marker, not the whole batch's V
    return xp.empty((0, 0, 0), x.dtype) if winograd._numpy_only(xp) else winograd.input_transform(xp, x, padding, m)


def _whole_window(x_hw: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                  groups: int) -> bool:
    """Whether the convolution is a dense layer: one output pixel whose window is exactly the
    input (no padding read, no dilation). Then ``x`` (N, C*H*W) @ ``w`` (O, C*kh*kw)^T is the whole
    convolution, with no columns to build. ResNet-18's stride-2 3x3 on a 2x2 map becomes one after
    its padding-only taps are dropped; so does every 3x3, pad-1 convolution of a 1x1 map."""
    (h, w), (kh, kw) = x_hw, w_shape[2:]
    return (groups == 1 and (kh, kw) == (h, w) and tuple(dilation) == (1, 1) and padding[0] == padding[2] == 0
            and padding[1] < stride[0] and padding[3] < stride[1])


def _padded_shape(shape: tuple, padding: tuple) -> tuple:
    """An (N, C, H, W) shape with the padding added (what ``_direct`` measures the output width on)."""
    return (shape[0], shape[1], shape[2] + padding[0] + padding[1], shape[3] + padding[2] + padding[3])


def _matrix(xp: Any, a: Any) -> Any:
    """``a`` (N, ...) as an (N, -1) matrix: a view where the layout allows, else one copy shared out over ember's
    threads by rows (the 2x2 live taps of ResNet-18's layer4.0 weights, 512 x 256 x 2x2, on the calling thread
    took about as long as the whole dense product on two)."""
    if xp is np:
        try:
            return np.reshape(a, (a.shape[0], -1), copy=False)
        except ValueError:  # not expressible as a view
            out = np.empty((a.shape[0], int(np.prod(a.shape[1:]))), dtype=a.dtype)
            split_channels(xp, lambda r0, r1: out[r0:r1].__setitem__(..., a[r0:r1].reshape(r1 - r0, -1)),
                           a.shape[0], out.shape[1])
            return out
    return xp.reshape(a, (a.shape[0], -1))


DENSE_PANEL = 32  # output columns per unit of work when a dense layer's product is shared out over threads


def _dense(xp: Any, a: Any, b: Any, shape: tuple) -> Any:
    """``(a @ b).reshape(shape)`` in ``a``'s dtype (bfloat16 products come back float32: round once).

    Under the BLAS split (float32 NumPy arrays, ``cpu_blas.available()``) the output's columns are shared out
    over ember's threads in panels of 32, each product on its thread alone (ember's GEMM where it takes the
    shape, else BLAS held to one thread): one call of NumPy's threaded BLAS would wake OpenBLAS's workers,
    which then spin against ember's threads through the passes that follow (ResNet-18's last stage on 32x32
    images runs dense: 9x its one-thread CPU time on the calling thread under load with BLAS's threads)."""
    if xp is np and a.dtype == np.float32 and b.dtype == np.float32 and num_threads() > 1 and cpu_blas.available():
        out = np.empty((a.shape[0], b.shape[1]), np.float32)

        def columns(p0: int, p1: int) -> None:
            j0, j1 = p0 * DENSE_PANEL, min(b.shape[1], p1 * DENSE_PANEL)
            im2col.matmul_into(xp, a, b[:, j0:j1], out[:, j0:j1])

        panels = -(-b.shape[1] // DENSE_PANEL)
        blas_for(columns, panels, im2col.min_items(2.0 * a.shape[0] * a.shape[1] * DENSE_PANEL), xp)
        return out.reshape(shape)
    out = xp_matmul(xp, a, b)
    return (out if out.dtype == a.dtype else out.astype(a.dtype)).reshape(shape)


PER_IMAGE_MIN_PIXELS = 128


def _per_image(groups: int, oh: int, ow: int) -> bool:
    """Whether im2col runs per image (``conv_per_image``: no transposing copies, one GEMM per image)
    rather than batch-wide: one group, and maps of at least ``PER_IMAGE_MIN_PIXELS`` outputs, below
    which per-image GEMMs are too small for BLAS (measured: docs/cpu-performance.md)."""
    return groups == 1 and oh * ow >= PER_IMAGE_MIN_PIXELS


def algorithm(xp: Any, x_shape: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
              groups: int, dtype: Any) -> str:
    """The algorithm the forward runs with for these shapes (finite inputs), as benchmarks print it:
    ``dense``, ``direct``, ``indirect``, ``winograd F4`` / ``winograd F2``, ``per-image``, ``im2col NHWC`` or ``grouped``,
    after ``trim+`` when padding-only taps are dropped first.

    Example:
        >>> algorithm(np, (8, 64, 8, 8), (64, 64, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1, np.float32)
        'im2col NHWC'
    """
    trim = _trim(tuple(x_shape[2:]), tuple(w_shape[2:]), stride, padding, dilation)
    prefix = ""
    if trim is not None:
        w_shape = tuple(w_shape[:2]) + (trim[0].stop - trim[0].start, trim[1].stop - trim[1].start)
        padding, prefix = trim[2], "trim+"
    if _whole_window(tuple(x_shape[2:]), w_shape, stride, padding, dilation, groups):
        return prefix + "dense"
    if not prefix and _shallow(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return "shallow 3x3"
    if _unrolled(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return prefix + "unrolled"
    m = fused_winograd_tile(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype)
    if m:
        return f"{prefix}winograd F{m} fused"
    if _indirect(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype):
        return prefix + "indirect"
    if _direct(xp, _padded_shape(x_shape, padding), w_shape, stride, dilation, groups, dtype):
        return prefix + "direct"
    if _tap_sum(xp, x_shape, w_shape, stride, groups, dtype):
        return prefix + "tap-sum"
    m = winograd_tile(xp, x_shape, w_shape, stride, padding, dilation, groups, dtype)
    if m:
        return f"{prefix}winograd F{m}"
    if groups != 1:
        return prefix + "grouped"
    oh = out_size(x_shape[2], w_shape[2], stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x_shape[3], w_shape[3], stride[1], padding[2], padding[3], dilation[1])
    return prefix + ("per-image" if _per_image(groups, oh, ow) else "im2col NHWC")


def _per_image_key(kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple, x: Any) -> tuple:
    return ("per_image", kh, kw, stride, padding, dilation, x.shape, x.dtype, x.strides)


def _im2col_key(kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple, x: Any) -> tuple:
    return ("im2col", kh, kw, stride, padding, dilation, x.shape, x.dtype, x.strides)


def _gemm(xp: Any, a: Any, b: Any) -> Any:
    """Per-group products (G, M, K) @ (G, K, N). One group runs as a 2-D GEMM, where BLAS takes
    transposed views for free; NumPy's stacked matmul would crawl on those strided layouts."""
    if a.shape[0] == 1:
        out = xp_matmul(xp, a[0], b[0])[None]
    else:
        out = xp_matmul(xp, xp.ascontiguousarray(a), xp.ascontiguousarray(b))
    # bfloat16 (ml_dtypes) products come back as float32: round once to the inputs' dtype, as PyTorch.
    return out if out.dtype == a.dtype else out.astype(a.dtype)


def _to_channels_first(a: Any, groups: int, per_group: int) -> Any:
    """(N, C, H, W) -> (G, C/G, N*H*W): channels lead, images and pixels flattened behind them."""
    n = a.shape[0]
    return a.transpose(1, 0, 2, 3).reshape(groups, per_group, n * a.shape[2] * a.shape[3])


def _cudnn(xp: Any, name: str, *args: Any) -> Any:
    """The backend's cuDNN kernel's result, or None (no such kernel here, or cuDNN refused the signature)."""
    kernel = native_kernel(xp, name)
    return None if kernel is None else kernel(*args)


def _dropped(xp: Any, shape: tuple, trim: tuple) -> Any:
    """A boolean (kh, kw) mask of the taps ``_trim`` dropped."""
    mask = xp.ones(shape, dtype=bool)
    mask[trim[0], trim[1]] = False
    return mask


def _conv_impl(xp: Any, x: Any, w: Any, *bias: Any, stride: tuple, padding: tuple, dilation: tuple,
               groups: int) -> Any:
    """The forward; an optional bias (O,) is added in place into the convolution's fresh output: one
    pass less than ``out + bias`` and no second (N, O, H, W) array (MNIST's first layer: 0.32 -> 0.11 ms)."""
    if xp is not np:  # a GPU: cuDNN (ember/backends/cuda_cudnn.py) unless it refuses this signature
        out = _cudnn(xp, "cudnn_conv2d", x, w, stride, padding, dilation, groups)
        if out is not None:
            if bias:
                _add_bias(xp, out, bias[0])
            return out
    trim = _trim(x.shape[2:], w.shape[2:], stride, padding, dilation)
    if trim is None and _shallow(xp, x.shape, w.shape, stride, padding, dilation, groups, x.dtype):
        return direct.shallow_forward(x, w, bias[0] if bias else None, padding)  # the bias added in the kernel
    if trim is None:
        out = _conv_live(xp, x, w, stride, padding, dilation, groups)
    else:
        out = _conv_live(xp, x, w[:, :, trim[0], trim[1]], stride, trim[2], dilation, groups)
        if not _dropped_finite(xp, w, trim):  # as torch: 0 * inf = NaN in every output of the channel
            dropped = w[:, :, _dropped(xp, w.shape[2:], trim)]  # (O, C, taps): each multiplies only padding
            out[:, ~xp.isfinite(dropped).all(axis=(1, 2))] = xp.nan
    if bias:
        _add_bias(xp, out, bias[0])
    return out


BIAS_SPLIT_ELEMENTS = 1 << 17  # output elements per thread below which the bias add stays on the calling thread


def _add_bias(xp: Any, out: Any, bias: Any) -> None:
    """``out += bias`` per output channel, in place, images shared out over ember's threads for large NumPy
    outputs (the add is a memory pass the calling thread otherwise makes alone while the other core waits: MNIST's
    64 x 32 x 28x28 conv1 output, 0.3 ms a step). The same bits as one broadcast add."""
    if xp is np and out.size >= cnn_halves.HOT_MIN_ELEMENTS and cnn_halves.add_bias(xp, out, bias):
        return  # planes in halves on the hot worker (mnist22)
    b = bias.reshape(1, -1, 1, 1)
    per_image = out[0].size if out.ndim == 4 and out.shape[0] else 0
    if xp is not np or not per_image or out.size < 2 * BIAS_SPLIT_ELEMENTS or num_threads() < 2:
        out += b
        return

    def add(i0: int, i1: int) -> None:
        part = out[i0:i1]
        part += b

    parallel_for(add, out.shape[0], max(1, -(-BIAS_SPLIT_ELEMENTS // per_image)))


def _dropped_finite(xp: Any, w: Any, trim: tuple) -> bool:
    """Whether the weights of the dropped taps are all finite. First one contiguous sum over all of
    ``w`` (finite only when every value is; gathering the dropped taps with a mask, or summing
    their strided blocks, cost more than the trimmed convolution itself on ResNet's 1x1 maps);
    when it is not finite (or overflowed), the exact check on the dropped taps decides."""
    if _finite(xp, w):
        return True
    return bool(xp.isfinite(w[:, :, _dropped(xp, w.shape[2:], trim)]).all())


def _conv_live(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Any:
    """The forward once every tap reads some input (``_conv_impl`` dropped the others)."""
    if _whole_window(x.shape[2:], w.shape, stride, padding, dilation, groups):
        return _dense(xp, xp.reshape(x, (x.shape[0], -1)), _matrix(xp, w).T, (x.shape[0], w.shape[0], 1, 1))
    # an inf weight would miss the 0 * inf = NaN torch makes where its tap reads padding: such weights go on
    if _unrolled(xp, x.shape, w.shape, stride, padding, dilation, groups, x.dtype) and _finite(xp, w):
        return unrolled.forward(xp, x, w, stride, padding)
    m = fused_winograd_tile(xp, x.shape, w.shape, stride, padding, dilation, groups, x.dtype)
    if m and _finite(xp, w):  # x is checked by each thread on its images
        out = winograd.fused_forward(x, w, padding, m, finite_only=True)
        if out is not None:
            return out
    # the indirect forward before the direct one: one K loop of C*kh*kw in registers per tile instead of a tile load
    # and store per tap (one thread, Intel Xeon: 64 x 16 x 16x16 -> 64 3.4 ms against 4.6, 32 x 16 x 56x56 -> 16
    # 6.0 against 7.5, 64 x 24 x 14x14 -> 48 3.0 against 3.7; on the Zen 5 3-15%: docs/cpu-performance.md, "conv15")
    if _indirect(xp, x.shape, w.shape, stride, padding, dilation, groups, x.dtype):
        return indirect.forward(xp, x, w, stride, padding, dilation)
    if _direct(xp, _padded_shape(x.shape, padding), w.shape, stride, dilation, groups, x.dtype):
        return direct.forward(xp, x, w, padding, dilation)
    # an inf weight would miss the 0 * inf = NaN torch makes where its tap reads padding: such weights go on
    if _tap_sum(xp, x.shape, w.shape, stride, groups, x.dtype) and _finite(xp, w):
        return tap_sum.forward(xp, x, w, padding, dilation)
    m = winograd_tile(xp, x.shape, w.shape, stride, padding, dilation, groups, x.dtype)
    if m and _finite(xp, w):  # x is checked by each thread on its images
        out = _winograd_forward(xp, x, w, padding, m)
        if out is not None:
            return out
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    oh = out_size(x.shape[2], kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x.shape[3], kw, stride[1], padding[2], padding[3], dilation[1])
    if groups == 1:  # both layouts split the images over ember's threads; the columns are kept
        layout, key = ((per_image, _per_image_key) if _per_image(groups, oh, ow) else (im2col, _im2col_key))
        out, cols = layout.forward(xp, x, w, stride, padding, dilation)
        _remember_cols(x, key(kh, kw, stride, padding, dilation, x), cols)
        return out
    cols = _cols_cached(xp, x, kh, kw, stride, padding, dilation, groups, remember=True)
    w2 = w.reshape(groups, o // groups, cg * kh * kw)
    out = _gemm(xp, w2, cols)  # (G, O/G, N*L): one GEMM per group
    # One copy to NCHW: every op downstream (bias, relu, pooling) runs faster on contiguous data.
    return xp.ascontiguousarray(out.reshape(o, n, oh, ow).transpose(1, 0, 2, 3))


def _input_grad_impl(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple,
                     dilation: tuple, groups: int) -> Any:
    if xp is not np:  # a GPU: cuDNN's data gradient unless it refuses this signature
        gx = _cudnn(xp, "cudnn_conv2d_input_grad", g, w, tuple(input_shape), stride, padding, dilation, groups)
        if gx is not None:
            return gx
    trim = _trim(input_shape[2:], w.shape[2:], stride, padding, dilation)
    if trim is not None:
        w, padding = w[:, :, trim[0], trim[1]], trim[2]
    if _whole_window(tuple(input_shape[2:]), w.shape, stride, padding, dilation, groups):
        return _dense(xp, xp.reshape(g, (g.shape[0], -1)), _matrix(xp, w), tuple(input_shape))
    if _unrolled(xp, input_shape, w.shape, stride, padding, dilation, groups, g.dtype):
        return unrolled.input_grad(xp, g, w, tuple(input_shape), stride, padding)
    m = fused_winograd_tile(xp, input_shape, w.shape, stride, padding, dilation, groups, g.dtype)
    if m and _finite(xp, w):  # g is checked by each thread on its images
        gx = winograd.fused_input_grad(g, w, padding, m, finite_only=True)
        if gx is not None:
            return gx
    if (_direct(xp, _padded_shape(input_shape, padding), w.shape, stride, dilation, groups, g.dtype)
            and _finite(xp, w)):  # an inf weight would meet the zero padding of g (NaN) where torch adds nothing
        return direct.input_grad(xp, g, w, tuple(input_shape), padding, dilation)
    if (_indirect_input(xp, input_shape, w.shape, stride, padding, dilation, groups, g.dtype)
            and _finite(xp, w)):  # an inf weight would meet the zero padding of g (NaN) where torch adds nothing
        return indirect.input_grad(xp, g, w, tuple(input_shape), stride, padding)
    # an inf weight would meet the zeros of g's columns (NaN) where torch adds nothing: such weights go on
    if _tap_sum(xp, input_shape, w.shape, stride, groups, g.dtype) and _finite(xp, w):
        return tap_sum.input_grad(xp, g, w, tuple(input_shape), padding, dilation)
    m = winograd_tile(xp, input_shape, w.shape, stride, padding, dilation, groups, g.dtype)
    if m and _finite(xp, w):
        gx = winograd.input_grad(xp, g, w, padding, m, finite_only=True)
        if gx is not None:
            return gx
    n, c, h, width = input_shape
    o, cg, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    if groups == 1:
        layout = per_image if _per_image(groups, oh, ow) else im2col
        return layout.input_grad(xp, g, w, tuple(input_shape), stride, padding, dilation)
    w2 = w.reshape(groups, o // groups, cg * kh * kw)
    gcols = _gemm(xp, w2.transpose(0, 2, 1), _to_channels_first(g, groups, o // groups))  # (G, K, N*L)
    gcols = gcols.reshape(c, kh, kw, n, oh, ow)
    # col2im: each tap adds its part of the columns into the input positions it read, skipping the
    # padding (no padded buffer to crop: 5-35% faster, the most on small feature maps).
    gx = xp.zeros((c, n, h, width), dtype=g.dtype)
    im2col.add_windows(gx.transpose(1, 0, 2, 3), lambda i, j: gcols[:, i, j].transpose(1, 0, 2, 3),
                       kh, kw, stride, padding, dilation, oh, ow)
    return xp.ascontiguousarray(gx.transpose(1, 0, 2, 3))


def _weight_grad_impl(xp: Any, x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple,
                      dilation: tuple, groups: int) -> Any:
    if xp is not np:  # a GPU: cuDNN's weight gradient unless it refuses this signature
        gw = _cudnn(xp, "cudnn_conv2d_weight_grad", x, g, tuple(weight_shape), stride, padding, dilation, groups)
        if gw is not None:
            return gw
    trim = _trim(x.shape[2:], weight_shape[2:], stride, padding, dilation)
    if trim is not None:  # the dropped taps' gradient is zero: they only ever read padding
        rows, cols, pads = trim
        part = weight_shape[:2] + (rows.stop - rows.start, cols.stop - cols.start)
        live = _weight_grad_impl(xp, x, g, part, stride, pads, dilation, groups)
        gw = xp.empty(weight_shape, dtype=g.dtype)

        def fill(o0: int, o1: int) -> None:  # on ember's threads: 9.4 MB for ResNet-18's 512 x 512 x 3x3
            gw[o0:o1] = 0
            gw[o0:o1, :, rows, cols] = live[o0:o1]

        split_channels(xp, fill, weight_shape[0], int(np.prod(weight_shape[1:])))
        if not bool(xp.isfinite(g.sum())):  # as torch: 0 * inf or 0 * NaN in g makes them NaN
            bad = ~xp.isfinite(g).all(axis=(0, 2, 3))
            gw[bad] = xp.where(_dropped(xp, weight_shape[2:], trim), xp.nan, gw[bad])
        return gw
    if _whole_window(x.shape[2:], weight_shape, stride, padding, dilation, groups):
        return _dense(xp, xp.reshape(g, (g.shape[0], -1)).T, xp.reshape(x, (x.shape[0], -1)), tuple(weight_shape))
    # x finite: the kernel's zero columns past the output width meet real pixels (0 * inf = NaN)
    if _shallow(xp, x.shape, weight_shape, stride, padding, dilation, groups, x.dtype) and _finite(xp, x):
        return direct.shallow_weight_grad(x, g, tuple(weight_shape), padding)
    geometry = (x.shape, weight_shape, stride, padding, dilation, groups, x.dtype)
    # an inf of g would miss the 0 * inf = NaN torch makes where a tap reads padding: such gradients go on
    if _unrolled(xp, *geometry) and _finite(xp, g):
        return unrolled.weight_grad(xp, x, g, tuple(weight_shape), stride, padding)
    m = fused_winograd_tile(xp, *geometry)
    if m:  # x and g are checked by each thread on its images
        gw = winograd.fused_weight_grad(x, g, padding, m, finite_only=True)
        if gw is not None:
            return gw
    # an inf of x would meet the zero columns of g past the output width (NaN): such inputs take the other paths
    if _indirect_weight(xp, *geometry) and _finite(xp, x):
        return indirect.weight_grad(xp, x, g, tuple(weight_shape), stride, padding, dilation)
    if _tap_sum(xp, x.shape, weight_shape, stride, groups, x.dtype):
        gw = tap_sum.weight_grad(xp, x, g, tuple(weight_shape), padding, dilation)
        # an inf/NaN in x or g makes some of gw inf/NaN (every value of x meets every row of g's columns), not always
        # where torch's does (its products with padding, and none with the columns' zeros): such inputs go on
        if _finite(xp, gw):
            return gw
    m = winograd_tile(xp, x.shape, weight_shape, stride, padding, dilation, groups, x.dtype)
    v = _winograd_input(xp, x, padding, m) if m else None
    if v is not None:
        gw = winograd.weight_grad(xp, x, g, padding, m, v=v, finite_only=True)
        if gw is not None:
            return gw
    o, cg, kh, kw = weight_shape
    if groups == 1:
        layout, key = ((per_image, _per_image_key) if _per_image(groups, g.shape[2], g.shape[3])
                       else (im2col, _im2col_key))
        cols = _recall_cols(x, key(kh, kw, stride, padding, dilation, x))
        if cols is None:
            cols = (per_image.cols if layout is per_image else im2col.columns)(xp, x, kh, kw, stride, padding, dilation)
        return layout.weight_grad(xp, g, cols, tuple(weight_shape))
    cols = _cols_cached(xp, x, kh, kw, stride, padding, dilation, groups, remember=False)  # (G, K, N*L)
    g2 = _to_channels_first(g, groups, o // groups)  # (G, O/G, N*L)
    return _gemm(xp, g2, cols.transpose(0, 2, 1)).reshape(weight_shape)


# ---- vjps: each adjoint is one of the other two ops -------------------------------------------
def _geometry(attrs: dict) -> dict:
    return {k: attrs[k] for k in ("stride", "padding", "dilation", "groups")}


# One rule per input, each called only when its input needs a gradient (a frozen backbone's conv
# computes no weight gradient; the first layer computes no input gradient).
# conv2d(x, w): the input and weight gradients.
def _bias_grad(ctx: Any, g: Any) -> Any:
    """The bias's gradient: ``g`` summed over images and pixels (``sum_to``, as the broadcast add's was)."""
    c = g.shape[1]
    return dispatch.apply(OPS["sum_to"], (g,), {"shape": (1, c, 1, 1)}).reshape(c)


_CONV_VJP = (
    lambda ctx, g: conv2d_input_grad(g, ctx.inputs[1], tuple(ctx.input_meta[0]), **_geometry(ctx.attrs)),
    lambda ctx, g: conv2d_weight_grad(ctx.inputs[0], g, tuple(ctx.input_meta[1]), **_geometry(ctx.attrs)),
    _bias_grad,  # conv2d(x, w, bias) only
)
# conv2d_input_grad(g, w) is linear in g and in w (second derivatives).
_INPUT_GRAD_VJP = (
    lambda ctx, gg: conv2d_raw(gg, ctx.inputs[1], **_geometry(ctx.attrs)),
    lambda ctx, gg: conv2d_weight_grad(gg, ctx.inputs[0], tuple(ctx.input_meta[1]), **_geometry(ctx.attrs)),
)
# conv2d_weight_grad(x, g) is linear in x and in g.
_WEIGHT_GRAD_VJP = (
    lambda ctx, gg: conv2d_input_grad(ctx.inputs[1], gg, tuple(ctx.input_meta[0]), **_geometry(ctx.attrs)),
    lambda ctx, gg: conv2d_raw(ctx.inputs[0], gg, **_geometry(ctx.attrs)),
)


def _conv_rule(x: Spec, w: Spec, *bias: Spec, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> Spec:
    oh = out_size(x.shape[2], w.shape[2], stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x.shape[3], w.shape[3], stride[1], padding[2], padding[3], dilation[1])
    return Spec((x.shape[0], w.shape[0], oh, ow), x.dtype, x.device)


CONV2D = register(OpDef(
    name="conv2d", batch=batching.folded, category="nn", impl=_conv_impl, vjp=_CONV_VJP, shape_rule=_conv_rule, onnx=to_onnx.conv2d,
    autocast="lower", flops=cost.conv2d_flops,
))
CONV2D_INPUT_GRAD = register(OpDef(
    name="conv2d_input_grad", batch=batching.folded, category="nn", impl=_input_grad_impl, vjp=_INPUT_GRAD_VJP, onnx=to_onnx.conv2d_input_grad,
    shape_rule=lambda g, w, input_shape, **geo: Spec(tuple(input_shape), g.dtype, g.device),
    flops=cost.conv2d_input_grad_flops,
))
CONV2D_WEIGHT_GRAD = register(OpDef(
    name="conv2d_weight_grad", batch=batching.conv_weight_grad, category="nn", impl=_weight_grad_impl, vjp=_WEIGHT_GRAD_VJP,
    shape_rule=lambda x, g, weight_shape, **geo: Spec(tuple(weight_shape), x.dtype, x.device),
    flops=cost.conv2d_weight_grad_flops,
))


def conv2d_raw(x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple, groups: int,
               bias: Any = None) -> Any:
    """The ``conv2d`` record; ``bias`` (O,) is added inside it (in place into the fresh output)."""
    inputs = (x, w) if bias is None else (x, w, bias)
    return dispatch.apply(CONV2D, inputs, {"stride": stride, "padding": padding, "dilation": dilation,
                                           "groups": groups})


def conv2d_input_grad(g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                      groups: int) -> Any:
    return dispatch.apply(CONV2D_INPUT_GRAD, (g, w), {"input_shape": tuple(input_shape), "stride": stride,
                                                      "padding": padding, "dilation": dilation, "groups": groups})


def conv2d_weight_grad(x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple, dilation: tuple,
                       groups: int) -> Any:
    return dispatch.apply(CONV2D_WEIGHT_GRAD, (x, g), {"weight_shape": tuple(weight_shape), "stride": stride,
                                                       "padding": padding, "dilation": dilation, "groups": groups})


# ---- public functions ------------------------------------------------------------------------
def pair(value: Any, n: int, name: str, op: str) -> tuple:
    """``3`` -> ``(3, 3)``; a sequence of length ``n`` -> a tuple of ints. A stride, dilation or kernel size
    must be positive (0 divided by zero deep inside the kernel before; PyTorch refuses it up front)."""
    if isinstance(value, int):
        value = (value,)
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise ValueError(f"{op}: expected {name} to be an int or a sequence of {n} ints, got {value}")
    if name in ("stride", "dilation", "kernel_size") and any(v <= 0 for v in value):
        raise RuntimeError(f"{op}: non-positive {name} is not supported, got {name}={value}; it must be >= 1")
    return value


def _check_inputs(op: str, x: Any, w: Any, bias: Any, groups: int, spatial: int) -> None:
    dims = spatial + 2
    if w.ndim != dims:
        raise RuntimeError(f"{op}: expected a {dims}-D weight (out_channels, in_channels/groups, "
                           f"{ {1: 'kL', 2: 'kH, kW', 3: 'kD, kH, kW'}[spatial]}), got weight of shape {tuple(w.shape)}")
    if x.ndim != dims:
        raise RuntimeError(f"{op}: expected {dims - 1}-D (unbatched) or {dims}-D (batched) input, got input of "
                           f"shape {tuple(x.shape)}")
    if groups < 1 or w.shape[0] % groups:
        raise RuntimeError(f"{op}: out_channels ({w.shape[0]}) must be divisible by groups ({groups})")
    if x.shape[1] != w.shape[1] * groups:
        raise RuntimeError(
            f"{op}: input of shape {tuple(x.shape)} has {x.shape[1]} channels, but weight of shape "
            f"{tuple(w.shape)} with groups={groups} expects {w.shape[1] * groups} input channels. "
            "Check in_channels of the layer against the channel dim (dim 1) of the input.")
    if x.dtype is not w.dtype or (bias is not None and bias.dtype is not x.dtype):
        raise RuntimeError(f"{op}: input ({x.dtype}), weight ({w.dtype})"
                           f"{'' if bias is None else f' and bias ({bias.dtype})'} should have the same dtype; "
                           "convert with .to(dtype) first")
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating-point input, got {x.dtype}")
    if bias is not None and tuple(bias.shape) != (w.shape[0],):
        raise RuntimeError(f"{op}: bias must have shape ({w.shape[0]},), got {tuple(bias.shape)}")


def _resolve_padding(op: str, padding: Any, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """Padding as (top, bottom, left, right); 'same' pads the extra pixel at the end, as PyTorch does."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride={stride})")
            out = []
            for k, d in zip(kernel, dilation):
                total = d * (k - 1)
                out += [total // 2, total - total // 2]
            return tuple(out)
        raise ValueError(f"{op}: invalid padding string {padding!r}; expected 'valid' or 'same'")
    ph, pw = pair(padding, 2, "padding", op)
    if ph < 0 or pw < 0:
        raise RuntimeError(f"{op}: negative padding is not supported, got {(ph, pw)}")
    return (ph, ph, pw, pw)


@named_backward("ConvolutionBackward0", inputs=((0, "input"), (1, "weight"), (2, "bias")))  # torch's one node
@autocast_policy("lower")
def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """2-D convolution (cross-correlation) over an (N, C, H, W) or (C, H, W) input, as ``torch.nn.functional``."""
    if not input.dtype.is_floating_point:  # integer/complex: torch computes them (ember/ops/conv_dtypes.py)
        other = conv_other_dtypes(conv2d, input, weight, bias, (stride, padding, dilation, groups))
        if other is not None:
            return other
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    _check_inputs("conv2d", x, weight, bias, groups, 2)
    stride = pair(stride, 2, "stride", "conv2d")
    dilation = pair(dilation, 2, "dilation", "conv2d")
    pads = _resolve_padding("conv2d", padding, tuple(weight.shape[2:]), stride, dilation)
    for axis, (size, k, d, lo, hi) in enumerate(zip(x.shape[2:], weight.shape[2:], dilation, pads[0::2], pads[1::2])):
        if size + lo + hi < d * (k - 1) + 1:
            raise RuntimeError(
                f"conv2d: input of shape {tuple(input.shape)} padded by {pads} is smaller than the (dilated) kernel "
                f"of weight {tuple(weight.shape)} in spatial dim {axis}. Use a larger input or more padding.")
    out = conv2d_raw(x, weight, stride, pads, dilation, groups, bias)
    return out.squeeze(0) if unbatched else out


@named_backward("ConvolutionBackward0", inputs=((0, "input"), (1, "weight"), (2, "bias")))  # torch's one node
@autocast_policy("lower")
def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Any:
    """1-D convolution over (N, C, L) or (C, L), run as a 2-D convolution of height 1."""
    if not input.dtype.is_floating_point:  # integer/complex: torch computes them (ember/ops/conv_dtypes.py)
        other = conv_other_dtypes(conv1d, input, weight, bias, (stride, padding, dilation, groups))
        if other is not None:
            return other
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    _check_inputs("conv1d", x, weight, bias, groups, 1)
    (stride,) = pair(stride, 1, "stride", "conv1d")
    (dilation,) = pair(dilation, 1, "dilation", "conv1d")
    if isinstance(padding, str):
        pads = _resolve_padding("conv1d", padding, (1, weight.shape[2]), (1, stride), (1, dilation))
    else:
        (p,) = pair(padding, 1, "padding", "conv1d")
        pads = (0, 0, p, p)
    if x.shape[2] + pads[2] + pads[3] < dilation * (weight.shape[2] - 1) + 1:
        raise RuntimeError(f"conv1d: input of shape {tuple(input.shape)} is smaller than the kernel of weight "
                           f"{tuple(weight.shape)}; use a longer input or more padding")
    out = conv2d_raw(x.unsqueeze(2), weight.unsqueeze(2), (1, stride), pads, (1, dilation), groups).squeeze(2)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1)
    return out.squeeze(0) if unbatched else out


@named_backward("ConvolutionBackward0", inputs=((0, "input"), (1, "weight"), (2, "bias")))  # torch's one node
@autocast_policy("lower")
def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Any:
    """Transposed 2-D convolution: the adjoint of ``conv2d`` in its input. Weight is (C_in, C_out/groups, kH, kW)."""
    if not input.dtype.is_floating_point:  # integer/complex: torch's three real convolutions (ember/ops/conv_dtypes.py)
        other = conv_other_dtypes(conv_transpose2d, input, weight, bias,
                                  (stride, padding, output_padding, groups, dilation))
        if other is not None:  # (complex ran the float kernels on complex data: its gradients missed a conjugate)
            return other
    unbatched = input.ndim == 3
    x = input.unsqueeze(0) if unbatched else input
    if weight.ndim != 4 or x.ndim != 4 or x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"conv_transpose2d: input of shape {tuple(input.shape)} needs a 4-D weight with "
                           f"{x.shape[1] if x.ndim == 4 else '?'} input channels in dim 0, got weight "
                           f"{tuple(weight.shape)}")
    stride = pair(stride, 2, "stride", "conv_transpose2d")
    dilation = pair(dilation, 2, "dilation", "conv_transpose2d")
    ph, pw = pair(padding, 2, "padding", "conv_transpose2d")
    oph, opw = pair(output_padding, 2, "output_padding", "conv_transpose2d")
    kh, kw = weight.shape[2:]
    if any(op >= max(s, d) for op, s, d in zip((oph, opw), stride, dilation)):
        raise RuntimeError(f"conv_transpose2d: output padding must be smaller than either stride or dilation, got "
                           f"output_padding={(oph, opw)}, stride={stride}, dilation={dilation}")
    h = (x.shape[2] - 1) * stride[0] - 2 * ph + dilation[0] * (kh - 1) + oph + 1
    w = (x.shape[3] - 1) * stride[1] - 2 * pw + dilation[1] * (kw - 1) + opw + 1
    if h < 1 or w < 1:
        raise RuntimeError(f"conv_transpose2d: Given input size per channel: ({x.shape[2]} x {x.shape[3]}). "
                           f"Calculated output size per channel: ({h} x {w}). Output size is too small")
    shape = (x.shape[0], weight.shape[1] * groups, h, w)
    if oph >= stride[0] or opw >= stride[1]:
        # output_padding past the stride (allowed below the dilation): the conv geometry cannot give this shape, so
        # compute the uncropped result, then take the [p, p + size) window (zeros where it runs past the end)
        full_h = (x.shape[2] - 1) * stride[0] + dilation[0] * (kh - 1) + 1
        full_w = (x.shape[3] - 1) * stride[1] + dilation[1] * (kw - 1) + 1
        full = conv2d_input_grad(x, weight, shape[:2] + (full_h, full_w), stride, (0, 0, 0, 0), dilation, groups)
        out = dispatch.apply(OPS["pad"], (full,), {"pad": (-pw, pw + w - full_w, -ph, ph + h - full_h), "value": 0.0})
    else:
        out = conv2d_input_grad(x, weight, shape, stride, (ph, ph, pw, pw), dilation, groups)
    if bias is not None:
        out = out + bias.reshape(1, -1, 1, 1)
    return out.squeeze(0) if unbatched else out
