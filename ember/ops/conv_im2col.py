"""im2col convolution, batch-wide layout, for one group, split over ember's threads.

The columns are ``(C*kh*kw, N*OH*OW)``: rows are (channel, tap) pairs, columns (image, pixel) pairs,
so the forward is one GEMM ``W (O, K) @ cols`` and the weight gradient one GEMM
``g (O, N*L) @ cols^T``; conv.py uses this layout for small feature maps (fewer than 128 output
pixels), where per-image GEMMs would be too small. Each pass gives every thread a contiguous part
of the work with its own GEMM on one BLAS thread (``cpu_blas.blas_for``): the forward and the
input gradient split the images (each thread fills its columns, multiplies, and writes its
images of the NCHW result), the weight gradient splits the output channels (each thread gathers
its channels of ``g`` and multiplies them with all the columns). The copies around the GEMMs,
single-threaded NumPy otherwise, so run on every core as well.

``fill_windows`` and ``add_windows`` (im2col and col2im, tap by tap from the unpadded input,
padding zeroed or skipped) serve the per-image layout of ``conv_per_image.py`` too.

Example:
    >>> import numpy as np
    >>> y, _ = forward(np, np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), (1, 1), (0, 0, 0, 0), (1, 1))
    >>> y[0, 0]
    array([[4., 4.],
           [4., 4.]])
"""
from __future__ import annotations

from typing import Any, Callable

from ember.backends.cpu_blas import blas_for
from ember.ops.conv_geometry import out_size, tap_range

MIN_CHUNK_FLOPS = 4e6  # GEMM flops per thread below which a pass runs on one thread


def fill_windows(x: Any, tap: Callable[[int, int], Any], kh: int, kw: int, stride: tuple, padding: tuple,
                 dilation: tuple, oh: int, ow: int) -> None:
    """im2col: for each kernel tap ``(i, j)``, write what it reads of ``x`` (N, C, H, W) into
    ``tap(i, j)``, an (N, C, OH, OW) view of the columns; positions that read padding get 0."""
    h, w = x.shape[2:]
    for i in range(kh):
        rows = tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        for j in range(kw):
            columns = tap_range(w, ow, j * dilation[1], stride[1], padding[2])
            dst = tap(i, j)
            if rows is None or columns is None:
                dst[...] = 0
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            dst[:, :, :out_r.start] = 0
            dst[:, :, out_r.stop:] = 0
            dst[:, :, out_r, :out_c.start] = 0
            dst[:, :, out_r, out_c.stop:] = 0
            dst[:, :, out_r, out_c] = x[:, :, in_r, in_c]


def add_windows(gx: Any, tap: Callable[[int, int], Any], kh: int, kw: int, stride: tuple, padding: tuple,
                dilation: tuple, oh: int, ow: int) -> None:
    """col2im: add each tap's (N, C, OH, OW) view ``tap(i, j)`` into the positions of ``gx``
    (N, C, H, W) it read, skipping padding (no padded buffer to crop)."""
    h, w = gx.shape[2:]
    for i in range(kh):  # a loop over kernel taps only: each step is one strided add over everything
        rows = tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        if rows is None:
            continue
        for j in range(kw):
            columns = tap_range(w, ow, j * dilation[1], stride[1], padding[2])
            if columns is None:
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            gx[:, :, in_r, in_c] += tap(i, j)[:, :, out_r, out_c]


def min_items(flops_per_item: float) -> int:
    """Items (images, channels) per thread that make a share worth a thread hand-off."""
    return int(MIN_CHUNK_FLOPS // max(1.0, flops_per_item)) + 1


def matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """``out[...] = a @ b``; bfloat16 (ml_dtypes) products come back as float32 and are rounded once,
    as PyTorch does."""
    if out.dtype.kind == "f" and out.dtype.itemsize >= 4:
        xp.matmul(a, b, out=out)
    else:
        out[...] = xp.matmul(a, b).astype(out.dtype)


def forward(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    """The NCHW output and the columns ``(C*kh*kw, N*L)`` (kept by conv.py for the weight gradient)."""
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(width, kw, stride[1], padding[2], padding[3], dilation[1])
    k, pixels = c * kh * kw, oh * ow
    cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    flat = cols.reshape(k, n * pixels)
    y = xp.empty((n, o, oh, ow), dtype=x.dtype)
    w2 = w.reshape(o, k)

    def run(start: int, stop: int) -> None:
        fill_windows(x[start:stop], lambda i, j: cols[:, i, j, start:stop].transpose(1, 0, 2, 3),
                     kh, kw, stride, padding, dilation, oh, ow)
        out = xp.empty((o, stop - start, pixels), dtype=x.dtype)
        matmul_into(xp, w2, flat[:, start * pixels:stop * pixels], out.reshape(o, -1))
        # One copy to NCHW: every op downstream (bias, relu, pooling) runs faster on contiguous data.
        y[start:stop] = out.transpose(1, 0, 2).reshape(stop - start, o, oh, ow)

    blas_for(run, n, min_items(2.0 * o * k * pixels), xp)
    return y, flat


def columns(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The columns ``(C*kh*kw, N*L)`` alone (a weight gradient whose forward's were not kept)."""
    n, c, h, width = x.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(width, kw, stride[1], padding[2], padding[3], dilation[1])
    cols = xp.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    fill_windows(x, lambda i, j: cols[:, i, j].transpose(1, 0, 2, 3), kh, kw, stride, padding, dilation, oh, ow)
    return cols.reshape(c * kh * kw, n * oh * ow)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x``: per thread, its images' ``W^T @ g`` columns, added back by col2im."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    k, pixels = c * kh * kw, oh * ow
    gx = xp.empty(tuple(input_shape), dtype=g.dtype)
    wt = w.reshape(o, k).T

    def run(start: int, stop: int) -> None:
        count = stop - start
        g2 = xp.ascontiguousarray(g[start:stop].reshape(count, o, pixels).transpose(1, 0, 2))  # (O, n, L)
        gcols = xp.empty((c, kh, kw, count, oh, ow), dtype=g.dtype)
        matmul_into(xp, wt, g2.reshape(o, count * pixels), gcols.reshape(k, count * pixels))
        part = gx[start:stop]
        part[...] = 0
        add_windows(part, lambda i, j: gcols[:, i, j].transpose(1, 0, 2, 3), kh, kw, stride, padding, dilation, oh, ow)

    blas_for(run, n, min_items(2.0 * o * k * pixels), xp)
    return gx


def weight_grad(xp: Any, g: Any, cols: Any, weight_shape: tuple) -> Any:
    """The gradient in ``w``: ``g (O, N*L) @ cols^T``, each thread its block of output channels."""
    n, o, oh, ow = g.shape
    k = cols.shape[0]
    gw = xp.empty((o, k), dtype=g.dtype)

    def run(start: int, stop: int) -> None:
        rows = xp.ascontiguousarray(g[:, start:stop].transpose(1, 0, 2, 3)).reshape(stop - start, n * oh * ow)
        matmul_into(xp, rows, cols.T, gw[start:stop])  # BLAS takes the transpose for free

    blas_for(run, o, min_items(2.0 * k * n * oh * ow), xp)
    return gw.reshape(weight_shape)
