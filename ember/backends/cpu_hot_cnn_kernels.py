"""A CNN step's memory-bound passes as range kernels, run on both cores through the hot worker
(``cpu_hot_worker.split_call_into``: a native hand-off of a few microseconds): max pooling's 2x2 forward and its
non-overlapping backward (over planes), relu and relu's gradient (over elements), a conv bias's gradient (over
channels) and its bias add (over planes).

Why (issue 11, the MNIST CNN's epoch; docs/cpu-performance.md "mnist22"): these passes are memory-bound (0.2-0.7 ms
on a 64 x 32 x 28x28 map) and ``cpu_threads.parallel_for`` wakes a sleeping pool thread for the second half, which
costs 50-70 us each way on this project's VM: a 1.6M-element pass took 0.34 ms on two threads against 0.41 on one.
The hot worker spins without the GIL for ~1 ms after each job, so the second half starts at once.

Each ``range_*`` function is a numba ``cfunc`` ``void f(int64 start, int64 stop, int64 args)`` over planes
``[start, stop)`` of the (N*C, H, W) arrays; ``args`` is the address of ``WORDS`` int64 words: the three arrays'
data addresses, the input plane's height and width, the output plane's height and width, and two result words (one
per part: the start-0 part writes the first) that the caller sums; relu's words are the arrays' addresses only.
The same per-plane kernels (``pool_planes``,
``unpool_planes``) run on ember's pool or one thread when the hot worker is off, asleep or busy: the same bits.

Example:
    >>> import numpy as np
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    >>> out, idx = np.empty((1, 2, 2), np.float32), np.empty((1, 2, 2), np.int64)
    >>> int(pool_planes(x, out, idx)), out.ravel().tolist(), idx.ravel().tolist()
    (0, [5.0, 7.0, 13.0, 15.0], [5, 7, 13, 15])
"""
from __future__ import annotations

import sys

import numba
import numpy as np
from numba import types

from ember.backends.cpu_hot_ufunc_kernels import as_pointer

# The words: the arrays (pool: x, out, indices; unpool: g, indices, out), the input plane (H, W), the output plane
# (OH, OW), then the two parts' results (NaN windows, or indices outside their plane).
A, B, C, H, W, OH, OW, RESULT = range(8)
WORDS = RESULT + 2


@numba.njit(nogil=True, cache=True)
def pool_planes(x, out, indices):  # pragma: no cover - compiled
    """2x2 windows, stride 2, no padding over (P, H, W) planes into (P, OH, OW): the first maximum in row-major order
    wins ties (PyTorch's rule). Returns how many windows held a NaN (or +inf with -inf, or overflowed: a window's
    sum): the caller then redoes the op on the NaN-propagating NumPy path. The compare chain of
    ``cpu_kernels``' ``max_pool2d_2x2`` on 1-D row views: the same bits."""
    planes, _, w = x.shape
    _, oh, ow = out.shape
    nans = 0
    for p in range(planes):
        xp, op, ip = x[p], out[p], indices[p]
        for i in range(oh):
            r = 2 * i
            top, bottom, o, ix = xp[r], xp[r + 1], op[i], ip[i]
            for j in range(ow):
                q = 2 * j
                a, v1, v2, v3 = top[q], top[q + 1], bottom[q], bottom[q + 1]
                best, where = a, r * w + q
                if v1 > best:
                    best, where = v1, r * w + q + 1
                if v2 > best:
                    best, where = v2, (r + 1) * w + q
                if v3 > best:
                    best, where = v3, (r + 1) * w + q + 1
                total = a + v1 + v2 + v3
                nans += total != total
                o[j] = best
                ix[j] = where
    return nans


@numba.njit(nogil=True, cache=True)
def unpool_planes(g, indices, out):  # pragma: no cover - compiled
    """``out[p] = 0; out[p, indices[p, k]] = g[p, k]`` per (P, S) plane of ``out`` from (P, K) ``g``/``indices``
    (windows that do not overlap: each input pixel is named at most once, the last name winning as NumPy's
    assignment). Each plane is zeroed just before its scatter, so it is written to memory once (a separate
    ``zeros`` pass wrote it twice: 0.67 -> 0.44 ms for 64 x 32 x 28x28 on one thread). Indices outside the plane are
    skipped and counted (the caller raises)."""
    planes, size = out.shape
    count = g.shape[1]
    zero = np.zeros(1, out.dtype)[0]
    bad = 0
    for p in range(planes):
        o, gp, ip = out[p], g[p], indices[p]
        for k in range(size):
            o[k] = zero
        for k in range(count):
            index = ip[k]
            if 0 <= index < size:
                o[index] = gp[k]
            else:
                bad += 1
    return bad


