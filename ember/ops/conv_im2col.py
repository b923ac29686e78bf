"""im2col convolution, batch-wide and channels-last, for one group.

The columns are ``(N*OH*OW, kh*kw*C)``: one row per output pixel, holding its window in
(tap, channel) order, so the forward is one GEMM ``cols @ W'^T`` with ``W' = (O, kh*kw*C)`` (the
output comes out channels-last and takes one copy to NCHW), the input gradient one GEMM
``g' @ W'`` with ``g'`` the output gradient channels-last, and the weight gradient one GEMM
``cols^T @ g'``. conv.py uses this layout for small feature maps (fewer than 128 output pixels:
ResNet's stride-2 and 1x1 layers), where per-image GEMMs would be too small.

Why channels-last: on small maps an NCHW window is a run of 2-8 pixels, so im2col and col2im
moved data a few elements at a time (with stride 2, one element at a time). Channels-last, each
tap copies or adds runs of C contiguous values. Measured on one thread against the NCHW layout
it replaces (docs/cpu-performance.md): the input gradient of ResNet-18's stride-2 3x3 layers
4.8 -> 3.0 ms and 4.1 -> 2.6 ms, their forwards 3.2 -> 2.7 and 3.2 -> 2.6 ms.

Threads: with the BLAS split off (``EMBER_BLAS_SPLIT=0``), the copies (im2col, col2im, layout changes) run split
over ember's threads by images and each pass's GEMM runs once, on BLAS's own threads; with the
split (``cpu_blas.blas_for``), each thread takes its images through copies and GEMM alike.

``fill_windows`` and ``add_windows`` (im2col and col2im of NCHW data, tap by tap from the unpadded
input, padding zeroed or skipped) serve the per-image layout of ``conv_per_image.py`` and the
grouped path of ``conv.py``.

Example:
    >>> import numpy as np
    >>> y, _ = forward(np, np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), (1, 1), (0, 0, 0, 0), (1, 1))
    >>> y[0, 0]
    array([[4., 4.],
           [4., 4.]])
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.backends import cpu_blas, native_kernel
from ember.backends.cpu_blas import blas_for
from ember.backends.cpu_mkl import xp_matmul
from ember.backends.cpu_threads import parallel_for
from ember.ops.conv_geometry import out_size, tap_range

MIN_CHUNK_FLOPS = 4e6  # GEMM flops per thread below which a split pass runs on one thread
MIN_COPY_ELEMENTS = 1 << 16  # elements copied per thread below which a copy runs on one thread


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


def _to_nchw_axes(view: Any) -> Any:
    """An (N, H, W, C) view seen as (N, C, H, W), so the NCHW helpers above index it."""
    return view.transpose(0, 3, 1, 2)


def min_items(flops_per_item: float) -> int:
    """Items (images, channels) per thread that make a share worth a thread hand-off."""
    return int(MIN_CHUNK_FLOPS // max(1.0, flops_per_item)) + 1


def matmul_into(xp: Any, a: Any, b: Any, out: Any) -> None:
    """``out[...] = a @ b``; bfloat16 (ml_dtypes) products come back as float32 and are rounded once, as
    PyTorch does. float32 matrices go to the backend's native GEMM where it has one (ember's AVX-512 GEMM:
    1.3-1.8x OpenBLAS's AVX2 kernels on the im2col shapes); under the BLAS split (``cpu_blas.available()``:
    the caller is one of ``blas_for``'s chunks, BLAS held to one thread) it runs on the calling thread, at
    any thread count. Stacks (the per-image layout) stay with BLAS's one stacked call: a native call per
    image measured slower (the ResNet stem's forward 10.2 against 8.8 ms, one thread: ~10 us of Python per
    call on 128 images)."""
    if out.dtype.kind == "f" and out.dtype.itemsize >= 4:
        if out.dtype == np.float32 and a.ndim == 2 and b.ndim == 2:
            gemm = native_kernel(xp, "matmul_f32")
            if gemm is not None and gemm(a, b, out=out, local=cpu_blas.available()) is not None:
                return
        xp_matmul(xp, a, b, out=out)
    else:
        out[...] = xp_matmul(xp, a, b).astype(out.dtype)


def copy_for(xp: Any, fn: Callable[[int, int], object], total: int, per_item: int) -> None:
    """Run a copy over ``range(total)`` images on ember's threads (NumPy copies release the GIL);
    on one thread for other array backends or small copies."""
    if xp is not np:
        fn(0, total)
        return
    parallel_for(fn, total, max(1, -(-MIN_COPY_ELEMENTS // max(1, per_item))))


def _passes(xp: Any, total: int, gemm_flops_per_item: float, copy_per_item: int,
            before: Callable[[int, int], object], gemm: Callable[[int, int], object],
            after: Callable[[int, int], object]) -> None:
    """``before``, ``gemm``, ``after`` over ``range(total)`` images: with the BLAS split, each
    thread runs all three on its images; otherwise the copies run split over ember's threads
    and the GEMM runs once on BLAS's own threads (never called from two threads at once)."""
    if xp is np and cpu_blas.available():
        def fused(start: int, stop: int) -> None:
            before(start, stop)
            gemm(start, stop)
            after(start, stop)
        blas_for(fused, total, min_items(gemm_flops_per_item), xp)
        return
    copy_for(xp, before, total, copy_per_item)
    gemm(0, total)
    copy_for(xp, after, total, copy_per_item)


