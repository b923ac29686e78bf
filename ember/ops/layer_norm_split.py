"""layer_norm and its backward on both cores: blocks of rows on ember's threads (NumPy releases the GIL in
its loops), for the big activations of Transformer training (a GPT's 16 x 256 x 384: ~6% of a step on one
core, all of it row by row). Each thread walks its rows in cache-sized blocks (``CACHE_ELEMENTS``), on one
thread too: the ~10 NumPy passes of a block then run in L2 instead of from memory.

The blocks compute what ``ember.ops.nn_ops``'s one-call impls compute, with the row sums as BLAS matrix-vector
products and the sums of squares as ``einsum`` (one pass each, no temporaries), so their values are the one-call
impls' within the rounding of those sums (tests/nn/test_layer_norm_split_rows.py: as close to a long double run),
and the same bits on one thread or several (fixed blocks; the weight and bias gradients are per-block column sums
(BLAS, in the input's dtype) added in block order in float64). The two rare global corrections of the one-call impls (a mean far above the
spread, squares that overflow) are checked over every row; when any row meets one, the caller runs its one-call
impl on the whole input instead, which applies them as it always did. NumPy-only, 2048 x 512 float32, forward +
backward with the autograd around it: 2.8-3.2x the native kernels before these sums and the weight and bias
gradients moved into the blocks, 2.1-2.3x after (docs/cpu-performance.md, "cliff21").

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


def layer_norm_rows(xp: Any, x: Any, affine: tuple, *, count: int, eps: float, has_weight: bool,
                    threads: int | None = None) -> tuple | None:
    """``(y, mean, rstd)`` of ``_layer_norm_impl`` by row blocks in cache (on ember's threads when there are
    several); None when a block needs one of the rare corrections (the caller then runs the one-call impl).
    A row's sum is one BLAS matrix-vector product and its sum of squares one ``einsum`` (each one pass, no
    temporary; NumPy's ``mean`` and ``(y * y).mean()`` are a pass more and slower reductions), so the values
    are the one-call impl's within float rounding of those sums, not bit for bit."""
    rows = _rows(x, count)
    width = rows.shape[1]
    y = np.empty_like(rows)
    mean = np.empty(rows.shape[0], x.dtype)
    rstd = np.empty(rows.shape[0], x.dtype)
    weight = _tiled(rows, affine[0] if has_weight else None)
    bias = _tiled(rows, affine[-1] if len(affine) > int(has_weight) else None)
    ones = np.ones(width, x.dtype)
    variance = np.empty(rows.shape[0], x.dtype)

    def block(start: int, stop: int, _scratch: Any) -> None:
        xs, ys = rows[start:stop], y[start:stop]
        m = np.divide(xs @ ones, width, out=mean[start:stop])[:, None]
        np.subtract(xs, m, out=ys)
        var = np.divide(np.einsum("ij,ij->i", ys, ys), width, out=variance[start:stop])
        r = np.divide(1.0, np.sqrt(var + eps), out=rstd[start:stop])[:, None]
        ys *= r
        if weight is not None:
            ys *= weight[:stop - start]
        if bias is not None:
            ys += bias[:stop - start]

    _run(block, rows, threads, 0)
    # The rare corrections, checked once over every row (a block's wasted passes cost nothing in the common case)
    if bool((mean * mean > 4096.0 * variance).any()) or not bool(np.isfinite(variance).all()):
        return None
    stat_shape = x.shape[:x.ndim - count] + (1,) * count
    return y.reshape(x.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


def layer_norm_backward_rows(xp: Any, g: Any, x: Any, mean: Any, rstd: Any, weight: tuple, *, count: int,
                             threads: int | None = None) -> tuple | None:
    """``(gx, gweight, gbias)`` of ``_layer_norm_backward_impl`` by row blocks in cache (on ember's threads when
    there are several): a block's normalized values stay in scratch, its row sums are BLAS matrix-vector
    products, and the weight and bias gradients are per-block column sums added in block order (the same bits
    whatever the number of threads). None when a block needs the mean correction of the normalized values (the
    caller then runs the one-call impl)."""
    rows, grows = _rows(x, count), _rows(g, count)
    total, width = rows.shape
    m_all, r_all = np.ascontiguousarray(mean).reshape(-1), np.ascontiguousarray(rstd).reshape(-1)
    gx = np.empty_like(rows)
    w = _tiled(rows, weight[0] if weight else None)
    w_row = (np.ascontiguousarray(weight[0], x.dtype).reshape(width) if weight else np.ones(width, x.dtype))
    step = _step(rows)
    gw_parts = np.empty((-(-total // step), width), x.dtype)
    gb_parts = np.empty_like(gw_parts)
    ones = np.ones(step, x.dtype)
    if bool((m_all * m_all * r_all * r_all > 4096.0).any()):
        return None

    def block(start: int, stop: int, scratch: Any) -> None:
        gs, n = grows[start:stop], stop - start
        m, r = m_all[start:stop, None], r_all[start:stop, None]
        xh, p, r_tile = scratch[0][:n], scratch[1][:n], scratch[2][:n]
        # 1/std as a whole tile: two contiguous products by it cost less than two by the (rows, 1) column (NumPy
        # restarts its loop every row for those: ~3x a contiguous pass in cache on rows of 512)
        np.copyto(r_tile, r)
        np.subtract(rows[start:stop], m, out=xh)
        xh *= r_tile
        np.multiply(gs, xh, out=p)
        k = start // step
        np.matmul(ones[:n], p, out=gw_parts[k])  # sum over the block's rows of g * xhat
        np.matmul(ones[:n], gs, out=gb_parts[k])
        c2 = (p @ w_row) / width  # mean of g * w * xhat over each row
        c1 = (gs @ w_row) / width  # mean of g * w
        out = gx[start:stop]
        if w is not None:
            np.multiply(gs, w[:n], out=out)
        else:
            out[...] = gs
        out -= c1[:, None]
        np.multiply(xh, c2[:, None], out=p)
        out -= p
        out *= r_tile

    _run(block, rows, threads, 3)
    norm_shape = x.shape[x.ndim - count:]
    param_dtype = weight[0].dtype if weight else x.dtype
    gw = np.add.reduce(gw_parts, axis=0, dtype=np.float64).astype(param_dtype).reshape(norm_shape)
    gb = np.add.reduce(gb_parts, axis=0, dtype=np.float64).astype(param_dtype).reshape(norm_shape)
    return gx.reshape(x.shape), gw, gb


def _rows(x: Any, count: int) -> Any:
    """``x`` as C-contiguous (rows, normalized elements) (a view when ``x`` is contiguous)."""
    width = int(np.prod(x.shape[x.ndim - count:], dtype=np.int64))
    return np.ascontiguousarray(x).reshape(-1, width)


def _step(x: Any) -> int:
    """Rows per cache-sized block (``x`` is (rows, width))."""
    return max(1, CACHE_ELEMENTS // max(1, x.shape[1]))


def _tiled(x: Any, p: Any) -> Any:
    """A weight or bias as one block's (rows, width), contiguous: multiplying a block by it is a contiguous
    pass (by the (width,) vector, NumPy's loop restarts every row: ~1.3x the time on rows of 512). Same products."""
    if p is None:
        return None
    p = np.ascontiguousarray(p, x.dtype).reshape(x.shape[1])
    return np.ascontiguousarray(np.broadcast_to(p, (min(_step(x), x.shape[0]), x.shape[1])))


def _run(block: Any, rows: Any, threads: int | None, scratch: int) -> None:
    """``block(start, stop, scratch)`` over fixed blocks of ``_step`` rows (the same blocks whatever the number
    of threads, so per-block partial sums give the same bits), the blocks shared out over ember's threads
    (each thread at least ``SPLIT_ELEMENTS`` elements) unless ``threads == 1``; ``scratch`` (rows, width)
    buffers per thread."""
    total, width = rows.shape
    step = _step(rows)
    blocks = -(-total // step)

    def pieces(k0: int, k1: int) -> None:
        buffers = [np.empty((min(step, total), width), rows.dtype) for _ in range(scratch)]
        for k in range(k0, k1):
            block(k * step, min((k + 1) * step, total), buffers)

    if threads == 1:
        pieces(0, blocks)
    else:
        parallel_for(pieces, blocks, max(1, -(-SPLIT_ELEMENTS // (step * width))))


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