def pool_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``pool_planes`` on float32 planes ``[start, stop)`` of the arrays described at ``args``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, h, w, oh, ow = stop - start, words[H], words[W], words[OH], words[OW]
    x = numba.carray(as_pointer(words[A] + start * h * w * 4), (n, h, w), np.float32)
    out = numba.carray(as_pointer(words[B] + start * oh * ow * 4), (n, oh, ow), np.float32)
    indices = numba.carray(as_pointer(words[C] + start * oh * ow * 8), (n, oh, ow), np.int64)
    words[RESULT + (start != 0)] = pool_planes(x, out, indices)


def pool_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``pool_planes`` on float64 planes ``[start, stop)`` of the arrays described at ``args``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, h, w, oh, ow = stop - start, words[H], words[W], words[OH], words[OW]
    x = numba.carray(as_pointer(words[A] + start * h * w * 8), (n, h, w), np.float64)
    out = numba.carray(as_pointer(words[B] + start * oh * ow * 8), (n, oh, ow), np.float64)
    indices = numba.carray(as_pointer(words[C] + start * oh * ow * 8), (n, oh, ow), np.int64)
    words[RESULT + (start != 0)] = pool_planes(x, out, indices)


def unpool_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``unpool_planes`` on float32 planes ``[start, stop)`` of the arrays described at ``args``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, plane, count = stop - start, words[H] * words[W], words[OH] * words[OW]
    g = numba.carray(as_pointer(words[A] + start * count * 4), (n, count), np.float32)
    indices = numba.carray(as_pointer(words[B] + start * count * 8), (n, count), np.int64)
    out = numba.carray(as_pointer(words[C] + start * plane * 4), (n, plane), np.float32)
    words[RESULT + (start != 0)] = unpool_planes(g, indices, out)


def unpool_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``unpool_planes`` on float64 planes ``[start, stop)`` of the arrays described at ``args``."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, plane, count = stop - start, words[H] * words[W], words[OH] * words[OW]
    g = numba.carray(as_pointer(words[A] + start * count * 8), (n, count), np.float64)
    indices = numba.carray(as_pointer(words[B] + start * count * 8), (n, count), np.int64)
    out = numba.carray(as_pointer(words[C] + start * plane * 8), (n, plane), np.float64)
    words[RESULT + (start != 0)] = unpool_planes(g, indices, out)


@numba.njit(nogil=True, cache=True)
def relu_elements(x, out):  # pragma: no cover - compiled
    """``out = 0 if x < 0 else x`` (1-D): NaN stays NaN, -0.0 stays -0.0 (PyTorch's rule; ``cpu_kernels``' relu)."""
    for k in range(x.size):
        v = x[k]
        out[k] = 0 if v < 0 else v


@numba.njit(nogil=True, cache=True)
def relu_grad_elements(g, y, out):  # pragma: no cover - compiled
    """``out = 0 if y <= 0 else g`` (1-D; a NaN output passes ``g``, as PyTorch's threshold_backward)."""
    for k in range(g.size):
        out[k] = 0 if y[k] <= 0 else g[k]


def relu_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``relu_elements`` on float32 elements ``[start, stop)`` (words: x, out)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n = stop - start
    relu_elements(numba.carray(as_pointer(words[A] + start * 4), (n,), np.float32),
                  numba.carray(as_pointer(words[B] + start * 4), (n,), np.float32))


def relu_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``relu_elements`` on float64 elements ``[start, stop)`` (words: x, out)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n = stop - start
    relu_elements(numba.carray(as_pointer(words[A] + start * 8), (n,), np.float64),
                  numba.carray(as_pointer(words[B] + start * 8), (n,), np.float64))


def relu_grad_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``relu_grad_elements`` on float32 elements ``[start, stop)`` (words: g, y, out)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n = stop - start
    relu_grad_elements(numba.carray(as_pointer(words[A] + start * 4), (n,), np.float32),
                       numba.carray(as_pointer(words[B] + start * 4), (n,), np.float32),
                       numba.carray(as_pointer(words[C] + start * 4), (n,), np.float32))


def relu_grad_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``relu_grad_elements`` on float64 elements ``[start, stop)`` (words: g, y, out)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n = stop - start
    relu_grad_elements(numba.carray(as_pointer(words[A] + start * 8), (n,), np.float64),
                       numba.carray(as_pointer(words[B] + start * 8), (n,), np.float64),
                       numba.carray(as_pointer(words[C] + start * 8), (n,), np.float64))


