"""im2col convolution laid out per image: one GEMM per image, no transposes before or after.

The batch-wide layout of ``ember/ops/conv.py`` puts channels first, ``(C*k*k, N*L)`` columns, so
its forward GEMM returns ``(O, N, L)`` and needs a transposing copy to NCHW, and its input gradient
needs ``g`` transposed to ``(O, N*L)`` first. Here the columns are ``(N, C*k*k, L)``: the forward is
``W @ cols[n]``, which is NCHW as it comes out; the input gradient is ``W^T @ g[n]`` on ``g`` as it
is; the weight gradient sums ``g[n] @ cols[n]^T`` over images. Per-image GEMMs are efficient when
each image has enough pixels (``L = OH*OW``); conv.py picks this layout for maps of 128 pixels and
more (the MNIST CNN's layers, ResNet's 7x7 stem), measured in docs/cpu-performance.md.

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2))
    >>> c = cols(np, x, 2, 2, (1, 1), (0, 0, 0, 0), (1, 1))
    >>> forward(np, c, w, 2, 2)[0, 0]
    array([[4., 4.],
           [4., 4.]])
"""
from __future__ import annotations

from typing import Any

from ember.ops.conv_geometry import out_size, tap_range


def cols(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The im2col matrix of each image, ``(N, C*kh*kw, OH*OW)``, filled tap by tap (padding zeroed)."""
    n, c, h, w = x.shape
    oh = out_size(h, kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(w, kw, stride[1], padding[2], padding[3], dilation[1])
    out = xp.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        rows = tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        for j in range(kw):
            columns = tap_range(w, ow, j * dilation[1], stride[1], padding[2])
            dst = out[:, :, i, j]
            if rows is None or columns is None:
                dst[...] = 0
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            dst[:, :, :out_r.start] = 0
            dst[:, :, out_r.stop:] = 0
            dst[:, :, out_r, :out_c.start] = 0
            dst[:, :, out_r, out_c.stop:] = 0
            dst[:, :, out_r, out_c] = x[:, :, in_r, in_c]
    return out.reshape(n, c * kh * kw, oh * ow)


def _round(out: Any, dtype: Any) -> Any:
    # bfloat16 (ml_dtypes) products come back as float32: round once to the inputs' dtype, as PyTorch.
    return out if out.dtype == dtype else out.astype(dtype)


def forward(xp: Any, columns: Any, w: Any, oh: int, ow: int) -> Any:
    """``(N, O, OH, OW)`` from the columns: one GEMM per image, already NCHW."""
    o = w.shape[0]
    out = xp.matmul(w.reshape(o, -1), columns)
    return _round(out, columns.dtype).reshape(columns.shape[0], o, oh, ow)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x``: ``W^T @ g[n]`` per image, then col2im tap by tap (padding skipped)."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2], g.shape[3]
    gcols = _round(xp.matmul(w.reshape(o, -1).T, g.reshape(n, o, oh * ow)), g.dtype)
    gcols = gcols.reshape(n, c, kh, kw, oh, ow)
    gx = xp.zeros(input_shape, dtype=g.dtype)
    for i in range(kh):
        rows = tap_range(h, oh, i * dilation[0], stride[0], padding[0])
        if rows is None:
            continue
        for j in range(kw):
            columns = tap_range(width, ow, j * dilation[1], stride[1], padding[2])
            if columns is None:
                continue
            (out_r, in_r), (out_c, in_c) = rows, columns
            gx[:, :, in_r, in_c] += gcols[:, :, i, j, out_r, out_c]
    return gx


def weight_grad(xp: Any, g: Any, columns: Any, weight_shape: tuple) -> Any:
    """The gradient in ``w``: ``sum_n g[n] @ cols[n]^T`` (BLAS takes each transpose for free)."""
    n, o = g.shape[:2]
    per_image = xp.matmul(g.reshape(n, o, -1), columns.transpose(0, 2, 1))
    return _round(per_image.sum(axis=0), g.dtype).reshape(weight_shape)
