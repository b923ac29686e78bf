"""Indirect convolutions (forward, input and weight gradients) on the input's phases: strided layers (ResNet's
7x7/2 stem, GAN discriminators and, as ``conv_transpose2d``, generators) and layers with few channels.

The kernels are ``ember/backends/cpu_indirect_conv_kernels.py``'s: an ``sh x sw`` stride splits the zero-padded
input into its phases, each (channel, tap) pair reads one phase plane shifted, and the micro-kernel reads those
shifted rows through a table of offsets, so the whole ``C*kh*kw`` sum of an output tile runs in registers with
no im2col columns (which the per-image layout wrote and read back: 147 values per output pixel for the stem).
Each pass splits the images over ember's threads (``parallel_for``; the kernels release the GIL and call no
BLAS); the weight gradient's per-thread sums are added in a fixed order.

conv.py uses it (``applicable``) where it measured faster than the per-image im2col layout (docs/cpu-performance.md,
"conv13"). Non-finite values take the other paths: the columns past the output width (computed, then dropped)
read the next row's phase values, and an inf there would turn into NaN in the weight gradient, where PyTorch
multiplies nothing.

Example:
    >>> import numpy as np
    >>> x, w = np.ones((1, 3, 9, 9), np.float32), np.ones((16, 3, 3, 3), np.float32)
    >>> y = forward(np, x, w, (2, 2), (1, 1, 1, 1), (1, 1)) if available(np) else np.full((1, 16, 5, 5), 27.0)
    >>> float(y[0, 0, 2, 2])
    27.0
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.backends import native_kernel
from ember.backends.cpu_threads import parallel_for
from ember.ops.conv_geometry import out_size

MIN_FLOPS_PER_THREAD = 4e6  # a thread's share below this runs on the calling thread
P_BLOCK = 256  # output pixels per pass of the weight gradient's tiles (a 32-column panel of G^T: 32 KB, in L1)
_TILE_ROWS = np.arange(12, dtype=np.int64)  # A's rows 0..11 of a (K, O) matrix, relative to the tile's first


def available(xp: Any) -> bool:
    """Whether the native indirect kernels exist for ``xp`` (NumPy on an AVX-512 CPU with numba)."""
    return xp is np and native_kernel(xp, "conv_indirect_forward") is not None


class _Geometry:
    """The phases of one convolution: ``(hq, wq)`` each phase plane's size, the output size, ``p_total`` the
    outputs numbered on the phase width (``p = oh * wq + ow``), and per tap its phase and shift."""

    def __init__(self, x_shape: tuple, kh: int, kw: int, stride: tuple, padding: tuple, dilation: tuple) -> None:
        (sh, sw), (dh, dw) = stride, dilation
        hp = x_shape[2] + padding[0] + padding[1]
        wp = x_shape[3] + padding[2] + padding[3]
        self.hq, self.wq = -(-hp // sh), -(-wp // sw)
        self.oh = out_size(x_shape[2], kh, sh, padding[0], padding[1], dh)
        self.ow = out_size(x_shape[3], kw, sw, padding[2], padding[3], dw)
        self.p_total = (self.oh - 1) * self.wq + self.ow
        self.stride, self.padding = (sh, sw), padding
        # tap (i, j): phase ((i*dh) % sh, (j*dw) % sw), shifted by ((i*dh)//sh, (j*dw)//sw) within it
        self.phase = [((i * dh) % sh) * sw + (j * dw) % sw for i in range(kh) for j in range(kw)]
        self.shift = [((i * dh) // sh) * self.wq + (j * dw) // sw for i in range(kh) for j in range(kw)]

    def phases(self, x: Any, start: int, stop: int, channels_last: bool) -> Any:
        """Images ``[start, stop)`` of ``x`` zero-padded (negative padding crops) and split into phases:
        (n, C, sh*sw, hq, wq), or (n, sh*sw, hq, wq, C) ``channels_last``; float32, contiguous."""
        (sh, sw), (top, bottom, left, right) = self.stride, self.padding
        part = x[start:stop, :, max(0, -top):x.shape[2] - max(0, -bottom), max(0, -left):x.shape[3] - max(0, -right)]
        top, left = max(0, top), max(0, left)
        n, c = stop - start, x.shape[1]
        full = np.zeros((n, c, self.hq * sh, self.wq * sw), np.float32)  # the padding, and the phases' ragged ends
        full[:, :, top:top + part.shape[2], left:left + part.shape[3]] = part
        if (sh, sw) == (1, 1):
            return full.reshape(n, c, 1, self.hq, self.wq) if not channels_last else \
                np.ascontiguousarray(full.transpose(0, 2, 3, 1)).reshape(n, 1, self.hq, self.wq, c)
        split = full.reshape(n, c, self.hq, sh, self.wq, sw)
        order = (0, 3, 5, 2, 4, 1) if channels_last else (0, 1, 3, 5, 2, 4)
        shape = (n, sh * sw, self.hq, self.wq, c) if channels_last else (n, c, sh * sw, self.hq, self.wq)
        return np.ascontiguousarray(split.transpose(order)).reshape(shape)


def _split(fn: Any, n: int, flops: float) -> None:
    parallel_for(fn, n, max(1, int(MIN_FLOPS_PER_THREAD // max(1.0, flops / max(1, n))) + 1))


def forward(xp: Any, x: Any, w: Any, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The convolution of float32 ``x`` (N, C, H, W) with ``w`` (O, C, kh, kw), NCHW: ``Y_n = W (O, K) @ B_n``,
    ``B_n``'s row ``(c, i, j)`` the phase plane of tap ``(i, j)`` of channel ``c``, shifted."""
    kernel = native_kernel(np, "conv_indirect_forward")
    o, c, kh, kw = w.shape
    n = x.shape[0]
    geo = _Geometry(x.shape, kh, kw, stride, padding, dilation)
    plane, phases = geo.hq * geo.wq, stride[0] * stride[1]
    b_rows = np.array([(ci * phases + geo.phase[t]) * plane + geo.shift[t] for ci in range(c) for t in range(kh * kw)],
                      np.int64)
    a = np.ascontiguousarray(np.asarray(w, np.float32).reshape(o, c * kh * kw).T)  # (K, O): a tile's rows neighbours
    y = np.empty((n, o, geo.oh, geo.ow), np.float32)

    def run(start: int, stop: int) -> None:
        planes = geo.phases(x, start, stop, channels_last=False)
        scratch = np.empty((o, geo.oh * geo.wq), np.float32)
        kernel(0, stop - start, c * kh * kw, a.ctypes.data, o, _TILE_ROWS, planes.ctypes.data, c * phases * plane,
               b_rows, scratch, y[start:stop])

    _split(run, n, 2.0 * n * o * c * kh * kw * geo.p_total)
    return y


