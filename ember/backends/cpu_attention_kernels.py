"""Blocked (flash-style) float32 attention on ember's AVX-512 micro-kernel (numba): forward and backward.

Why: as NumPy calls, attention was two batched BLAS products around ~8 passes over the (B, H, L, S) scores
(scale, mask, max, subtract, exp, sum, divide, copy), each a trip through memory: 40 ms for GPT's shape (16 x 6
heads x 256 x 64, causal) on one Xeon core where PyTorch's flash kernel takes 18. Here one call takes a head at a
time and, per block of ``block`` queries, multiplies ``Q_blk K^T`` on the micro-kernel straight into the
probabilities' rows (in L2), runs the softmax over those rows (a max pass, an exp-and-sum pass, a divide pass,
in 16-lane vectors: all in cache), and multiplies ``P_blk V`` into the output. Causal
attention computes only the keys each block's last query sees (about half of the products and of the exp work
for square scores). The backward (dV += P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)) scale, dQ = dS K,
dK += dS^T Q) runs the same way, block by block, reading the saved probabilities. Heads are independent: a
call takes heads ``[start, stop)`` and ``ember/ops/attention.py`` splits them over ember's threads (each head's
dK and dV belong to one thread), with no BLAS call and so no BLAS thread anywhere.

Numerics: the products are float32 sums in k order (the micro-kernel, as ``matmul_f32``); the scores are
scaled (one rounding) and the row maximum subtracted, ``exp`` evaluated by ``cpu_vector_rows`` (16
lanes; within 2 ulp of the correctly rounded value on the softmax's range, -inf -> 0, NaN -> NaN), the row summed
(in vector lanes) and divided, as the NumPy path does; hidden keys get weight 0 and gradient 0, also where a score is NaN or inf
(as torch's ``masked_fill``). A NaN score in a row makes the row NaN, as in NumPy and torch.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> forward = get("attention_forward_f32")   # None without numba or AVX-512
    >>> forward is None or callable(forward)
    True
"""
from __future__ import annotations

from typing import Callable

import numba
import numpy as np

from ember.backends.cpu_gemm_kernels import COLUMNS, K_BLOCK, ROWS, _tile, host_has_avx512
from ember.backends.cpu_gemm_pack import LANES, _transpose16
from ember.backends.cpu_vector_rows import exp_sum, multiply, row_max

_FULL = (1 << COLUMNS) - 1
_ZERO, _ONE = np.float32(0.0), np.float32(1.0)


