"""Indirect convolutions on ember's AVX-512 micro-kernel (numba): any stride, no im2col columns.

Why: a strided convolution of a zero-padded input splits into the input's ``sh x sw`` phases,
``phase[a, b][r, q] = xpad[a + r*sh, b + q*sw]``; tap ``(i, j)`` of output ``(oh, ow)`` reads phase
``((i*dh) % sh, (j*dw) % sw)`` at ``(oh + (i*dh)//sh, ow + (j*dw)//sw)``. Number the outputs on the phase width,
``p = oh * Wq + ow``: then every (channel, tap) pair reads a phase plane shifted by a fixed offset, a contiguous
run of ``p``. The forward is ``Y_n (O, P) = W (O, K) @ B_n (K, P)`` with ``K = C*kh*kw`` and row ``k`` of ``B_n`` a
shifted window of one phase plane: the micro-kernel's indirect tile reads ``B``'s rows through a table of
offsets, so the whole ``K`` sum runs in registers and nothing is copied but the phases and the output (im2col
writes ``K`` values per output pixel: 147 for a 7x7 stem on 3 channels). The ``Wq - OW`` columns of each row past
the output width are computed and dropped.

The weight gradient is ``dW^T (K, O) = sum_n X_n (K, P) @ G_n^T (P, O)``, ``G_n^T`` the output gradient
channels-last on the phase width (zero in the dropped columns) and ``X_n``'s row ``k = (tap, c)`` the shifted
window of a channels-last phase plane: with the rows ordered phase by phase, tap by tap, channel fastest, a tile's
12 rows are 12 neighbouring values (3-channel taps of one phase side by side), so each ``k`` of a tile
broadcasts from one cache line (rows a plane apart ran at half the rate, ``cpu_direct_conv_kernels``).

Used by ``ember/ops/conv_indirect.py``; measured in docs/cpu-performance.md ("conv13").

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> conv = get("conv_indirect_forward")   # None without numba or AVX-512
    >>> conv is None or callable(conv)
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numba

from ember.backends.cpu_gemm_kernels import COLUMNS, ROWS, _tile_indirect, host_has_avx512

_FULL = (1 << COLUMNS) - 1
K_BLOCK = 256  # rows of B per pass over a tile of the output (a 32-column panel of them: 32 KB, in L1)


@numba.njit(cache=True, nogil=True)
def forward_images(n0, n1, kc, a, sak, a_rows, b, b_image, b_rows, scratch, y):  # pragma: no cover - compiled
    """For images ``[n0, n1)``: ``y[n] = (A[:, :kc] @ B_n[:kc, :])`` cut to the output width. ``A``'s element
    (r, k) at ``a + 4 * (a_rows[r % 12] + (r // 12) * 12 + k * sak)`` (``a_rows`` = 0..11 for a (K, O) matrix);
    ``B_n``'s row k at ``b + 4 * (n * b_image + b_rows[k])`` (contiguous, numbered on the phase width ``wq``);
    ``scratch`` a float32 (O, OH * wq) buffer that takes each image's product on the phase width before its
    rows are cut into ``y`` (N, O, OH, OW): the cut is made while the product is in cache, no second pass."""
    rows, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    wq = scratch.shape[1] // oh
    p_total = (oh - 1) * wq + ow
    c = scratch.ctypes.data
    ldc = scratch.shape[1]
    for n in range(n0, n1):
        for k0 in range(0, kc, K_BLOCK):
            kb = min(K_BLOCK, kc - k0)
            accumulate = 1 if k0 > 0 else 0
            for p0 in range(0, p_total, COLUMNS):
                width = min(COLUMNS, p_total - p0)
                mask = _FULL if width == COLUMNS else (1 << width) - 1
                for i0 in range(0, rows, ROWS):
                    _tile_indirect(min(ROWS, rows - i0), kb, a + 4 * (i0 + k0 * sak), a_rows.ctypes.data, sak,
                                   b + 4 * (n * b_image + p0), b_rows.ctypes.data + 8 * k0,
                                   c + 4 * (i0 * ldc + p0), ldc, accumulate, mask, 0)
        for r in range(rows):
            for i in range(oh):
                for j in range(ow):
                    y[n, r, i, j] = scratch[r, i * wq + j]


@numba.njit(cache=True, nogil=True)
def weight_images(n0, n1, rows, a, a_image, sak, a_rows, g, staged, gt, b_rows, c):  # pragma: no cover - compiled
    """For images ``[n0, n1)``: ``C[:rows, :O] += sum_n A_n[:rows, :P] @ G_n^T[:P, :O]`` (``C`` a float32
    (rows, O) array's address; it must start zeroed). ``A_n``'s element (r, p) at ``a + 4 * (n * a_image +
    a_rows[r] + p * sak)``; ``g`` the output gradient (N, O, OH, OW); ``gt`` a float32 (OH, wq, O) buffer that
    takes ``G_n^T``, ``g[n]`` channels-last on the phase width ``wq`` with zeros past the output width (the
    transposition made here, in cache: NumPy's strided copy took a fifth of the stem's weight gradient);
    ``staged`` a float32 (O, OH * OW + 16) buffer each image's ``g[n]`` is first copied into, so that the
    transposition reads rows whose stride is no multiple of 1 KB (on 16x16 and 32x32 maps all 64 channels' rows
    fell into a few cache sets: 1.5-4.5x slower);
    ``b_rows`` = ``O * (0, 1, ..., block - 1)``, its length the pixels summed per pass (between loads and
    stores of a tile of C)."""
    o, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    wq = gt.shape[1]
    p_total = (oh - 1) * wq + ow
    block = b_rows.shape[0]
    b = gt.ctypes.data
    for i in range(oh):
        for j in range(ow, wq):
            for k in range(o):
                gt[i, j, k] = 0.0
    for n in range(n0, n1):
        for k in range(o):
            for i in range(oh):
                for j in range(ow):
                    staged[k, i * ow + j] = g[n, k, i, j]
        for i in range(oh):  # the fastest order of five measured (NumPy's strided copy: 2x-4x slower)
            for j in range(ow):
                for k in range(o):
                    gt[i, j, k] = staged[k, i * ow + j]
        for p0 in range(0, p_total, block):
            pb = min(block, p_total - p0)
            for j0 in range(0, o, COLUMNS):
                width = min(COLUMNS, o - j0)
                mask = _FULL if width == COLUMNS else (1 << width) - 1
                for i0 in range(0, rows, ROWS):
                    _tile_indirect(min(ROWS, rows - i0), pb, a + 4 * (n * a_image + p0 * sak),
                                   a_rows.ctypes.data + 8 * i0, sak, b + 4 * (p0 * o + j0), b_rows.ctypes.data,
                                   c + 4 * (i0 * o + j0), o, 1, mask, 0)


def build() -> dict[str, Callable[..., Any]]:
    """``conv_indirect_forward`` and ``conv_indirect_weight`` on AVX-512 hosts (the micro-kernel's), else ``{}``."""
    if not host_has_avx512():
        return {}
    return {"conv_indirect_forward": forward_images, "conv_indirect_weight": weight_images}
