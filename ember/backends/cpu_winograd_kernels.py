"""Fused Winograd F(m x m, 3 x 3) passes on ember's AVX-512 micro-kernel (numba): transforms and GEMMs per block.

Why: the unfused Winograd of ``ember/ops/conv_winograd.py`` writes every tile's transform ``V`` for the whole batch
(4.7 MB for ResNet-18's layer1 at F(4x4)), multiplies 16 or 36 GEMMs through NumPy (one Python call each) and
reads the products back for the output transform: three passes over arrays far larger than L2, with planes
a multiple of 4 KB apart (all of a tile's 16-36 rows in one L1 cache set). On an Intel Xeon each transform took
as long as the GEMMs (1.1-1.6 ms on one thread, ResNet-18's layer1 and MNIST's conv2). Here one call takes a run
of tiles block by block (``tb`` tiles, a few hundred KB, in L2): the input transform of the block, its
``a*a`` products on the micro-kernel (``sgemm`` by address: no Python between them), the output transform; the
weight gradient transforms a block of the input and of the output gradient, then adds ``V^T dM`` into its
per-thread sum with the accumulating tile. Each transform step is a loop over a contiguous run of channels (the
data are channels-last inside), which LLVM vectorizes; the block buffers have ``tb + 1`` rows so their planes
are not 4 KB apart.

Every sum runs in the same order as the NumPy Winograd path's transforms (term by term); the GEMMs are the
micro-kernel's (k in order), so results agree with the unfused path to float32 rounding.

Example:
    >>> from ember.backends.cpu_kernels import get
    >>> fused = get("winograd_fused_forward")   # None without numba or AVX-512
    >>> fused is None or callable(fused)
    True
"""
from __future__ import annotations

from typing import Any, Callable

import numba
import numpy as np

import llvmlite.ir as ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ember.backends.cpu_gemm_kernels import COLUMNS, ROWS, _tile, host_has_avx512, sgemm

_FULL = (1 << COLUMNS) - 1


def _transform(mat: list) -> Any:
    """A numba intrinsic ``xf(src, s_i, s_j, dst, d_i, d_j, mask)`` (64-bit ints; ``src``, ``dst`` addresses of
    float32 data) computing ``out = L d L^T`` for ``L = mat`` (p x q) on 16 channels at once: ``d[k][l]`` the
    vector at ``src + 4 * (k * s_i + l * s_j)``, ``out[i][j]`` stored at ``dst + 4 * (i * d_i + j * d_j)``, lanes
    whose bit is set in ``mask``. The matrix is folded in as constants (+-1: adds and subtracts; 0: skipped), rows
    first, then columns, each sum term by term in order (no fused multiply-adds: the NumPy path's rounding). All
    ``q*q`` inputs and the ``p*q`` half-results live in vector registers (LLVM spills what does not fit)."""
    p, q = len(mat), len(mat[0])
    i64, i32, f32 = ir.IntType(64), ir.IntType(32), ir.FloatType()
    vec, bits = ir.VectorType(f32, 16), ir.VectorType(ir.IntType(1), 16)
    fptr, vptr = f32.as_pointer(), vec.as_pointer()

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> None:
        src, s_i, s_j, dst, d_i, d_j, mask = args
        module = builder.module
        load = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [vptr, i32, bits, vec]),
                                              "llvm.masked.load.v16f32.p0")
        store = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [vec, vptr, i32, bits]),
                                               "llvm.masked.store.v16f32.p0")
        zero = ir.Constant(vec, None)
        align = ir.Constant(i32, 4)
        lanes = builder.bitcast(builder.trunc(mask, ir.IntType(16)), bits)
        s_ptr, d_ptr = builder.inttoptr(src, fptr), builder.inttoptr(dst, fptr)

        def at(ptr: Any, first: Any, i: int, second: Any, j: int) -> Any:
            offset = builder.add(builder.mul(first, ir.Constant(i64, i)), builder.mul(second, ir.Constant(i64, j)))
            return builder.bitcast(builder.gep(ptr, [offset]), vptr)

        def combine(coeffs: list, terms: list) -> Any:
            acc = None
            for coeff, term in zip(coeffs, terms):
                if coeff == 0:
                    continue
                scaled = term if coeff in (1, -1) else builder.fmul(term, ir.Constant(vec, [float(coeff)] * 16))
                if acc is None:
                    acc = builder.fneg(term) if coeff == -1 else scaled
                elif coeff == 1:
                    acc = builder.fadd(acc, term)
                elif coeff == -1:
                    acc = builder.fsub(acc, term)
                else:
                    acc = builder.fadd(acc, scaled)
            return zero if acc is None else acc

        d = [[builder.call(load, [at(s_ptr, s_i, k, s_j, l), align, lanes, zero]) for l in range(q)] for k in range(q)]
        half = [[combine([mat[i][k] for k in range(q)], [d[k][l] for k in range(q)]) for l in range(q)]
                for i in range(p)]
        for i in range(p):
            for j in range(p):
                value = combine(list(mat[j]), half[i])
                builder.call(store, [value, at(d_ptr, d_i, i, d_j, j), align, lanes])

    @intrinsic
    def xf(typingctx: Any, src: Any, s_i: Any, s_j: Any, dst: Any, d_i: Any, d_j: Any, mask: Any) -> Any:
        operands = (src, s_i, s_j, dst, d_i, d_j, mask)
        if not all(isinstance(t, types.Integer) and t.bitwidth == 64 for t in operands):
            return None
        return types.void(*operands), codegen

    return xf


