"""softmax, log_softmax and their backwards along the last dim in NumPy, by blocks of rows in cache: the install
without numba (whose row kernels, ember/backends/cpu_math_kernels.py, make one pass per row).

The whole-array NumPy formulas make 4-5 sweeps through memory per op, each a temporary of the input's size; here
each block of rows (``CACHE_ELEMENTS``) goes through the same steps while it sits in L2, the blocks shared out over
ember's threads. The row sums are BLAS matrix-vector products and the backward's row dot products one ``einsum``
(one pass, no temporary); each formula is the native kernel's (and PyTorch's): softmax scales by the reciprocal of
the sum, its backward is ``y * (g - sum(g * y))``, log_softmax's ``(x - max) - log(sum)``. The sums are in the
input's dtype (the kernels' are in float64): within the tests' tolerances against torch, not the kernels' bits.

Example:
    >>> import numpy as np
    >>> x = np.log(np.array([[1.0, 3.0], [2.0, 2.0]], np.float32))
    >>> softmax(x, threads=1).tolist()
    [[0.25, 0.75], [0.5, 0.5]]
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.backends.cpu_threads import parallel_for

# Elements per block: a block's input, output and scratch stay in L2 between its passes.
CACHE_ELEMENTS = 1 << 15
# Elements per thread below which a thread hand-off (~20-50 us) costs more than the passes it shares.
SPLIT_ELEMENTS = 1 << 17
# Smaller inputs run the whole-array formulas (they fit in cache already; fewer Python calls).
MIN_ELEMENTS = 1 << 16


def takes(x: Any, dim: int, *others: Any) -> bool:
    """C-contiguous float32/float64 NumPy arrays of one shape and dtype, normalized along the last dim, big enough
    for blocks to pay."""
    return (x.__class__ is np.ndarray and x.dtype in (np.float32, np.float64) and x.ndim >= 1
            and dim in (-1, x.ndim - 1) and x.size >= MIN_ELEMENTS and x.flags.c_contiguous
            and all(o.__class__ is np.ndarray and o.dtype == x.dtype and o.shape == x.shape and o.flags.c_contiguous
                    for o in others))


def _blocks(fn: Callable[[int, int, list], None], rows: int, width: int, dtype: Any, scratch: int,
            threads: int | None) -> None:
    """``fn(start, stop, buffers)`` over blocks of whole rows; ``scratch`` (block rows, width) buffers per thread."""
    step = max(1, CACHE_ELEMENTS // width)

    def pieces(first: int, last: int) -> None:
        buffers = [np.empty((min(step, rows), width), dtype) for _ in range(scratch)]
        for start in range(first * step, min(last * step, rows), step):
            fn(start, min(start + step, rows), buffers)

    blocks = -(-rows // step)
    if threads == 1:
        pieces(0, blocks)
    else:
        parallel_for(pieces, blocks, max(1, -(-SPLIT_ELEMENTS // (step * width))))


def softmax(x: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``exp(x - max) * (1 / sum)`` along the last dim."""
    width = x.shape[-1]
    rows, out = x.reshape(-1, width), np.empty_like(x)
    flat = out.reshape(-1, width)
    ones = np.ones(width, x.dtype)

    def block(start: int, stop: int, _buffers: list) -> None:
        xs, ys = rows[start:stop], flat[start:stop]
        np.subtract(xs, np.maximum.reduce(xs, axis=1, keepdims=True), out=ys)
        np.exp(ys, out=ys)
        total = ys @ ones
        ys *= np.divide(1, total, out=total)[:, None]

    _blocks(block, rows.shape[0], width, x.dtype, 0, threads)
    return out


def log_softmax(x: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``(x - max) - log(sum(exp(x - max)))`` along the last dim."""
    width = x.shape[-1]
    rows, out = x.reshape(-1, width), np.empty_like(x)
    flat = out.reshape(-1, width)
    ones = np.ones(width, x.dtype)

    def block(start: int, stop: int, buffers: list) -> None:
        xs, ys, e = rows[start:stop], flat[start:stop], buffers[0][:stop - start]
        np.subtract(xs, np.maximum.reduce(xs, axis=1, keepdims=True), out=ys)
        np.exp(ys, out=e)
        total = e @ ones
        ys -= np.log(total, out=total)[:, None]

    _blocks(block, rows.shape[0], width, x.dtype, 1, threads)
    return out


def softmax_backward(g: np.ndarray, y: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``y * (g - sum(g * y))`` along the last dim."""
    width = y.shape[-1]
    grows, yrows, out = g.reshape(-1, width), y.reshape(-1, width), np.empty_like(y)
    flat = out.reshape(-1, width)

    def block(start: int, stop: int, _buffers: list) -> None:
        gs, ys, os = grows[start:stop], yrows[start:stop], flat[start:stop]
        np.subtract(gs, np.einsum("ij,ij->i", gs, ys)[:, None], out=os)
        os *= ys

    _blocks(block, yrows.shape[0], width, y.dtype, 0, threads)
    return out


def log_softmax_backward(g: np.ndarray, y: np.ndarray, threads: int | None = None) -> np.ndarray:
    """``g - exp(y) * sum(g)`` along the last dim."""
    width = y.shape[-1]
    grows, yrows, out = g.reshape(-1, width), y.reshape(-1, width), np.empty_like(y)
    flat = out.reshape(-1, width)
    ones = np.ones(width, y.dtype)

    def block(start: int, stop: int, _buffers: list) -> None:
        gs, os = grows[start:stop], flat[start:stop]
        np.exp(yrows[start:stop], out=os)
        os *= (gs @ ones)[:, None]
        np.subtract(gs, os, out=os)

    _blocks(block, yrows.shape[0], width, y.dtype, 0, threads)
    return out
