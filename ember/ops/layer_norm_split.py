"""layer_norm and its backward on both cores: blocks of rows on ember's threads (NumPy releases the GIL in
its loops), for the big activations of Transformer training (a GPT's 16 x 256 x 384: ~6% of a step on one
core, all of it row by row).

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

from ember.backends.cpu_threads import num_threads, parallel_for

# Elements per thread below which a thread hand-off (~20-50 us) costs more than the passes it shares.
SPLIT_ELEMENTS = 1 << 17


def worth_splitting(xp: Any, x: Any, count: int, threads: int | None = None) -> bool:
    """NumPy float32/float64 input with 2+ leading rows and ``SPLIT_ELEMENTS`` per thread, several threads."""
    threads = num_threads() if threads is None else threads
    return (xp is np and threads > 1 and x.ndim > count and x.shape[0] > 1 and x.dtype.itemsize >= 4
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
    weight = affine[0] if has_weight else None
    bias = affine[-1] if len(affine) > int(has_weight) else None
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
            ys *= weight
        if bias is not None:
            ys += bias
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
    w = weight[0] if weight else None
    rare: list = []

    def block(start: int, stop: int) -> None:
        gs, xh = g[start:stop], xhat[start:stop]
        m, r = mean[start:stop], rstd[start:stop]
        np.multiply(np.subtract(x[start:stop], m, out=xh), r, out=xh)
        if bool((m * m * r * r > 4096.0).any()):
            rare.append(start)
            return
        gxhat = gs * w if w is not None else gs
        out = gx[start:stop]
        np.subtract(gxhat, gxhat.mean(axis=axes, keepdims=True), out=out)
        out -= xh * (gxhat * xh).mean(axis=axes, keepdims=True)
        out *= r

    _run(block, x, threads)
    return None if rare else (gx, xhat)


def _run(block: Any, x: Any, threads: int | None) -> None:
    if threads == 1:
        block(0, x.shape[0])
    else:
        parallel_for(block, x.shape[0], _chunk(x.shape[0], x.size))