def _geometry(x_shape: tuple, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    oh = out_size(x_shape[2], kh, stride[0], padding[0], padding[1], dilation[0])
    ow = out_size(x_shape[3], kw, stride[1], padding[2], padding[3], dilation[1])
    return oh, ow


def _fill(xp: Any, x: Any, cols: Any, start: int, stop: int, kh: int, kw: int, stride: tuple,
          padding: tuple, dilation: tuple) -> None:
    """Columns of images ``[start, stop)``: ``cols`` is (N, OH, OW, kh, kw, C). With several taps
    the images are made channels-last first (each tap then copies contiguous channel runs; for
    one tap reading the NCHW input directly is cheaper)."""
    part = x[start:stop]
    if kh * kw > 1:
        part = xp.ascontiguousarray(part.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    oh, ow = cols.shape[1:3]
    fill_windows(part, lambda i, j: _to_nchw_axes(cols[start:stop, :, :, i, j]), kh, kw, stride, padding,
                 dilation, oh, ow)


def _weights(xp: Any, w: Any) -> Any:
    """(O, C, kh, kw) weights as ``W' = (O, kh*kw*C)``, the columns' (tap, channel) order."""
    o = w.shape[0]
    return xp.ascontiguousarray(w.transpose(0, 2, 3, 1)).reshape(o, -1)


def forward(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple) -> tuple:
    """The NCHW output and the columns ``(N*OH*OW, kh*kw*C)`` (kept by conv.py for the weight
    gradient)."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    oh, ow = _geometry(x.shape, kh, kw, stride, padding, dilation)
    k, pixels = c * kh * kw, oh * ow
    cols = xp.empty((n, oh, ow, kh, kw, c), dtype=x.dtype)
    flat = cols.reshape(n * pixels, k)
    rows = xp.empty((n * pixels, o), dtype=x.dtype)  # the output, channels-last
    y = xp.empty((n, o, oh, ow), dtype=x.dtype)
    wt = _weights(xp, w).T

    def before(start: int, stop: int) -> None:
        _fill(xp, x, cols, start, stop, kh, kw, stride, padding, dilation)

    def gemm(start: int, stop: int) -> None:
        matmul_into(xp, flat[start * pixels:stop * pixels], wt, rows[start * pixels:stop * pixels])

    def after(start: int, stop: int) -> None:
        y[start:stop] = rows[start * pixels:stop * pixels].reshape(stop - start, oh, ow, o).transpose(0, 3, 1, 2)

    _passes(xp, n, 2.0 * o * k * pixels, k * pixels, before, gemm, after)
    return y, flat


def columns(xp: Any, x: Any, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The columns ``(N*OH*OW, kh*kw*C)`` alone (a weight gradient whose forward's were not kept)."""
    n, c = x.shape[:2]
    oh, ow = _geometry(x.shape, kh, kw, stride, padding, dilation)
    cols = xp.empty((n, oh, ow, kh, kw, c), dtype=x.dtype)
    copy_for(xp, lambda start, stop: _fill(xp, x, cols, start, stop, kh, kw, stride, padding, dilation),
              n, c * kh * kw * oh * ow)
    return cols.reshape(n * oh * ow, c * kh * kw)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``x``: ``g' @ W'`` (columns of every output pixel), added back by col2im
    into a channels-last buffer, then written NCHW."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    oh, ow = g.shape[2:]
    k, pixels = c * kh * kw, oh * ow
    gx = xp.empty(tuple(input_shape), dtype=g.dtype)
    w2 = _weights(xp, w)
    g_rows = xp.empty((n * pixels, o), dtype=g.dtype)  # g channels-last
    gcols = xp.empty((n, oh, ow, kh, kw, c), dtype=g.dtype)
    flat = gcols.reshape(n * pixels, k)

    def before(start: int, stop: int) -> None:
        g_rows[start * pixels:stop * pixels] = g[start:stop].transpose(0, 2, 3, 1).reshape(-1, o)

    def gemm(start: int, stop: int) -> None:
        matmul_into(xp, g_rows[start * pixels:stop * pixels], w2, flat[start * pixels:stop * pixels])

    def after(start: int, stop: int) -> None:
        part = xp.zeros((stop - start, h, width, c), dtype=g.dtype)
        add_windows(_to_nchw_axes(part), lambda i, j: _to_nchw_axes(gcols[start:stop, :, :, i, j]),
                    kh, kw, stride, padding, dilation, oh, ow)
        gx[start:stop] = _to_nchw_axes(part)

    _passes(xp, n, 2.0 * o * k * pixels, k * pixels, before, gemm, after)
    return gx


def weight_grad(xp: Any, g: Any, cols: Any, weight_shape: tuple) -> Any:
    """The gradient in ``w``: ``g'^T @ cols`` as (O, kh*kw*C), reordered to (O, C, kh, kw). With
    the BLAS split each thread takes a block of output channels (no reduction to combine).
    (``cols^T @ g'``, which needs no reordering, measured the same GEMM time and a slower copy.)"""
    n, o, oh, ow = g.shape
    _, c, kh, kw = weight_shape
    k, pixels = cols.shape[1], oh * ow
    gw = xp.empty((o, k), dtype=g.dtype)
    g_rows = xp.empty((n * pixels, o), dtype=g.dtype)  # g channels-last

    def copy(start: int, stop: int) -> None:
        g_rows[start * pixels:stop * pixels] = g[start:stop].transpose(0, 2, 3, 1).reshape(-1, o)

    copy_for(xp, copy, n, o * pixels)
    if xp is np and cpu_blas.available():
        blas_for(lambda start, stop: matmul_into(xp, g_rows[:, start:stop].T, cols, gw[start:stop]),
                 o, min_items(2.0 * k * n * pixels), xp)
    else:
        matmul_into(xp, g_rows.T, cols, gw)  # BLAS takes the transpose for free
    if kh * kw == 1:
        return gw.reshape(weight_shape)
    return xp.ascontiguousarray(gw.reshape(o, kh, kw, c).transpose(0, 3, 1, 2))
