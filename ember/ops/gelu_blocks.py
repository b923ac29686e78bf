"""gelu (erf form) and its backward in NumPy, block by block: the install without numba.

Without the native kernels, ``0.5 * x * (1 + erf(x / sqrt 2))`` is the table erf (``cpu_erf_table``, 13 passes
in cache) plus four passes over the whole array, and the backward ``g * (cdf + x pdf)`` eight more, each a trip
through memory for a Transformer's MLP activation. Here both formulas run on blocks of 32K elements with buffers
that stay in cache, each step in place, blocks split over ember's threads. Every step is the formula's own operation on the same operands in the
same order (only commuted), so the bits equal the whole-array formula's, which a fused graph replays.

The forward's ``1 + erf(x / sqrt 2)`` is kept for the backward of the same input array when the caller asks
(``keep=True``: autograd will run one), so a training step computes the table erf once instead of twice (~1/3 of
the NumPy-only step; the native kernels recompute it in one pass). The backward takes it only for the very array
object the forward saw, while that array is alive, and drops it once read; ``cdf = (1 + erf) * 0.5`` is the
recomputed value bit for bit. The cost: one float32 array per gelu input awaiting its backward (PyTorch keeps
only the input).

Example:
    >>> import numpy as np
    >>> x = np.linspace(-3, 3, 70_000, dtype=np.float32)
    >>> out = gelu(x, lambda t, out: np.copyto(out, t))   # any erf(t, out=) works
    >>> out.shape
    (70000,)
"""
from __future__ import annotations

import math
import weakref
from typing import Any, Callable

import numpy as np

from ember.backends.cpu_threads import parallel_for

BLOCK = 1 << 15
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def takes(*arrays: Any) -> bool:
    """Whether the blocked path computes this call: float32 NumPy arrays of one shape (the backend's erf takes
    ``out=`` for float32), big enough for blocks to pay (below two blocks the whole-array formula runs)."""
    first = arrays[0]
    return (all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.shape == first.shape for a in arrays)
            and first.size >= 2 * BLOCK)


# id(input array) -> (weak reference to it, its 1 + erf(x / sqrt 2)): see the module notes.
_KEPT: dict[int, tuple] = {}


def _keep(x: np.ndarray, one_plus_erf: np.ndarray) -> None:
    key = id(x)
    _KEPT[key] = (weakref.ref(x, lambda _ref, key=key: _KEPT.pop(key, None)), one_plus_erf)


def _kept(x: np.ndarray) -> np.ndarray | None:
    entry = _KEPT.pop(id(x), None)
    return entry[1] if entry is not None and entry[0]() is x else None


def gelu(x: np.ndarray, erf: Callable, keep: bool = False) -> np.ndarray:
    """``0.5 * x * (1 + erf(x * 0.70710677))`` by blocks; ``erf(t, out=t)`` is the backend's erf. ``keep``: keep
    ``1 + erf`` for ``gelu_backward`` of this very array."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, x.dtype)
    flat_out = out.reshape(-1)
    scale, half, one = (x.dtype.type(v) for v in (_INV_SQRT_2, 0.5, 1.0))
    kept = np.empty(flat.size, x.dtype) if keep else None

    def blocks(first: int, last: int) -> None:
        buffer = np.empty(BLOCK, x.dtype) if kept is None else kept
        for start in range(first * BLOCK, min(last * BLOCK, flat.size), BLOCK):
            xs, os = flat[start:start + BLOCK], flat_out[start:start + BLOCK]
            t = buffer[:xs.size] if kept is None else kept[start:start + xs.size]
            np.multiply(xs, scale, out=t)
            erf(t, out=t)
            t += one
            np.multiply(xs, half, out=os)  # 0.5 * x, then times (1 + erf): the formula's order
            os *= t

    parallel_for(blocks, -(-flat.size // BLOCK), 2)
    if kept is not None:
        _keep(x, kept)
    return out


def gelu_backward(g: np.ndarray, x: np.ndarray, erf: Callable) -> np.ndarray:
    """``g * (cdf + x * pdf)``, ``cdf = (erf(x / sqrt 2) + 1) * 0.5``, ``pdf = exp(x * x * -0.5) / sqrt(2 pi)``,
    by blocks."""
    flat_g, flat_x = np.ascontiguousarray(g).reshape(-1), np.ascontiguousarray(x).reshape(-1)
    out = np.empty(x.shape, x.dtype)
    flat_out = out.reshape(-1)
    scale, half, one, minus_half, norm = (x.dtype.type(v) for v in (_INV_SQRT_2, 0.5, 1.0, -0.5, _INV_SQRT_2PI))
    kept = _kept(x)

    def blocks(first: int, last: int) -> None:
        cdf, pdf = np.empty(BLOCK, x.dtype), np.empty(BLOCK, x.dtype)
        for start in range(first * BLOCK, min(last * BLOCK, flat_x.size), BLOCK):
            xs = flat_x[start:start + BLOCK]
            c, p = cdf[:xs.size], pdf[:xs.size]
            if kept is None:
                np.multiply(xs, scale, out=c)
                erf(c, out=c)
                c += one
                c *= half
            else:  # the forward's 1 + erf of this array: the same bits
                np.multiply(kept[start:start + xs.size], half, out=c)
            np.multiply(xs, xs, out=p)
            p *= minus_half
            np.exp(p, out=p)
            p *= norm
            p *= xs  # x * pdf
            c += p
            np.multiply(flat_g[start:start + BLOCK], c, out=flat_out[start:start + BLOCK])

    parallel_for(blocks, -(-flat_x.size // BLOCK), 2)
    return out
