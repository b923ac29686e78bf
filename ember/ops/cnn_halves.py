"""A CNN step's memory-bound passes on both cores (max pooling's 2x2 forward and non-overlapping backward over
(N*C) planes, relu and its gradient over elements): halves on the hot worker
(``cpu_hot_worker.split_call_into``, a hand-off of a few microseconds) where it spins, else ember's pool
(``cpu_threads.parallel_for``, 50-70 us a hand-off on this project's VM), else one thread; the per-plane kernels
(``ember/backends/cpu_hot_cnn_kernels.py``) are the same on every path, so are the bits.

Example:
    >>> import numpy as np
    >>> x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    >>> out = pool_2x2(np, x)
    >>> out is None or out[0].ravel().tolist() == [5.0, 7.0, 13.0, 15.0]
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import _config
from ember.backends import cpu_hot_worker, native_kernel
from ember.backends.cpu_threads import parallel_for

# Elements of the larger array below which a pass runs whole on the calling thread (a hot hand-off from Python costs
# ~4 us, the pool's ~60; a 64 x 64 x 14x14 map is 803K elements)
HOT_MIN_ELEMENTS = 1 << 15
# Passes this large are split even while the hot worker sleeps: it is woken (40-80 us here) and takes its half when
# up, else the caller takes it back; each half (0.1 ms and up) outlasts the wake-up.
WAKE_ELEMENTS = 1 << 19
# Elements per thread on ember's pool (cpu_threads' sleeping worker): the pooling passes' (pooling.py's before) and
# relu's (elementwise.py's ``_SPLIT_ELEMENTS``)
POOL_MIN_ELEMENTS, RELU_POOL_MIN_ELEMENTS = 1 << 16, 1 << 19


def _kernels(xp: Any, *arrays: Any) -> Any:
    """The kernel module, or None: NumPy float32/float64 C-contiguous arrays in native byte order and the kernels
    present (numba; not ``EMBER_CPU_KERNELS=numpy``)."""
    if xp is not np or any(a.__class__ is not np.ndarray or not a.flags.c_contiguous for a in arrays):
        return None
    dtype = arrays[0].dtype
    if dtype.char not in "fd" or not dtype.isnative:
        return None
    return native_kernel(xp, "hot_cnn")


def _run(kernels: Any, kind: str, arrays: tuple, planes: int, geometry: tuple, elements: int,
         plane_call: Any, align: int = 1, pool_min: int | None = None) -> int:
    """Planes (or elements) ``[0, planes)`` of ``kind`` in two halves (hot worker), else on ember's pool, else whole;
    the summed results of the parts (NaN windows, or out-of-plane indices). The cut is on a multiple of ``align``;
    ember's pool gets ``pool_min`` (``POOL_MIN_ELEMENTS``) elements or more per thread."""
    if planes >= 2 and elements >= HOT_MIN_ELEMENTS and _config.HOT_WORKER and cpu_hot_worker.available():
        words = np.zeros(kernels.WORDS, np.int64)
        words[:len(arrays)] = [a.ctypes.data for a in arrays]
        words[3:7] = geometry
        cut = max(1, planes // 2 // align * align)
        address = kernels.address(kind, arrays[0].dtype.char)
        own, other = (0, cut, words.ctypes.data), (cut, planes, words.ctypes.data)
        if cpu_hot_worker.split_call_into(address, own, other, wake_split=elements >= WAKE_ELEMENTS):
            return int(words[kernels.RESULT] + words[kernels.RESULT + 1])
    results: list = []  # list.append is atomic: each chunk reports its count
    parallel_for(lambda start, stop: results.append(plane_call(start, stop) or 0), planes,  # (relu's give None)
                 max(1, -(-(pool_min or POOL_MIN_ELEMENTS) * planes // max(1, elements))))
    return sum(results)


def pool_2x2(xp: Any, x: Any) -> tuple | None:
    """``(values, indices, nan_windows)`` of 2x2 windows with stride 2 over an (N, C, H, W) ``x`` with even H and W
    (PyTorch's first maximum on ties), or None where the kernels do not apply (then the caller's path runs).

    Example:
        >>> import numpy as np
        >>> r = pool_2x2(np, np.zeros((1, 1, 2, 2), np.float32))
        >>> r is None or (r[1].item(), r[2]) == (0, 0)  # the first of four tied zeros, no NaN window
        True
    """
    n, c, h, w = x.shape
    kernels = _kernels(xp, x)
    if kernels is None or h % 2 or w % 2 or not x.size:
        return None
    oh, ow, planes = h // 2, w // 2, n * c
    out = np.empty((n, c, oh, ow), x.dtype)
    indices = np.empty((n, c, oh, ow), np.int64)
    x3, out3, idx3 = x.reshape(planes, h, w), out.reshape(planes, oh, ow), indices.reshape(planes, oh, ow)
    nans = _run(kernels, "pool", (x, out, indices), planes, (h, w, oh, ow), x.size,
                lambda p0, p1: kernels.pool_planes(x3[p0:p1], out3[p0:p1], idx3[p0:p1]))
    return out, indices, nans


def unpool(xp: Any, g: Any, indices: Any, rows: int, h: int, w: int) -> tuple | None:
    """``(out, bad)``: ``out`` (rows, h*w) zero but ``out[r, indices[r, k]] = g[r, k]`` (non-overlapping windows)
    from contiguous (rows, K) ``g`` and int64 ``indices``, and how many indices lay outside their plane; None where
    the kernels do not apply.

    Example:
        >>> import numpy as np
        >>> r = unpool(np, np.ones((1, 1), np.float32), np.array([[3]]), 1, 2, 2)
        >>> r is None or r[0].tolist() == [[0.0, 0.0, 0.0, 1.0]]
        True
    """
    kernels = _kernels(xp, g, indices)
    if kernels is None or indices.dtype != np.int64 or g.ndim != 2 or indices.shape != g.shape or not g.size:
        return None
    out = np.empty((rows, h * w), g.dtype)
    count = g.shape[1]
    bad = _run(kernels, "unpool", (g, indices, out), rows, (h, w, count, 1), out.size,
               lambda p0, p1: kernels.unpool_planes(g[p0:p1], indices[p0:p1], out[p0:p1]))
    return out, bad


ALIGN = 16  # elements: relu's cut falls on a 64-byte line of float32


def relu(xp: Any, x: Any) -> Any:
    """``max(x, 0)`` as ``cpu_kernels``' relu (NaN and -0.0 kept) for a contiguous float32/float64 ``x``, in halves;
    None where the kernels do not apply.

    Example:
        >>> import numpy as np
        >>> r = relu(np, np.array([-1.0, 2.0]))
        >>> r is None or r.tolist() == [0.0, 2.0]
        True
    """
    kernels = _kernels(xp, x)
    if kernels is None:
        return None
    out = np.empty_like(x)
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    _run(kernels, "relu", (x, out), x.size, (0, 0, 0, 0), x.size,
         lambda k0, k1: kernels.relu_elements(flat_x[k0:k1], flat_out[k0:k1]), ALIGN,
         RELU_POOL_MIN_ELEMENTS)
    return out


def relu_grad(xp: Any, g: Any, y: Any) -> Any:
    """``0 where y <= 0 else g`` (relu's gradient, NaN outputs passing ``g``) for contiguous ``g`` and ``y`` of one
    float32/float64 dtype and shape, in halves; None where the kernels do not apply.

    Example:
        >>> import numpy as np
        >>> r = relu_grad(np, np.array([5.0, 6.0]), np.array([0.0, 1.0]))
        >>> r is None or r.tolist() == [0.0, 6.0]
        True
    """
    kernels = _kernels(xp, g, y)
    if kernels is None or g.dtype != y.dtype or g.shape != y.shape:
        return None
    out = np.empty_like(g)
    flat_g, flat_y, flat_out = g.reshape(-1), y.reshape(-1), out.reshape(-1)
    _run(kernels, "relu_grad", (g, y, out), g.size, (0, 0, 0, 0), g.size,
         lambda k0, k1: kernels.relu_grad_elements(flat_g[k0:k1], flat_y[k0:k1], flat_out[k0:k1]), ALIGN,
         RELU_POOL_MIN_ELEMENTS)
    return out


def channel_sums(xp: Any, g: Any) -> Any:
    """``g.sum((0, 2))`` of a contiguous float32/float64 (N, C, S) ``g`` (a conv bias's gradient with S = H*W), its
    channels in halves; each (image, channel) run summed with vector accumulators, the run sums added in float64
    (``cpu_hot_cnn_kernels.channel_sums``). None where the kernels do not apply.

    Example:
        >>> import numpy as np
        >>> r = channel_sums(np, np.ones((2, 3, 4), np.float32))
        >>> r is None or r.tolist() == [8.0, 8.0, 8.0]
        True
    """
    kernels = _kernels(xp, g)
    if kernels is None or g.ndim != 3:
        return None
    n, c, s = g.shape
    out = np.empty(c, g.dtype)
    _run(kernels, "sums", (g, out), c, (n, c, s, 0), g.size, lambda c0, c1: kernels.channel_sums(g, out, c0, c1))
    return out


def add_bias(xp: Any, out: Any, bias: Any) -> bool:
    """``out += bias`` per channel, in place, for a contiguous float32/float64 (N, C, ...) ``out`` and a contiguous
    (C,) ``bias`` of its dtype, planes in halves (one add per element: the broadcast add's bits). False, nothing done,
    where the kernels do not apply.

    Example:
        >>> import numpy as np
        >>> out = np.zeros((1, 2, 2), np.float32)
        >>> add_bias(np, out, np.array([1.0, 2.0], np.float32)) is False or out[:, 1].tolist() == [[2.0, 2.0]]
        True
    """
    kernels = _kernels(xp, out, bias)
    if kernels is None or bias.dtype != out.dtype or out.ndim < 2 or bias.shape != (out.shape[1],):
        return False
    rows = out.shape[0] * out.shape[1]
    flat = out.reshape(rows, -1)
    _run(kernels, "bias", (out, bias), rows, (rows, bias.size, flat.shape[1], 0), out.size,
         lambda r0, r1: kernels.add_channel(flat, bias, r0, r1), 1, 1 << 17)
    return True
