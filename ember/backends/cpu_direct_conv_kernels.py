"""Direct stride-1 convolutions on ember's AVX-512 GEMM micro-kernel (numba): no im2col columns at all.

Why: for a stride-1 convolution of a zero-padded NCHW input ``xp`` (N, C, Hp, Wp), output pixel
``(oh, ow)`` of tap ``(i, j)`` reads ``xp[n, c, oh + i*dh, ow + j*dw]``. Number the outputs on the padded
width, ``p = oh * Wp + ow``; then tap ``(i, j)`` reads address ``p + i*dh*Wp + j*dw`` of channel ``c``'s
plane: for every tap, the input seen by the outputs is the plane itself, shifted. So the convolution is
``Y_n (O, P) = sum over taps W_t (O, C) @ X_{n,t} (C, P)`` with ``X_{n,t}`` a shifted view of the padded
input (row stride ``Hp*Wp``, contiguous rows) and ``W_t`` a strided view of the weights. The micro-kernel of
``cpu_gemm_kernels`` multiplies exactly such views (A through two strides, B rows contiguous), so each 12 x 32
tile of ``Y`` sums its taps in registers and L1, and nothing is copied but the padded input and the output.
The ``Wp - OW`` columns of each row past the output width are computed and dropped (2 of 16 for a 3x3 on
14x14 maps). The input gradient of a stride-1 convolution is the same product with the flipped, transposed
kernel. (The weight gradient runs in ``cpu_indirect_conv_kernels``.)

Measured against Winograd F(4x4) and im2col in docs/cpu-performance.md ("Direct convolutions"); used by
``ember/ops/conv_direct.py``.

Example:
    >>> import numpy as np
    >>> from ember.backends.cpu_kernels import get
    >>> conv = get("conv_direct_forward")   # None without numba or AVX-512
    >>> conv is None or callable(conv)
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numba

from ember.backends.cpu_gemm_kernels import COLUMNS, ROWS, _tile, host_has_avx512

_FULL = (1 << COLUMNS) - 1


@numba.njit(cache=True, nogil=True)
def forward_images(n0, n1, rows, kc, p_total, a, sai, sak, a_taps, b, b_image, ldb, b_taps, c, c_image,
                   ldc):  # pragma: no cover - compiled
    """For images ``[n0, n1)``: ``C_n[:rows, :p_total] = sum_t A_t[:rows, :kc] @ B_{n,t}[:kc, :p_total]``.
    Addresses (int64) of float32 data, strides in elements: ``A_t``'s element (r, k) at
    ``a + 4 * (a_taps[t] + r * sai + k * sak)``; ``B_{n,t}``'s row k at ``b + 4 * (n * b_image + b_taps[t] +
    k * ldb)`` (contiguous); ``C_n``'s row r at ``c + 4 * (n * c_image + r * ldc)``."""
    taps = a_taps.shape[0]
    for n in range(n0, n1):
        for i0 in range(0, rows, ROWS):
            r = min(ROWS, rows - i0)
            for p0 in range(0, p_total, COLUMNS):
                width = min(COLUMNS, p_total - p0)
                mask = _FULL if width == COLUMNS else (1 << width) - 1
                c_tile = c + 4 * (n * c_image + i0 * ldc + p0)
                for t in range(taps):
                    _tile(r, kc, a + 4 * (a_taps[t] + i0 * sai), sai, sak, b + 4 * (n * b_image + b_taps[t] + p0),
                          ldb, c_tile, ldc, 1 if t > 0 else 0, mask, 0)


def build() -> dict[str, Callable[..., Any]]:
    """``conv_direct_forward`` on AVX-512 hosts (the micro-kernel's), else ``{}``."""
    if not host_has_avx512():
        return {}
    return {"conv_direct_forward": forward_images}