def weight_grad(xp: Any, x: Any, g: Any, weight_shape: tuple, stride: tuple, padding: tuple, dilation: tuple) -> Any:
    """The gradient in ``w``: ``dW^T (K, O) = sum_n X_n (K, P) @ G_n^T (P, O)``, the rows of ``X_n`` ordered
    phase by phase, tap by tap, channel fastest (neighbouring values in the channels-last phases), then put
    back in ``w``'s (c, i, j) order."""
    kernel = native_kernel(np, "conv_indirect_weight")
    g = np.ascontiguousarray(g, np.float32)
    o, c, kh, kw = weight_shape
    n = x.shape[0]
    geo = _Geometry(x.shape, kh, kw, stride, padding, dilation)
    plane = geo.hq * geo.wq
    order = sorted(range(kh * kw), key=lambda t: (geo.phase[t], geo.shift[t]))  # taps phase by phase
    a_rows = np.array([(geo.phase[t] * plane + geo.shift[t]) * c + ci for t in order for ci in range(c)], np.int64)
    # row r of the result is (tap order[r // c], channel r % c); w's (c, i, j) order reads it through `back`
    back = np.array([order.index(t) * c + ci for ci in range(c) for t in range(kh * kw)], np.int64)
    b_rows = np.arange(P_BLOCK, dtype=np.int64) * o
    partial: dict[int, Any] = {}

    def run(start: int, stop: int) -> None:
        planes = geo.phases(x, start, stop, channels_last=True)
        staged = np.empty((o, geo.oh * geo.ow + 16), np.float32)
        gt = np.empty((geo.oh, geo.wq, o), np.float32)
        total = np.zeros((c * kh * kw, o), np.float32)
        kernel(0, stop - start, c * kh * kw, planes.ctypes.data, c * stride[0] * stride[1] * plane, c, a_rows,
               g[start:stop], staged, gt, b_rows, total.ctypes.data)
        partial[start] = total

    _split(run, n, 2.0 * n * o * c * kh * kw * geo.p_total)
    parts = [partial[key] for key in sorted(partial)]  # a fixed order: the same sum every run
    total = parts[0]
    for part in parts[1:]:
        total += part
    return np.ascontiguousarray(total[back].T).reshape(weight_shape)


def input_grad(xp: Any, g: Any, w: Any, input_shape: tuple, stride: tuple, padding: tuple) -> Any:
    """The gradient in ``x`` of a strided convolution (no dilation): each phase ``(a, b)`` of the padded input
    gets ``sum_o`` of ``g`` correlated with the taps ``(a + sh*i', b + sw*j')`` of the kernel, flipped; a stride-1
    convolution run by :func:`forward` (its rows the input channels, its sums ``O*ka*kb`` deep), written into
    its phase of the result. This is also ``conv_transpose2d``'s forward (a GAN generator's layers), where
    col2im added each tap's columns into the output one strided pass at a time."""
    n, c, h, width = input_shape
    o, _, kh, kw = w.shape
    (sh, sw), (top, _, left, _) = stride, padding
    gh, gw = g.shape[2:]
    if (sh, sw) == (1, 1):  # one phase: the whole input
        pads = (kh - 1 - top, h + top - gh, kw - 1 - left, width + left - gw)
        return forward(xp, g, w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3), (1, 1), pads, (1, 1))
    gx = np.zeros(tuple(input_shape), np.float32)
    for a in range(sh):
        r0 = -(-(top - a) // sh)  # the first phase row inside the input: sh*r0 + a - top >= 0
        rows = len(range(sh * r0 + a - top, h, sh))
        ka = len(range(a, kh, sh))
        for b in range(sw):
            q0 = -(-(left - b) // sw)
            cols = len(range(sw * q0 + b - left, width, sw))
            kb = len(range(b, kw, sw))
            if rows <= 0 or cols <= 0 or ka == 0 or kb == 0:
                continue  # no tap reads these input positions: their gradient is zero
            # sub[c, o, i', j'] = w[o, c, a + sh*(ka-1-i'), b + sw*(kb-1-j')]: the phase's taps, flipped
            sub = w[:, :, a::sh, b::sw][:, :, ::-1, ::-1].transpose(1, 0, 2, 3)
            # output row r (phase row r0 + r) reads g rows r0 + r - i'': g padded by ka-1-r0 on top
            pads = (ka - 1 - r0, rows + r0 - gh, kb - 1 - q0, cols + q0 - gw)
            gx[:, :, sh * r0 + a - top::sh, sw * q0 + b - left::sw] = forward(xp, g, sub, (1, 1), pads, (1, 1))
    return gx
