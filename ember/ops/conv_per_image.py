"""im2col convolution laid out per image: one GEMM per image, no transposes before or after.

The batch-wide layout of ``ember/ops/conv.py`` puts channels first, ``(C*k*k, N*L)`` columns, so
its forward GEMM returns ``(O, N, L)`` and needs a transposing copy to NCHW, and its input gradient
needs ``g`` transposed to ``(O, N*L)`` first. Here the columns are ``(N, C*k*k, L)``: the forward is
``W @ cols[n]``, which is NCHW as it comes out; the input gradient is ``W^T @ g[n]`` on ``g`` as it
is; the weight gradient sums ``g[n] @ cols[n]^T`` over images. Per-image GEMMs are efficient when
each image has enough pixels (``L = OH*OW``); conv.py picks this layout for maps of 128 pixels and
more (the MNIST CNN's layers, ResNet's 7x7 stem), measured in docs/cpu-performance.md.

Every pass splits the images over ember's threads (``cpu_blas.blas_for``): each thread fills its
images' columns, runs their GEMMs on one BLAS thread and writes their outputs (the weight gradient:
its images' share of the sum, the shares added once at the end).

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2))
    >>> y, c = forward(np, x, w, (1, 1), (0, 0, 0, 0), (1, 1))
    >>> y[0, 0]
    array([[4., 4.],
           [4., 4.]])
"""
from __future__ import annotations

from typing import Any

from ember.backends.cpu_blas import blas_for
from ember.backends.cpu_mkl import xp_matmul
from ember.ops.conv_geometry import out_size
from ember.ops.conv_im2col import add_windows, copy_for, fill_windows, matmul_into, min_items


def _geometry(x_shape: tuple, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    oh = out_size(x_shape[2], kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x_shape[3], kw, stride[1], padding[2], padding[3], dilation[1])
    return oh, ow


def cols(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The im2col matrix of each image, ``(N, C*kh*kw, OH*OW)``, filled tap by tap (padding zeroed)."""
    n, c = x.shape[:2]
    oh, ow = _geometry(x.shape, kh, kw, stride, padding, dilation)
    out = xp.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)

    def fill(start: int, stop: int) -> None:  # split over ember's threads by images (NumPy copies drop the GIL)
        fill_windows(x[start:stop], lambda i, j: out[start:stop, :, i, j], kh, kw, stride, padding, dilation, oh, ow)

    copy_for(xp, fill, n, c * kh * kw * oh * ow)
    return out.reshape(n, c * kh * kw, oh * ow)


def forward(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    """``(N, O, OH, OW)`` and the columns ``(N, C*kh*kw, OH*OW)`` (kept for the weight gradient):
    one GEMM per image, already NCHW."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    oh, ow = _geometry(x.shape, kh, kw, stride, padding, dilation)
    k, pixels = c * kh * kw, oh * ow
    columns = xp.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    y = xp.empty((n, o, pixels), dtype=x.dtype)
    w2 = w.reshape(o, k)

    def run(start: int, stop: int) -> None:
        fill_windows(x[start:stop], lambda i, j: columns[start:stop, :, i, j], kh, kw, stride, padding, dilation, oh, ow)
        matmul_into(xp, w2, columns[start:stop].reshape(stop - start, k, pixels), y[start:stop])

    blas_for(run, n, min_items(2.0 * o * k * pixels), xp)
    return y.reshape(n, o, oh, ow), columns.reshape(n, k, pixels)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x``: ``W^T @ g[n]`` per image, then col2im tap by tap (padding skipped)."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    k, pixels = c * kh * kw, oh * ow
    gx = xp.empty(tuple(input_shape), dtype=g.dtype)
    wt = w.reshape(o, k).T

    def run(start: int, stop: int) -> None:
        gcols = xp.empty((stop - start, c, kh, kw, oh, ow), dtype=g.dtype)
        matmul_into(xp, wt, g[start:stop].reshape(stop - start, o, pixels), gcols.reshape(stop - start, k, pixels))
        part = gx[start:stop]
        part[...] = 0
        add_windows(part, lambda i, j: gcols[:, :, i, j], kh, kw, stride, padding, dilation, oh, ow)

    blas_for(run, n, min_items(2.0 * o * k * pixels), xp)
    return gx


def weight_grad(xp: Any, g: Any, columns: Any, weight_shape: tuple) -> Any:
    """The gradient in ``w``: ``sum_n g[n] @ cols[n]^T`` (BLAS takes each transpose for free), each
    thread summing its images into its own (O, K) matrix. Half-precision products are summed in
    float32 and rounded once."""
    n, o = g.shape[:2]
    k, pixels = columns.shape[1], columns.shape[2]
    g3 = g.reshape(n, o, pixels)
    wide = g.dtype.itemsize >= 4
    partial: dict[int, Any] = {}

    def run(start: int, stop: int) -> None:
        total = xp.zeros((o, k), dtype=g.dtype if wide else xp.float32)
        product = xp.empty((o, k), dtype=total.dtype)
        for image in range(start, stop):
            if wide:
                xp_matmul(xp, g3[image], columns[image].T, out=product)
            else:
                product[...] = xp_matmul(xp, g3[image], columns[image].T)
            total += product
        partial[start] = total

    blas_for(run, n, min_items(2.0 * o * k * pixels), xp)
    parts = [partial[key] for key in sorted(partial)]  # a fixed order: the same sum every run
    total = parts[0]
    for part in parts[1:]:
        total += part
    return total.reshape(weight_shape) if wide else total.astype(g.dtype).reshape(weight_shape)
