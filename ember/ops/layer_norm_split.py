"""layer_norm and its backward on both cores: blocks of rows on ember's threads (NumPy releases the GIL in
its loops), for the big activations of Transformer training (a GPT's 16 x 256 x 384: ~6% of a step on one
core, all of it row by row). Each thread walks its rows in cache-sized blocks (``CACHE_ELEMENTS``), on one
thread too: the ~10 NumPy passes of a block then run in L2 instead of from memory (the NumPy-only install's
layer_norm forward + backward on 2048 x 512 rows: 2.6x the native kernels -> see docs/cpu-performance.md).

Every pass is the one ``ember.ops.nn_ops``'s impls make, applied to a block of rows, so a block's rows get the
bits they get in one call. The two rare global corrections of those impls (a mean far above the spread, squares
that overflow) are detected per block; when any block meets one, the caller runs its one-call impl on the whole
input instead, which applies them as it always did. The backward's weight and bias gradients sum over rows:
they are left to the caller, on the normalized values the blocks computed.

Example:
    >>> import numpy as np
    >>> x = np.arange(8, dtype=np.float32).reshape(4, 2)
    >>> out = layer_norm_rows(np, x, (), count=1, eps=1e-5, has_weight=False, threads=1)
    >>> [round(float(v), 3) for v in out[0][0]]
    [-1.0, 1.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import native_kernel
from ember.backends.cpu_threads import num_threads, parallel_for

# Elements per thread below which a thread hand-off (~20-50 us) costs more than the passes it shares.
SPLIT_ELEMENTS = 1 << 17
# Elements per cache block within a thread's rows: a block's input, output and temporaries stay in L2.
CACHE_ELEMENTS = 1 << 15


def worth_splitting(xp: Any, x: Any, count: int, threads: int | None = None) -> bool:
    """NumPy float32/float64 input with 2+ leading rows and ``2 * SPLIT_ELEMENTS`` elements: row blocks in cache
    (on one thread too), split over threads when there are several (``SPLIT_ELEMENTS`` per thread)."""
    return (xp is np and x.ndim > count and x.shape[0] > 1 and x.dtype.itemsize >= 4
            and x.dtype.kind == "f" and x.size >= 2 * SPLIT_ELEMENTS)


def _chunk(x: int, size: int) -> int:
    """Leading-axis items per block so a block has at least ``SPLIT_ELEMENTS`` elements."""
    per_item = max(1, size // x)
    return max(1, -(-SPLIT_ELEMENTS // per_item))


def layer_norm_rows(xp: Any, x: Any, affine: tuple, *, count: int, eps: float, has_weight: bool,
                    threads: int | None = None) -> tuple | None:
    """``(y, mean, rstd)`` as ``_layer_norm_impl`` computes them, row blocks on ember's threads; None when a
    block needs one of the rare corrections (the caller then runs the one-call impl)."""
    axes = tuple(range(x.ndim - count, x.ndim))
    stat_shape = x.shape[:x.ndim - count] + (1,) * count
    y = np.empty_like(x)
    mean = np.empty(stat_shape, x.dtype)
    rstd = np.empty(stat_shape, x.dtype)
    weight = _tiled(x, affine[0] if has_weight else None)
    bias = _tiled(x, affine[-1] if len(affine) > int(has_weight) else None)
    rare: list = []

    def block(start: int, stop: int) -> None:
        xs, ys = x[start:stop], y[start:stop]
        m = xs.mean(axis=axes, keepdims=True)
        np.subtract(xs, m, out=ys)
        var = (ys * ys).mean(axis=axes, keepdims=True)
        if bool((m * m > 4096.0 * var).any()) or not bool(np.isfinite(var).all()):
            rare.append(start)
            return
        r = 1.0 / np.sqrt(var + eps)
        ys *= r
        if weight is not None:
            ys *= weight[:stop - start]
        if bias is not None:
            ys += bias[:stop - start]
        mean[start:stop] = m
        rstd[start:stop] = r

    _run(block, x, threads)
    return None if rare else (y, mean, rstd)


def layer_norm_backward_rows(xp: Any, g: Any, x: Any, mean: Any, rstd: Any, weight: tuple, *, count: int,
                             threads: int | None = None) -> tuple | None:
    """``(gx, xhat)`` as ``_layer_norm_backward_impl`` computes them, row blocks on ember's threads (the caller
    sums ``g * xhat`` and ``g`` over rows for the weight and bias gradients); None when a block needs the mean
    correction of the normalized values (the caller then runs the one-call impl)."""
    axes = tuple(range(x.ndim - count, x.ndim))
    xhat = np.empty_like(x)
    gx = np.empty_like(x)
    w = _tiled(x, weight[0] if weight else None)
    rare: list = []

    def block(start: int, stop: int) -> None:
        gs, xh = g[start:stop], xhat[start:stop]
        m, r = mean[start:stop], rstd[start:stop]
        np.multiply(np.subtract(x[start:stop], m, out=xh), r, out=xh)
        if bool((m * m * r * r > 4096.0).any()):
            rare.append(start)
            return
        gxhat = gs * w[:stop - start] if w is not None else gs
        out = gx[start:stop]
        np.subtract(gxhat, gxhat.mean(axis=axes, keepdims=True), out=out)
        out -= xh * (gxhat * xh).mean(axis=axes, keepdims=True)
        out *= r

    _run(block, x, threads)
    return None if rare else (gx, xhat)


def _step(x: Any) -> int:
    """Leading items per cache-sized piece."""
    return max(1, CACHE_ELEMENTS // max(1, x.size // x.shape[0]))


def _tiled(x: Any, p: Any) -> Any:
    """A weight or bias broadcast to one piece's shape, contiguous: multiplying a piece by it is a contiguous
    pass (by the (width,) vector, NumPy's loop restarts every row: ~2x the time on rows of 512). Same products."""
    if p is None:
        return None
    return np.ascontiguousarray(np.broadcast_to(p, (min(_step(x), x.shape[0]),) + x.shape[1:]))


def _run(block: Any, x: Any, threads: int | None) -> None:
    """``block`` over the rows: each thread's share (one share when ``threads == 1``) in cache-sized pieces of
    whole leading items (a row's passes are the same whatever the piece, so the bits do not depend on it)."""
    step = _step(x)

    def pieces(start: int, stop: int) -> None:
        for lo in range(start, stop, step):
            block(lo, min(lo + step, stop))

    if threads == 1:
        pieces(0, x.shape[0])
    else:
        parallel_for(pieces, x.shape[0], _chunk(x.shape[0], x.size))


# ---- native kernels (numba): one pass for the statistics and one for the output, per row, on both cores ------
def _native_kernel(xp: Any, name: str, x: Any, count: int, others: tuple) -> Any:
    """The kernel ``name`` of ``cpu_norm_kernels`` when it takes these arrays: NumPy float32/float64, every array
    of ``x``'s dtype, at least one normalized element; else None (the NumPy code)."""
    if xp is not np or x.dtype not in (np.float32, np.float64) or x.ndim < count or x.size == 0:
        return None
    if any(a.dtype != x.dtype for a in others):
        return None
    return native_kernel(xp, name)


def _rows_view(x: Any, count: int) -> Any:
    """``x`` as a C-contiguous (rows, normalized elements) array (a view when ``x`` is contiguous)."""
    width = int(np.prod(x.shape[x.ndim - count:], dtype=np.int64))
    return np.ascontiguousarray(x).reshape(-1, width)


def _flat_param(p: Any, width: int, fill: float, dtype: Any) -> Any:
    return np.full(width, fill, dtype) if p is None else np.ascontiguousarray(p, dtype).reshape(width)


def _row_chunk(width: int) -> int:
    """Rows per thread so that each has at least ``NATIVE_SPLIT_ELEMENTS`` elements."""
    return max(1, -(-NATIVE_SPLIT_ELEMENTS // max(1, width)))


# Rows per partial sum of the weight and bias gradients: about this many elements.
SUM_BLOCK_ELEMENTS = 1 << 15
# Elements per thread below which the native kernels run on the calling thread (a hand-off costs ~20-50 us,
# a native pass ~0.3-0.5 ns per element).
NATIVE_SPLIT_ELEMENTS = 1 << 16


def layer_norm_native(xp: Any, x: Any, affine: tuple, *, count: int, eps: float, has_weight: bool) -> tuple | None:
    """``(y, mean, rstd)`` by the native kernel (statistics summed in float64), rows split over ember's threads;
    None when the kernel is absent or does not take the arrays, or when a row's variance is not finite (inf/NaN,
    overflowing squares: the caller's NumPy code gives those PyTorch's values)."""
    kernel = _native_kernel(xp, "layer_norm_rows", x, count, affine)
    if kernel is None:
        return None
    rows = _rows_view(x, count)
    width = rows.shape[1]
    weight = affine[0] if has_weight else None
    bias = affine[-1] if len(affine) > int(has_weight) else None
    w = _flat_param(weight, width, 1.0, x.dtype)
    b = _flat_param(bias, width, 0.0, x.dtype)
    y = np.empty_like(rows)
    mean = np.empty(rows.shape[0], x.dtype)
    rstd = np.empty(rows.shape[0], x.dtype)
    bad: list = []
    one_pass = 1e-6 if x.dtype == np.float32 else np.inf  # float32 squares are exact in float64

    def block(r0: int, r1: int) -> None:
        bad.append(kernel(rows, w, b, float(eps), one_pass, r0, r1, y, mean, rstd))

    parallel_for(block, rows.shape[0], _row_chunk(width))
    if any(bad):
        return None
    stat_shape = x.shape[:x.ndim - count] + (1,) * count
    return y.reshape(x.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


def layer_norm_backward_native(xp: Any, g: Any, x: Any, mean: Any, rstd: Any, weight: tuple, *,
                               count: int) -> tuple | None:
    """``(gx, gweight, gbias)`` by the native kernel: two passes per row, the weight and bias gradients summed in
    float64 per block of rows, then over blocks; None when the kernel is absent or does not take the arrays."""
    kernel = _native_kernel(xp, "layer_norm_backward_rows", x, count, (g, mean, rstd) + tuple(weight))
    if kernel is None or g.shape != x.shape:
        return None
    rows, grows = _rows_view(x, count), _rows_view(g, count)
    width = rows.shape[1]
    w = _flat_param(weight[0] if weight else None, width, 1.0, x.dtype)
    m = np.ascontiguousarray(mean).reshape(-1)
    s = np.ascontiguousarray(rstd).reshape(-1)
    gx = np.empty_like(rows)
    # The weight and bias gradients sum over rows in float64, per fixed block of rows, then the blocks in order:
    # the same bits whatever the number of threads.
    total = rows.shape[0]
    per_block = max(4, min(total, -(-SUM_BLOCK_ELEMENTS // width)))
    blocks = -(-total // per_block)
    gw_parts, gb_parts = np.zeros((blocks, width)), np.zeros((blocks, width))

    def run(k0: int, k1: int) -> None:
        kernel(grows, rows, m, s, w, per_block, k0, k1, gx, gw_parts, gb_parts)

    parallel_for(run, blocks, max(1, -(-NATIVE_SPLIT_ELEMENTS // (per_block * width))))
    gw, gb = gw_parts.sum(axis=0), gb_parts.sum(axis=0)
    norm_shape = x.shape[x.ndim - count:]
    return gx.reshape(x.shape), gw.astype(x.dtype).reshape(norm_shape), gb.astype(x.dtype).reshape(norm_shape)