@numba.njit(nogil=True, cache=True, fastmath={"reassoc"})
def _run_sum(row):  # pragma: no cover - compiled
    """The sum of a 1-D run in its dtype, reassociated (vector accumulators: LLVM picks the lanes)."""
    total = row.dtype.type(0)
    for k in range(row.size):
        total += row[k]
    return total


@numba.njit(nogil=True, cache=True)
def channel_sums(g, out, c0, c1):  # pragma: no cover - compiled
    """``out[c] = g[:, c, :].sum()`` for channels ``[c0, c1)`` of an (N, C, S) ``g``: each (image, channel) run
    summed with vector accumulators in ``g``'s dtype, the N run sums added in float64 (a conv bias's gradient;
    NumPy's einsum adds the run sums in float32, a little less accurate). Channels do not depend on how they are
    split, so the bits do not depend on the threads."""
    n = g.shape[0]
    for ch in range(c0, c1):
        total = 0.0
        for b in range(n):
            total += _run_sum(g[b, ch])
        out[ch] = total


def sums_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``channel_sums`` over float32 channels ``[start, stop)`` (words: g, out; N, C, S in H, W, OH)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, c, s = words[H], words[W], words[OH]
    channel_sums(numba.carray(as_pointer(words[A]), (n, c, s), np.float32),
                 numba.carray(as_pointer(words[B]), (c,), np.float32), start, stop)


def sums_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``channel_sums`` over float64 channels ``[start, stop)`` (words: g, out; N, C, S in H, W, OH)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    n, c, s = words[H], words[W], words[OH]
    channel_sums(numba.carray(as_pointer(words[A]), (n, c, s), np.float64),
                 numba.carray(as_pointer(words[B]), (c,), np.float64), start, stop)


@numba.njit(nogil=True, cache=True)
def add_channel(out, bias, r0, r1):  # pragma: no cover - compiled
    """``out[r] += bias[r % C]`` for rows ``[r0, r1)`` of an (N*C, S) ``out`` (a conv's bias, in place): one IEEE add
    per element, NumPy's broadcast add's bits."""
    c = bias.size
    for r in range(r0, r1):
        row, b = out[r], bias[r % c]
        for k in range(row.size):
            row[k] += b


def bias_range_f4(start, stop, args):  # pragma: no cover - compiled
    """``add_channel`` over float32 rows ``[start, stop)`` (words: out, bias; rows, C, S in H, W, OH)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    rows, c, s = words[H], words[W], words[OH]
    add_channel(numba.carray(as_pointer(words[A]), (rows, s), np.float32),
                numba.carray(as_pointer(words[B]), (c,), np.float32), start, stop)


def bias_range_f8(start, stop, args):  # pragma: no cover - compiled
    """``add_channel`` over float64 rows ``[start, stop)`` (words: out, bias; rows, C, S in H, W, OH)."""
    words = numba.carray(as_pointer(args), (WORDS,), np.int64)
    rows, c, s = words[H], words[W], words[OH]
    add_channel(numba.carray(as_pointer(words[A]), (rows, s), np.float64),
                numba.carray(as_pointer(words[B]), (c,), np.float64), start, stop)


_SIGNATURE = types.void(types.int64, types.int64, types.int64)
_FUNCTIONS = {("pool", "f"): pool_range_f4, ("pool", "d"): pool_range_f8, ("unpool", "f"): unpool_range_f4,
              ("unpool", "d"): unpool_range_f8, ("relu", "f"): relu_range_f4, ("relu", "d"): relu_range_f8,
              ("relu_grad", "f"): relu_grad_range_f4, ("relu_grad", "d"): relu_grad_range_f8,
              ("sums", "f"): sums_range_f4, ("sums", "d"): sums_range_f8, ("bias", "f"): bias_range_f4,
              ("bias", "d"): bias_range_f8}
_CFUNCS: dict = {}


def address(kind: str, char: str) -> int:
    """The C address of the range function ``kind`` ("pool", "unpool", "relu", "relu_grad", "sums", "bias") for dtype ``char`` ("f" float32, "d"
    float64), compiled (or loaded from numba's cache) on first use."""
    compiled = _CFUNCS.get((kind, char))
    if compiled is None:
        compiled = _CFUNCS[(kind, char)] = numba.cfunc(_SIGNATURE, nopython=True, cache=True)(_FUNCTIONS[kind, char])
    return compiled.address


def build() -> dict:
    """For ``cpu_kernels``' table: this module under ``"hot_cnn"``."""
    return {"hot_cnn": sys.modules[__name__]}