_BT2 = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
_AT2 = [[1, 1, 1, 0], [0, 1, -1, -1]]
_BT4 = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1]]
_AT4 = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]
# the transforms as intrinsics: input (B^T d B), output (A^T M A), output gradient (A dY A^T), for m = 2 and 4
in2, out2, grad2 = _transform(_BT2), _transform(_AT2), _transform([list(r) for r in zip(*_AT2)])
in4, out4, grad4 = _transform(_BT4), _transform(_AT4), _transform([list(r) for r in zip(*_AT4)])


@numba.njit(inline="always")
def _lanes(c, ch0):  # pragma: no cover - compiled
    return 0xFFFF if c - ch0 >= 16 else (1 << (c - ch0)) - 1


@numba.njit(cache=True, nogil=True)
def _input_tiles(xp, m, th, tw, t0, nt, v):  # pragma: no cover - compiled
    """``v[i*a + j, tt] = (B^T d B)[i, j]`` for tiles ``t0 + tt`` (tt < nt) of the zero-padded channels-last input
    ``xp`` (N, th*m + 2, tw*m + 2, C)."""
    hp, wp, c = xp.shape[1], xp.shape[2], xp.shape[3]
    plane, rows = v.shape[1] * c, v.shape[1] * c * (m + 2)
    base, out = xp.ctypes.data, v.ctypes.data
    for tt in range(nt):
        t = t0 + tt
        b = t // (th * tw)
        src = base + 4 * (((b * hp + (t // tw) % th * m) * wp + t % tw * m) * c)
        dst = out + 4 * tt * c
        for ch0 in range(0, c, 16):
            if m == 4:
                in4(src + 4 * ch0, wp * c, c, dst + 4 * ch0, rows, plane, _lanes(c, ch0))
            else:
                in2(src + 4 * ch0, wp * c, c, dst + 4 * ch0, rows, plane, _lanes(c, ch0))


@numba.njit(cache=True, nogil=True)
def _output_tiles(mt, m, th, tw, t0, nt, y):  # pragma: no cover - compiled
    """``y[b, rows, cols] = A^T M A`` for tiles ``t0 + tt`` of the products ``mt`` (a*a, >= nt, O), into the
    channels-last output ``y`` (N, th*m, tw*m, O) (tiles past the real output write its padding)."""
    hy, wy, o = y.shape[1], y.shape[2], y.shape[3]
    plane, rows = mt.shape[1] * o, mt.shape[1] * o * (m + 2)
    base, out = mt.ctypes.data, y.ctypes.data
    for tt in range(nt):
        t = t0 + tt
        b = t // (th * tw)
        dst = out + 4 * (((b * hy + (t // tw) % th * m) * wy + t % tw * m) * o)
        src = base + 4 * tt * o
        for ch0 in range(0, o, 16):
            if m == 4:
                out4(src + 4 * ch0, rows, plane, dst + 4 * ch0, wy * o, o, _lanes(o, ch0))
            else:
                out2(src + 4 * ch0, rows, plane, dst + 4 * ch0, wy * o, o, _lanes(o, ch0))


@numba.njit(cache=True, nogil=True)
def _grad_tiles(gp, m, th, tw, t0, nt, dm):  # pragma: no cover - compiled
    """``dm[k*a + q, tt] = (A dY A^T)[k, q]`` for the m x m blocks ``dY`` of the channels-last output gradient
    ``gp`` (N, th*m, tw*m, O), zero past the real output (the adjoint of ``_output_tiles``)."""
    hy, wy, o = gp.shape[1], gp.shape[2], gp.shape[3]
    plane, rows = dm.shape[1] * o, dm.shape[1] * o * (m + 2)
    base, out = gp.ctypes.data, dm.ctypes.data
    for tt in range(nt):
        t = t0 + tt
        b = t // (th * tw)
        src = base + 4 * (((b * hy + (t // tw) % th * m) * wy + t % tw * m) * o)
        dst = out + 4 * tt * o
        for ch0 in range(0, o, 16):
            if m == 4:
                grad4(src + 4 * ch0, wy * o, o, dst + 4 * ch0, rows, plane, _lanes(o, ch0))
            else:
                grad2(src + 4 * ch0, wy * o, o, dst + 4 * ch0, rows, plane, _lanes(o, ch0))


@numba.njit(cache=True, nogil=True)
def _to_channels_last(x, b0, k, top, left, xb):  # pragma: no cover - compiled
    """Images ``[b0, b0 + k)`` of NCHW ``x`` into the interior of ``xb`` (>= k, Hp, Wp, C) at (top, left); the rest
    of ``xb`` is left as it is (zero: the padding)."""
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    for bi in range(k):
        for r in range(h):
            for s in range(w):
                dst = xb[bi, top + r, left + s]
                for ch in range(c):
                    dst[ch] = x[b0 + bi, ch, r, s]


@numba.njit(cache=True, nogil=True)
def _image_groups(tiles_per_image, tb):  # pragma: no cover - compiled
    """Images per group: the whole images whose tiles fill about one block (at least one image)."""
    return max(1, (tb + tiles_per_image // 2) // tiles_per_image)


@numba.njit(cache=True, nogil=True)
def winograd_fused_forward(x, u, m, top, left, th, tw, i0, i1, tb, y):  # pragma: no cover - compiled
    """Images ``[i0, i1)`` of the forward ``y = A^T [V . U] A`` (NCHW ``y`` (N, O, OH, OW)) with ``V`` the
    transform of NCHW ``x`` zero-padded by ``top``/``left`` (and past its end up to the tile grid) and ``u``
    (a*a, C, O) the kernel's, contiguous. A few whole images at a time are copied channels-last into a padded
    buffer, their tiles run in blocks of at most ``tb`` (transform, ``a*a`` GEMMs, transform back into a
    channels-last buffer), and the outputs are copied back to NCHW, all while in cache."""
    a = m + 2
    c, o = x.shape[1], u.shape[2]
    oh, ow = y.shape[2], y.shape[3]
    per_image = th * tw
    group = _image_groups(per_image, tb)
    xb = np.zeros((group, th * m + 2, tw * m + 2, c), np.float32)  # the padding stays zero
    yb = np.empty((group, th * m, tw * m, o), np.float32)
    v = np.empty((a * a, tb + 1, c), np.float32)  # tb + 1 rows: planes not a multiple of 4 KB apart
    mt = np.empty((a * a, tb + 1, o), np.float32)
    v_addr, mt_addr, u_addr = v.ctypes.data, mt.ctypes.data, u.ctypes.data
    for b0 in range(i0, i1, group):
        k = min(group, i1 - b0)
        _to_channels_last(x, b0, k, top, left, xb)
        for t0 in range(0, k * per_image, tb):
            nt = min(tb, k * per_image - t0)
            _input_tiles(xb, m, th, tw, t0, nt, v)
            for p in range(a * a):  # M[p] (nt, O) = V[p] (nt, C) @ U[p] (C, O)
                sgemm(nt, o, c, v_addr + 4 * p * (tb + 1) * c, c, 1, u_addr + 4 * p * c * o, o, COLUMNS,
                      mt_addr + 4 * p * (tb + 1) * o, o, 0)
            _output_tiles(mt, m, th, tw, t0, nt, yb)
        for bi in range(k):  # back to NCHW, cropped to the output; row by row (one row's values stay in L1)
            for r in range(oh):
                for ch in range(o):
                    for s in range(ow):
                        y[b0 + bi, ch, r, s] = yb[bi, r, s, ch]


@numba.njit(cache=True, nogil=True)
def winograd_fused_weight(x, g, m, top, left, th, tw, i0, i1, tb, du):  # pragma: no cover - compiled
    """Images ``[i0, i1)`` of the weight gradient in the Winograd domain: ``du[p] += V[p]^T dM[p]`` (a*a, C, O)
    with ``V`` the input transform of NCHW ``x`` (as in the forward) and ``dM = A dY A^T`` of the NCHW output
    gradient ``g`` (zero past its end up to the tile grid); image groups and blocks as in the forward, summed in
    tile order."""
    a = m + 2
    c, o = x.shape[1], g.shape[1]
    per_image = th * tw
    group = _image_groups(per_image, tb)
    xb = np.zeros((group, th * m + 2, tw * m + 2, c), np.float32)
    gb = np.zeros((group, th * m, tw * m, o), np.float32)  # zero past the output: those tiles add nothing
    v = np.empty((a * a, tb + 1, c), np.float32)
    dm = np.empty((a * a, tb + 1, o), np.float32)
    v_addr, dm_addr, du_addr = v.ctypes.data, dm.ctypes.data, du.ctypes.data
    for b0 in range(i0, i1, group):
        k = min(group, i1 - b0)
        _to_channels_last(x, b0, k, top, left, xb)
        _to_channels_last(g, b0, k, 0, 0, gb)
        for t0 in range(0, k * per_image, tb):
            nt = min(tb, k * per_image - t0)
            _input_tiles(xb, m, th, tw, t0, nt, v)
            _grad_tiles(gb, m, th, tw, t0, nt, dm)
            for p in range(a * a):  # dU[p] (C, O) += V[p]^T (C, nt) @ dM[p] (nt, O)
                vp = v_addr + 4 * p * (tb + 1) * c
                dp = dm_addr + 4 * p * (tb + 1) * o
                up = du_addr + 4 * p * c * o
                for j0 in range(0, o, COLUMNS):
                    width = min(COLUMNS, o - j0)
                    mask = _FULL if width == COLUMNS else (1 << width) - 1
                    for r0 in range(0, c, ROWS):
                        _tile(min(ROWS, c - r0), nt, vp + 4 * r0, 1, c, dp + 4 * j0, o, up + 4 * (r0 * o + j0), o, 1,
                              mask, 0)


def build() -> dict[str, Callable[..., Any]]:
    """The fused Winograd kernels on AVX-512 CPUs, else ``{}``."""
    if not host_has_avx512():
        return {}
    return {"winograd_fused_forward": winograd_fused_forward, "winograd_fused_weight": winograd_fused_weight}
