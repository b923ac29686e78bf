"""Convolutions on maps so small that every output pixel's window covers the whole input: one GEMM each pass.

When each output pixel's (padded) window holds the whole input map, output pixel ``(oy, ox)`` reads input pixel
``(iy, ix)`` through exactly one tap, ``(iy - oy*sh + top, ix - ox*sw + left)``. The convolution is then one matrix
product with the *unrolled* kernel ``big`` ((OH*OW*O) x (H*W*C), a block Toeplitz matrix of the taps):

* forward:      ``y^T  (OH*OW*O, N) = big @ x_cl^T``;
* input grad:   ``gx_cl (N, H*W*C)  = g_cl @ big``;
* weight grad:  ``dbig  = g_cl^T @ x_cl``, each (O, C) block added into the tap it came from;

``x_cl`` and ``g_cl`` are the channels-last images flattened, (N, H*W*C) and (N, OH*OW*O). ResNet-18's layer3 on
32x32 images (3x3, pad 1, 256 channels on 2x2 maps, three layers a step) is such a layer: the product does the
multiplies Winograd F(2x2) does (16 per 4 outputs, a third fewer than im2col's 36, since no padding is
multiplied), but in one GEMM with 1024-deep sums, with no tile transforms, and every sum is a direct
convolution's sum (no Winograd rounding). It applies only when ``H <= kh`` and ``W <= kw``, so it never does more
multiplies than a direct convolution.

inf/NaN: every product here is one a direct convolution makes; what it leaves out are the products of padding.
PyTorch makes those too (``0 * inf = NaN`` in the weight gradient when ``g`` holds inf, and in the output when a
weight that reads only padding is inf), so ``conv.py`` sends such inputs to its other paths.

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3))
    >>> forward(np, x, w, (1, 1), (1, 1, 1, 1))[0, 0]
    array([[4., 4.],
           [4., 4.]])
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import cpu_blas
from ember.backends.cpu_blas import blas_for
from ember.backends.cpu_threads import num_threads
from ember.ops import conv_im2col as im2col
from ember.ops.conv_geometry import out_size

MAX_UNROLLED = 1 << 22  # elements of ``big`` (16 MB in float32); larger kernels take the other paths
PANEL = 32  # output columns per unit of work when a product is shared out over ember's threads


def applicable(x_hw: tuple, w_shape: tuple, stride: tuple, padding: tuple, dilation: tuple, groups: int) -> bool:
    """Whether every output pixel's window covers the whole input (so each (output, input) pixel pair meets through
    one tap) with at least two output pixels (one is ``conv._whole_window``'s dense layer), one group, no dilation,
    and an unrolled kernel of at most ``MAX_UNROLLED`` elements.

    Example:
        >>> applicable((2, 2), (256, 256, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)   # ResNet-18's layer3, 32x32
        True
        >>> applicable((4, 4), (128, 128, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)   # its layer2: windows miss pixels
        False
    """
    if groups != 1 or tuple(dilation) != (1, 1):
        return False
    (h, w), (o, c, kh, kw) = x_hw, w_shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], 1)
    ow = out_size(w, kw, stride[1], padding[2], padding[3], 1)
    if oh < 1 or ow < 1 or oh * ow < 2:
        return False
    covers = (padding[0] - (oh - 1) * stride[0] >= 0 and padding[0] + h <= kh
              and padding[2] - (ow - 1) * stride[1] >= 0 and padding[2] + w <= kw)
    return covers and oh * ow * o * h * w * c <= MAX_UNROLLED


def _tap(o_pos: int, stride: int, pad: int, i_pos: int) -> int:
    return i_pos - o_pos * stride + pad


def unrolled_kernel(xp: Any, w: Any, out_hw: tuple, in_hw: tuple, stride: tuple, padding: tuple) -> Any:
    """``big`` (OH*OW*O, H*W*C): block ``[(oy, ox), (iy, ix)]`` is the tap ``w[:, :, i, j]`` (O, C) they meet by.
    Per block of output channels (on ember's threads): one transposing copy of ``w`` to (kh, kw, O, C), then one
    block copy per output pixel."""
    o, c, kh, kw = w.shape
    (oh, ow), (h, width) = out_hw, in_hw
    big = xp.empty((oh, ow, o, h, width, c), dtype=w.dtype)

    def channels(o0: int, o1: int) -> None:
        taps = xp.ascontiguousarray(w[o0:o1].transpose(2, 3, 0, 1))  # (kh, kw, O, C): each tap's block contiguous
        for oy in range(oh):
            for ox in range(ow):
                i0, j0 = _tap(oy, stride[0], padding[0], 0), _tap(ox, stride[1], padding[2], 0)
                big[oy, ox, o0:o1] = taps[i0:i0 + h, j0:j0 + width].transpose(2, 0, 1, 3)

    im2col.copy_for(xp, channels, o, c * (kh * kw + oh * ow * h * width))
    return big.reshape(oh * ow * o, h * width * c)


def _channels_last(xp: Any, a: Any) -> Any:
    """(N, C, H, W) -> (N, H*W*C), one copy."""
    n, c, h, w = a.shape
    return xp.ascontiguousarray(a.transpose(0, 2, 3, 1)).reshape(n, h * w * c)  # explicit: N may be 0


def matmul(xp: Any, a: Any, b: Any) -> Any:
    """``a @ b`` in ``a``'s dtype. Under the BLAS split (NumPy float32, ``cpu_blas.available()``, 2+ of ember's
    threads) the output's columns are shared out over ember's threads in panels of ``PANEL``, each product on its
    thread (ember's GEMM where it takes the shape, else BLAS held to one thread), so no OpenBLAS worker is woken to
    spin against ember's threads afterwards; otherwise one product (``conv_im2col.matmul_into``: ember's GEMM
    where its rule takes the shape, else BLAS with its own threads)."""
    if xp is np and a.dtype == np.float32 and b.dtype == np.float32 and num_threads() > 1 and cpu_blas.available():
        out = np.empty((a.shape[0], b.shape[1]), np.float32)

        def columns(p0: int, p1: int) -> None:
            j0, j1 = p0 * PANEL, min(b.shape[1], p1 * PANEL)
            im2col.matmul_into(xp, a, b[:, j0:j1], out[:, j0:j1])

        blas_for(columns, -(-b.shape[1] // PANEL), im2col.min_items(2.0 * a.shape[0] * a.shape[1] * PANEL), xp)
        return out
    out = xp.empty((a.shape[0], b.shape[1]), dtype=a.dtype)
    im2col.matmul_into(xp, a, b, out)  # ember's GEMM where its rule takes the shape, else BLAS
    return out


def forward(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple) -> Any:
    """``conv2d(x, w)`` (NCHW) where :func:`applicable`."""
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], 1)
    ow = out_size(width, kw, stride[1], padding[2], padding[3], 1)
    big = unrolled_kernel(xp, w, (oh, ow), (h, width), stride, padding)
    yt = matmul(xp, big, _channels_last(xp, x).T)  # (OH*OW*O, N)
    return xp.ascontiguousarray(yt.reshape(oh, ow, o, n).transpose(3, 2, 0, 1))


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple) -> Any:
    """The gradient in ``x`` (N, C, H, W) of :func:`forward`."""
    n, c, h, width = input_shape
    big = unrolled_kernel(xp, w, tuple(g.shape[2:]), (h, width), stride, padding)
    gx = matmul(xp, _channels_last(xp, g), big)  # (N, H*W*C)
    return xp.ascontiguousarray(gx.reshape(n, h, width, c).transpose(0, 3, 1, 2))


def weight_grad(xp: Any, x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple) -> Any:
    """The gradient in ``w`` (O, C, kh, kw) of :func:`forward`: the unrolled kernel's gradient folded back onto
    the taps (a tap no pixel pair meets by gets zero: it reads only padding)."""
    o, c, kh, kw = weight_shape
    h, width = x.shape[2:]
    oh, ow = g.shape[2:]
    dbig = matmul(xp, _channels_last(xp, g).T, _channels_last(xp, x))  # (OH*OW*O, H*W*C)
    dbig = dbig.reshape(oh, ow, o, h, width, c)
    gw = xp.empty((o, c, kh, kw), dtype=dbig.dtype)

    def channels(o0: int, o1: int) -> None:
        taps = xp.zeros((kh, kw, o1 - o0, c), dtype=dbig.dtype)
        for oy in range(oh):  # a fixed order: the same sums every run
            for ox in range(ow):
                i0, j0 = _tap(oy, stride[0], padding[0], 0), _tap(ox, stride[1], padding[2], 0)
                taps[i0:i0 + h, j0:j0 + width] += dbig[oy, ox, o0:o1].transpose(1, 2, 0, 3)
        gw[o0:o1] = taps.transpose(2, 3, 0, 1)

    im2col.copy_for(xp, channels, o, c * (kh * kw + oh * ow * h * width))
    return gw
