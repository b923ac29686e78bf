"""Column-free stride-1 convolutions for layers with few output channels (a GAN generator's 64 -> 1 or 3 output
layer), written against ``xp``: NumPy-only installs run these layers without im2col columns.

im2col writes ``C*kh*kw`` values per output pixel and reads them back; with one output channel that is 9x the
input for a 3x3 kernel, and the GEMM that reads it has a single row. Here every product reads the input or the
output gradient as it is:

* forward:      ``Z_n = W_all (kh*kw*O, C) @ x_n (C, H*W)``, every tap's product at every input pixel, then
                ``y[:, :, out] += Z[:, tap, :, in]`` for each tap's window (``kh*kw`` adds of an O-channel map);
* input grad:   the output gradient's columns ``G_n (kh*kw*O, H*W)`` (each tap's window of ``g`` moved to the
                input pixels it reads: ``kh*kw*O`` rows, small when O is), then ``gx_n = W_all^T @ G_n``;
* weight grad:  ``dW_all = sum_n G_n @ x_n^T`` with the same columns.

The columns of ``g`` have ``kh*kw*O`` rows where im2col's have ``kh*kw*C``. Images are shared out over ember's
threads (``cpu_blas.blas_for``: each thread's GEMMs on one BLAS thread).

inf/NaN: the products here skip what PyTorch multiplies by padding (``0 * inf = NaN``), the input gradient
multiplies weights by the zeros of ``G`` outside ``g``'s reach and the weight gradient every value of ``x`` by
them; so ``conv.py`` sends non-finite weights (forward, input gradient) to its other paths, and redoes a weight
gradient that comes out non-finite there (it does exactly when ``x`` or ``g`` holds inf/NaN).

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 2, 3, 3)), np.ones((1, 2, 3, 3))
    >>> forward(np, x, w, (1, 1, 1, 1), (1, 1))[0, 0]
    array([[ 8., 12.,  8.],
           [12., 18., 12.],
           [ 8., 12.,  8.]])
"""
from __future__ import annotations

from typing import Any

from ember.backends.cpu_blas import blas_for
from ember.backends.cpu_mkl import xp_matmul
from ember.ops.conv_geometry import out_size, tap_range
from ember.ops.conv_im2col import matmul_into, min_items


def _taps(h: int, w: int, oh: int, ow: int, kh: int, kw: int, padding: tuple, dilation: tuple) -> list:
    """Per tap ``(i, j)`` that reads some input: ``(i, j, out_rows, in_rows, out_cols, in_cols)``."""
    found = []
    for i in range(kh):
        rows = tap_range(h, oh, i * dilation[0], 1, padding[0])
        for j in range(kw):
            cols = tap_range(w, ow, j * dilation[1], 1, padding[2])
            if rows is not None and cols is not None:
                found.append((i, j, rows[0], rows[1], cols[0], cols[1]))
    return found


def _out_hw(x_shape: tuple, kh: int, kw: int, padding: tuple, dilation: tuple) -> tuple:
    return (out_size(x_shape[2], kh, 1, padding[0], padding[1], dilation[0]),
            out_size(x_shape[3], kw, 1, padding[2], padding[3], dilation[1]))


def forward(xp: Any, x: Any, w: Any, padding: tuple, dilation: tuple) -> Any:
    """``conv2d(x, w)`` with stride 1 (NCHW)."""
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    oh, ow = _out_hw(x.shape, kh, kw, padding, dilation)
    w_all = xp.ascontiguousarray(w.transpose(2, 3, 0, 1)).reshape(kh * kw * o, c)
    x3 = x.reshape(n, c, h * width)
    taps = _taps(h, width, oh, ow, kh, kw, padding, dilation)
    y = xp.empty((n, o, oh, ow), dtype=x.dtype)

    def run(start: int, stop: int) -> None:
        z = xp.empty((stop - start, kh * kw * o, h * width), dtype=x.dtype)
        matmul_into(xp, w_all, x3[start:stop], z)
        z = z.reshape(stop - start, kh, kw, o, h, width)
        part = y[start:stop]
        part[...] = 0
        for i, j, out_r, in_r, out_c, in_c in taps:
            part[:, :, out_r, out_c] += z[:, i, j, :, in_r, in_c]

    blas_for(run, n, min_items(2.0 * kh * kw * o * c * h * width), xp)
    return y


def grad_columns(xp: Any, g: Any, input_hw: tuple, kh: int, kw: int, padding: tuple, dilation: tuple) -> Any:
    """``G`` (N, kh*kw*O, H*W): row ``(i, j, o)`` holds ``g[:, o]`` moved to the input pixels tap ``(i, j)`` reads
    for each output pixel (0 where it reads none)."""
    n, o, oh, ow = g.shape
    h, width = input_hw
    cols = xp.zeros((n, kh, kw, o, h, width), dtype=g.dtype)
    for i, j, out_r, in_r, out_c, in_c in _taps(h, width, oh, ow, kh, kw, padding, dilation):
        cols[:, i, j, :, in_r, in_c] = g[:, :, out_r, out_c]
    return cols.reshape(n, kh * kw * o, h * width)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x`` (N, C, H, W) of :func:`forward`."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    w_all_t = xp.ascontiguousarray(w.transpose(1, 2, 3, 0)).reshape(c, kh * kw * o)  # (C, (i, j, o))
    gx = xp.empty((n, c, h * width), dtype=g.dtype)

    def run(start: int, stop: int) -> None:
        cols = grad_columns(xp, g[start:stop], (h, width), kh, kw, padding, dilation)
        matmul_into(xp, w_all_t, cols, gx[start:stop])

    blas_for(run, n, min_items(2.0 * kh * kw * o * c * h * width), xp)
    return gx.reshape(tuple(input_shape))


def weight_grad(xp: Any, x: Any, g: Any, weight_shape: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``w`` (O, C, kh, kw) of :func:`forward`: each thread sums its images' ``G_n @ x_n^T``, the
    per-thread sums added once in a fixed order. Half-precision products are summed in float32 and rounded once."""
    n, c, h, width = x.shape
    o, _, kh, kw = weight_shape
    x3 = x.reshape(n, c, h * width)
    wide = x.dtype.itemsize >= 4
    partial: dict[int, Any] = {}

    def run(start: int, stop: int) -> None:
        cols = grad_columns(xp, g[start:stop], (h, width), kh, kw, padding, dilation)
        total = xp.zeros((kh * kw * o, c), dtype=x.dtype if wide else xp.float32)
        product = xp.empty_like(total)
        for image in range(stop - start):
            if wide:
                xp_matmul(xp, cols[image], x3[start + image].T, out=product)
            else:
                product[...] = xp_matmul(xp, cols[image], x3[start + image].T)
            total += product
        partial[start] = total

    blas_for(run, n, min_items(2.0 * kh * kw * o * c * h * width), xp)
    parts = [partial[key] for key in sorted(partial)]
    total = parts[0]
    for part in parts[1:]:
        total += part
    gw = total.reshape(kh, kw, o, c).transpose(2, 3, 0, 1)
    return xp.ascontiguousarray(gw if wide else gw.astype(x.dtype))