# The dot product keeps 8 running sums (8 independent dependency chains: a single running sum waits ~4 cycles per
# element; LLVM does not vectorize the reduction by itself), combined in a fixed order, so results do not depend on
# the compiler.
@numba.njit
def _dot(a, b, n):  # pragma: no cover - compiled
    """sum(a[:n] * b[:n]) in 8 lanes (products rounded), lanes added pairwise."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = _ZERO
    j = 0
    while j + 8 <= n:
        s0, s1, s2, s3 = s0 + a[j] * b[j], s1 + a[j + 1] * b[j + 1], s2 + a[j + 2] * b[j + 2], s3 + a[j + 3] * b[j + 3]
        s4, s5, s6, s7 = s4 + a[j + 4] * b[j + 4], s5 + a[j + 5] * b[j + 5], s6 + a[j + 6] * b[j + 6], s7 + a[j + 7] * b[j + 7]
        j += 8
    for i in range(j, n):
        s0 += a[i] * b[i]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@numba.njit(error_model="numpy")
def _softmax_row(row, n, s):  # pragma: no cover - compiled
    """row[:n] = softmax(row[:n] * s) in place (n >= 1): the scaled scores' maximum subtracted, exp, multiplied
    by the sum's reciprocal (as PyTorch's flash kernel; a division per score took 40% of the softmax), each pass in
    16-lane vectors (``cpu_vector_rows``). The maximum of the scaled scores is the scaled maximum (rounding is
    monotonic) for s >= 0. Returns the sum (NaN for a NaN row)."""
    address = row.ctypes.data
    m = row_max(address, n) * s if s >= 0 else _row_min_scaled(row, n, s)
    total = exp_sum(address, address, n, s, m)
    multiply(address, n, _ONE / total)
    return total


@numba.njit(inline="always")
def _transpose(src, ld, rows, cols, dst, ldd):  # pragma: no cover - compiled
    """``dst[c * ldd + r] = src[r * ld + c]`` for r < rows, c < cols (float32 at addresses, strides in elements)
    by 16 x 16 blocks transposed in registers (``cpu_gemm_pack``); each block row of ``dst`` is written 16 wide,
    so ``ldd`` must leave room for ``rows`` rounded up to 16 (the extra columns get zeros)."""
    for c0 in range(0, cols, LANES):
        for r0 in range(0, rows, LANES):
            _transpose16(src + 4 * (r0 * ld + c0), ld, min(LANES, rows - r0), min(LANES, cols - c0),
                         dst + 4 * (c0 * ldd + r0), ldd)


@numba.njit(inline="always")
def _gemm(m, n, k, a, sai, sak, b, ldb, c, ldc, accumulate):  # pragma: no cover - compiled
    """``C[:m, :n] (+)= A[:m, :k] @ B[:k, :n]`` on addresses: A's (i, k) at ``a + 4 (i sai + k sak)``, B's row k at
    ``b + 4 k ldb`` (rows contiguous), C's row i at ``c + 4 i ldc``; ``accumulate``: add to C."""
    if m <= 0 or n <= 0 or k <= 0:  # callers never ask for an empty sum into a fresh C
        return
    blocks = (k + K_BLOCK - 1) // K_BLOCK
    step = (k + blocks - 1) // blocks
    for k0 in range(0, k, step):
        kc = min(step, k - k0)
        add = accumulate if k0 == 0 else 1
        for j0 in range(0, n, COLUMNS):
            width = min(COLUMNS, n - j0)
            mask = _FULL if width == COLUMNS else (1 << width) - 1
            for i0 in range(0, m, ROWS):
                _tile(min(ROWS, m - i0), kc, a + 4 * (i0 * sai + k0 * sak), sai, sak, b + 4 * (k0 * ldb + j0), ldb,
                      c + 4 * (i0 * ldc + j0), ldc, add, mask, 0)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def attention_forward(q, k, v, out, weights, keep, scale, causal, block, start, stop):  # pragma: no cover - compiled
    """Heads ``[start, stop)`` (flat over the first two axes) of ``out = softmax(q k^T scale) v``, the
    probabilities written to ``weights`` when ``keep`` (else each block's stay in a buffer in cache). q (N, H, L, D),
    k (N, H, S, D), v (N, H, S, E), out (N, H, L, E): float32, unit last strides, positive strides, S >= 1; weights
    (N, H, L, S) contiguous (any float32 array when not ``keep``). ``causal``: query i sees keys 0..i."""
    heads = q.shape[1]
    length, depth = q.shape[2], q.shape[3]
    source = k.shape[2]
    width = v.shape[3]
    s = np.float32(scale)
    # per head, K^T copied to a contiguous buffer (the micro-kernel's B operand) by 16 x 16 in-register transposes
    # (a strided scalar copy took ~15% of W4's forward). V, the B operand of P V, is read in place: its rows are
    # contiguous (copying them measured 0.2 ms slower on W4's 64 heads, and no faster on GPT's shape)
    padded = (source + LANES - 1) // LANES * LANES
    kt = np.empty((depth, padded), np.float32)
    scratch = np.empty((block, source), np.float32)
    for bh in range(start, stop):
        b, h = bh // heads, bh % heads
        _transpose(k.ctypes.data + b * k.strides[0] + h * k.strides[1], k.strides[2] // 4, source, depth,
                   kt.ctypes.data, padded)
        q_addr = q.ctypes.data + b * q.strides[0] + h * q.strides[1]
        v_addr = v.ctypes.data + b * v.strides[0] + h * v.strides[1]
        o_addr = out.ctypes.data + b * out.strides[0] + h * out.strides[1]
        q_rs, v_rs, o_rs = q.strides[2] // 4, v.strides[2] // 4, out.strides[2] // 4
        for lo in range(0, length, block):
            hi = min(length, lo + block)
            seen = min(hi, source) if causal else source
            rows = weights[b, h, lo:hi] if keep else scratch[:hi - lo]
            _gemm(hi - lo, seen, depth, q_addr + 4 * lo * q_rs, q_rs, 1, kt.ctypes.data, padded, rows.ctypes.data,
                  source, 0)
            for r in range(hi - lo):
                visible = min(lo + r + 1, source) if causal else source
                row = rows[r]
                total = _softmax_row(row[:visible], visible, s)
                # hidden keys: weight 0, or NaN in a NaN row (0 / NaN), as softmax after masked_fill; the product
                # with V reads keys up to ``seen``, the kept probabilities have every key
                row[visible:source if keep else seen] = _ZERO / total
            _gemm(hi - lo, width, seen, rows.ctypes.data, source, 1, v_addr, v_rs, o_addr + 4 * lo * o_rs,
                  o_rs, 0)


