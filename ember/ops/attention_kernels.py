"""The attention record's native path: float32 NumPy arrays through ``cpu_attention_kernels`` (numba, AVX-512).

``takes`` says whether the kernels compute a call; ``forward`` and ``backward`` bring the operands into the
layout the kernels read (4-D, unit last stride, positive strides: head-split views as they are), allocate the
outputs and split the heads over ember's threads. Without numba or AVX-512 (or with ``EMBER_CPU_KERNELS=numpy``)
``ember/ops/attention.py`` runs its NumPy path.

The output is laid out in the query's dimension order (a GPT block's ``q`` is a head-split view of a
(B, T, 3, H, D) projection, so the output is (B, T, H, D) in memory): ``out.transpose(1, 2).reshape(B, T, H * D)``
is then a view, and PyTorch's CPU flash kernel allocates its output that way too (``empty_like(query)``).

Example:
    >>> import numpy as np
    >>> q = np.ones((1, 2, 3, 4), np.float32)
    >>> takes(np, q, q, q) in (True, False)
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import cpu_kernels
from ember.backends.cpu_threads import num_threads, parallel_for

# Queries per block: a block's scores (BLOCK x S floats) stay in L2 between the products and the softmax; causal
# attention computes, per block, the keys its last query sees (waste: BLOCK / 2 keys per query). 24 measured
# fastest of 12-96 on GPT's shape (16 x 6 x 256 x 64, one thread).
BLOCK = 24
# Without a causal mask no key is skipped, and longer blocks give the backward's dV and dK products (whose depth is
# the block) longer runs per tile: 48 measured 3-8% faster than 24 for W4's backward (16 x 4 x 128 x 64) and GPT's
# shape without the mask, and no slower forward.
WIDE_BLOCK = 48
# Heads are split over ember's threads when a call has this many score elements or more per thread (a hand-off
# costs 20-50 us; 2^17 scores take ~100 us).
SPLIT_SCORES = 1 << 17


def takes(xp: Any, *arrays: Any) -> bool:
    """Whether the native kernels compute this call: NumPy float32 arrays of 2+ dims, at least one key, and
    the kernels present."""
    if xp is not np or cpu_kernels.get("attention_forward_f32") is None:
        return False
    q, k, v = arrays[:3]
    return (all(isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim >= 2 for a in arrays)
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and q.shape[-1] == k.shape[-1]
            and k.shape[-2] == v.shape[-2] and min(k.shape[-2], q.shape[-2], q.shape[-1], v.shape[-1]) >= 1)


def _four_d(a: Any) -> Any:
    """``a`` as (N, H, rows, cols) with a unit last stride and positive strides: a view when possible."""
    if a.ndim == 2:
        a = a[None, None]
    elif a.ndim == 3:
        a = a[None]
    elif a.ndim > 4:
        a = a.reshape((-1,) + a.shape[-3:])
    if a.strides[-1] != 4 or min(a.strides) < 0 or not a.flags.aligned or any(
            st % 4 for st in a.strides):
        a = np.ascontiguousarray(a)
    return a


def _like(q: Any, shape: tuple) -> Any:
    """An empty float32 array of ``shape`` (q's shape but the last axis) in q's order of axes (outermost
    first by stride), when that order keeps the last axis innermost; else C order."""
    order = sorted(range(q.ndim), key=lambda d: -q.strides[d])
    if order[-1] != q.ndim - 1 or order == list(range(q.ndim)):
        return np.empty(shape, np.float32)
    base = np.empty(tuple(shape[d] for d in order), np.float32)
    return base.transpose([order.index(d) for d in range(q.ndim)])


def _block(is_causal: bool) -> int:
    return BLOCK if is_causal else WIDE_BLOCK


def _heads(total: int, scores_per_head: int, body: Any) -> None:
    """``body(start, stop)`` over heads, split over ember's threads when each thread gets enough work."""
    threads = num_threads()
    if threads < 2 or total < 2 or total * scores_per_head < 2 * SPLIT_SCORES:
        body(0, total)
        return
    parallel_for(body, total, max(1, -(-SPLIT_SCORES // max(1, scores_per_head))))


def forward(q: Any, k: Any, v: Any, is_causal: bool, scale: float, keep: bool = True) -> tuple:
    """``(out, weights)`` of the attention record for float32 arrays (``takes`` said yes); ``keep=False``: the
    probabilities are not written (inference: ~25 MB a GPT layer), ``weights`` is a read-only broadcast zero."""
    kernel = cpu_kernels.get("attention_forward_f32")
    lead = q.shape[:-2]
    length, source = q.shape[-2], k.shape[-2]
    shape = lead + (length, v.shape[-1])
    out = _like(q, shape) if q.ndim == 4 else np.empty(shape, np.float32)  # o4 below: a view of out
    q4, k4, v4, o4 = _four_d(q), _four_d(k), _four_d(v), _four_d(out)
    if keep:
        weights = np.empty(lead + (length, source), np.float32)
        w4 = weights.reshape((-1,) + q4.shape[1:3] + (source,)) if weights.ndim != 4 else weights
    else:
        weights = np.broadcast_to(np.float32(0.0), lead + (length, source))
        w4 = np.empty((1, 1, 1, 1), np.float32)  # not read
    heads = q4.shape[0] * q4.shape[1]
    _heads(heads, length * source,
           lambda start, stop: kernel(q4, k4, v4, o4, w4, keep, scale, bool(is_causal), _block(is_causal), start, stop))
    return out, weights


def backward(g: Any, q: Any, k: Any, v: Any, out: Any, weights: Any, is_causal: bool, scale: float) -> tuple:
    """``(dq, dk, dv)`` of the attention record from the saved probabilities."""
    kernel = cpu_kernels.get("attention_backward_f32")
    g4, q4, k4, v4, o4 = _four_d(g), _four_d(q), _four_d(k), _four_d(v), _four_d(out)
    w4 = np.ascontiguousarray(weights).reshape(q4.shape[:3] + (k4.shape[2],))
    if q.ndim == 4:  # each gradient in its input's order of axes: the head-split view's transpose and reshape
        dq, dk, dv = _like(q, q.shape), _like(k, k.shape), _like(v, v.shape)  # back to (N, L, E) are then views
        dk.fill(0.0)
        dv.fill(0.0)
    else:
        dq = np.empty(q4.shape, np.float32)
        dk, dv = np.zeros(k4.shape, np.float32), np.zeros(v4.shape, np.float32)
    length, source = q4.shape[2], k4.shape[2]
    _heads(q4.shape[0] * q4.shape[1], length * source,
           lambda start, stop: kernel(g4, q4, k4, v4, o4, w4, dq, dk, dv, scale, bool(is_causal), _block(is_causal),
                                      start, stop))
    return dq.reshape(q.shape), dk.reshape(k.shape), dv.reshape(v.shape)