@numba.njit
def _row_min_scaled(row, n, s):  # pragma: no cover - compiled
    """max(row[:n] * s) for a negative scale (the scaled maximum is the scaled minimum); NaN-safe, rare."""
    m = row[0] * s
    for j in range(1, n):
        x = row[j] * s
        if x > m:
            m = x
    return m


@numba.njit(cache=True, nogil=True, error_model="numpy")
def attention_backward(g, q, k, v, out, weights, dq, dk, dv, scale, causal, block, start, stop):  # pragma: no cover
    """Heads ``[start, stop)`` of attention's backward from the saved probabilities ``weights``: ``dq`` written,
    ``dk`` and ``dv`` (zeroed by the caller) accumulated. g, out (N, H, L, E); dq like q; dk like k; dv like v;
    all float32 with unit last strides and positive strides; weights contiguous."""
    heads = q.shape[1]
    length, depth = q.shape[2], q.shape[3]
    source = k.shape[2]
    width = v.shape[3]
    s = np.float32(scale)
    padded = (source + LANES - 1) // LANES * LANES
    vt = np.empty((width, padded), np.float32)  # V^T, rows contiguous
    ds = np.empty((block, source), np.float32)
    delta = np.empty(block, np.float32)
    for bh in range(start, stop):
        b, h = bh // heads, bh % heads
        _transpose(v.ctypes.data + b * v.strides[0] + h * v.strides[1], v.strides[2] // 4, source, width,
                   vt.ctypes.data, padded)
        w = weights[b, h]
        gh, oh = g[b, h], out[b, h]
        g_addr = g.ctypes.data + b * g.strides[0] + h * g.strides[1]
        q_addr = q.ctypes.data + b * q.strides[0] + h * q.strides[1]
        k_addr = k.ctypes.data + b * k.strides[0] + h * k.strides[1]
        g_rs, q_rs, k_rs = g.strides[2] // 4, q.strides[2] // 4, k.strides[2] // 4
        dq_addr, dk_addr, dv_addr = dq[b, h].ctypes.data, dk[b, h].ctypes.data, dv[b, h].ctypes.data
        dq_rs, dk_rs, dv_rs = dq.strides[2] // 4, dk.strides[2] // 4, dv.strides[2] // 4
        w_addr = w.ctypes.data
        for lo in range(0, length, block):
            hi = min(length, lo + block)
            rows = hi - lo
            seen = min(hi, source) if causal else source
            for r in range(rows):
                if w[lo + r, 0] != w[lo + r, 0]:  # a NaN row (an inf/NaN input): its hidden weights are NaN too
                    seen = source  # and reach dV, and hidden keys' zero gradients times an inf query reach dK
            for r in range(rows):
                delta[r] = _dot(gh[lo + r], oh[lo + r], width)
            # dV[:seen] += P_blk^T dO_blk
            _gemm(seen, width, rows, w_addr + 4 * lo * source, 1, source, g_addr + 4 * lo * g_rs, g_rs, dv_addr,
                  dv_rs, 1)
            # dP = dO_blk V^T, then dS = P (dP - delta) scale, hidden keys 0
            _gemm(rows, seen, width, g_addr + 4 * lo * g_rs, g_rs, 1, vt.ctypes.data, padded, ds.ctypes.data,
                  source, 0)
            for r in range(rows):
                visible = min(lo + r + 1, source) if causal else source
                p, d = w[lo + r, :visible], ds[r, :visible]
                c = delta[r]
                for j in range(visible):
                    d[j] = ((d[j] - c) * p[j]) * s
                ds[r, visible:seen] = 0.0
            # dQ_blk = dS K[:seen]; dK[:seen] += dS^T Q_blk
            _gemm(rows, depth, seen, ds.ctypes.data, source, 1, k_addr, k_rs, dq_addr + 4 * lo * dq_rs, dq_rs, 0)
            _gemm(seen, depth, rows, ds.ctypes.data, 1, source, q_addr + 4 * lo * q_rs, q_rs, dk_addr, dk_rs, 1)


def build() -> dict[str, Callable]:
    """``{"attention_forward_f32": ..., "attention_backward_f32": ...}`` on AVX-512 CPUs, else ``{}``."""
    if not host_has_avx512():
        return {}
    return {"attention_forward_f32": attention_forward, "attention_backward_f32": attention_backward}
