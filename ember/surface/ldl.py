"""LDL^T with Bunch-Kaufman pivoting, the algorithm of LAPACK's unblocked ``sytf2`` (lower triangle) and its
solve ``sytrs``, written against an array namespace; pivot choices differ per matrix, so each matrix of a
batch is factored in turn. Output layout as LAPACK/PyTorch: L below the diagonal, D's 1x1 and 2x2 blocks on
and just below it; ``pivots[k] > 0`` is a 1x1 block with rows k and pivots[k]-1 swapped, a negative pair a
2x2 block.

Example:
    >>> import numpy as np
    >>> LD, piv, info = ldl_factor_xp(np, np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> piv.tolist(), int(info)
    ([-2, -2], 0)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

_ALPHA = (1.0 + math.sqrt(17.0)) / 8.0


def _swap_sym(a: Any, k: int, i: int, j: int) -> None:
    """Symmetric row/column interchange of i and j inside the trailing block a[k:, k:] (the full matrix is kept,
    so a Hermitian one stays Hermitian under it too)."""
    if i == j:
        return
    a[[i, j], k:] = a[[j, i], k:]
    a[k:, [i, j]] = a[k:, [j, i]]


def _cabs1(v: Any) -> Any:
    """LAPACK's magnitude for pivoting: |re| + |im| (|x| for real numbers)."""
    return abs(v.real) + abs(v.imag) if getattr(v, "dtype", np.dtype(type(v))).kind == "c" else abs(v)


def _factor_one(xp: Any, a: Any, hermitian: bool = False) -> tuple:
    """sytf2 (symmetric: ``A = L D L^T``) or, with ``hermitian`` and complex ``a``, hetf2 (``A = L D L^H``, D
    Hermitian with a real diagonal). Pivots are chosen by LAPACK's |re| + |im|, so they are LAPACK's."""
    n = a.shape[-1]
    herm = hermitian and a.dtype.kind == "c"
    conj = xp.conj if herm else (lambda v: v)
    a = xp.array(a, copy=True)
    a = xp.tril(a) + xp.swapaxes(conj(xp.tril(a, -1)), -1, -2)  # read the lower triangle only, as LAPACK
    if herm:
        idx = xp.arange(n)
        a[idx, idx] = a[idx, idx].real
    piv = [0] * n
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(float(a[k, k].real)) if herm else float(_cabs1(a[k, k]))
        if k < n - 1:
            col = _cabs1(a[k + 1:, k])
            imax = k + 1 + int(xp.argmax(col))
            colmax = float(col.max())
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0.0 or math.isnan(absakk):
            info = info or k + 1
            kp = k
            if herm:
                a[k, k] = a[k, k].real
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                rowmax = float(_cabs1(a[imax, k:imax]).max())
                if imax < n - 1:
                    rowmax = max(rowmax, float(_cabs1(a[imax + 1:, imax]).max()))
                diag = abs(float(a[imax, imax].real)) if herm else float(_cabs1(a[imax, imax]))
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif diag >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            _swap_sym(a, k, kk, kp)
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / (a[k, k].real if herm else a[k, k])
                    col = a[k + 1:, k].copy()
                    a[k + 1:, k + 1:] -= d11 * xp.outer(col, conj(col))
                    a[k + 1:, k] = col * d11
                    a[k, k + 1:] = conj(a[k + 1:, k])
            elif k < n - 2:
                c0, c1 = a[k + 2:, k].copy(), a[k + 2:, k + 1].copy()
                if herm:  # hetf2's 2x2 step: D = [[a_kk, conj(d21)], [d21, a_k1k1]] with a real diagonal
                    d = abs(a[k + 1, k])
                    d11 = a[k + 1, k + 1].real / d
                    d22 = a[k, k].real / d
                    tt = 1.0 / (d11 * d22 - 1.0)
                    d21 = a[k + 1, k] / d
                    d = tt / d
                    wk = d * (d11 * c0 - d21 * c1)
                    wkp1 = d * (d22 * c1 - xp.conj(d21) * c0)
                else:
                    d21 = a[k + 1, k]
                    d11 = a[k + 1, k + 1] / d21
                    d22 = a[k, k] / d21
                    t = 1.0 / (d11 * d22 - 1.0)
                    d21 = t / d21
                    wk = d21 * (d11 * c0 - c1)
                    wkp1 = d21 * (d22 * c1 - c0)
                a[k + 2:, k + 2:] -= xp.outer(c0, conj(wk)) + xp.outer(c1, conj(wkp1))
                a[k + 2:, k], a[k + 2:, k + 1] = wk, wkp1
                a[k, k + 2:], a[k + 1, k + 2:] = conj(wk), conj(wkp1)
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return xp.tril(a), piv, info


def ldl_factor_xp(xp: Any, A: Any, hermitian: bool = False) -> tuple:
    """(LD, int32 pivots, int32 info) for a batch of symmetric (or, complex and ``hermitian``, Hermitian) matrices
    (the lower triangles are read)."""
    n = A.shape[-1]
    flat = A.reshape((math.prod(A.shape[:-2]), n, n))
    results = [_factor_one(xp, flat[b], hermitian) for b in range(flat.shape[0])]
    LD = xp.stack([r[0] for r in results]).reshape(A.shape) if results else A.copy()
    piv = xp.asarray([r[1] for r in results], dtype=xp.int32).reshape(A.shape[:-1])
    info = xp.asarray([r[2] for r in results], dtype=xp.int32).reshape(A.shape[:-2])
    return LD, piv, info


def _solve_one(xp: Any, a: Any, piv: list, b: Any, hermitian: bool = False) -> Any:
    """sytrs (``A = L D L^T``) or, Hermitian, hetrs (``A = L D L^H``)."""
    n = a.shape[-1]
    herm = hermitian and a.dtype.kind == "c"
    conj = xp.conj if herm else (lambda v: v)
    b = xp.array(b, copy=True)
    k = 0
    while k < n:  # L D y = P^T b
        if piv[k] > 0:
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= xp.outer(a[k + 1:, k], b[k])
            b[k] = b[k] / (a[k, k].real if herm else a[k, k])
            k += 1
        else:
            kp = -piv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2:] -= xp.outer(a[k + 2:, k], b[k]) + xp.outer(a[k + 2:, k + 1], b[k + 1])
            akm1k = a[k + 1, k]
            akm1, ak = a[k, k] / conj(akm1k), a[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / conj(akm1k), b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T x = y, then undo the interchanges
        if piv[k] > 0:
            if k < n - 1:
                b[k] -= conj(a[k + 1:, k]) @ b[k + 1:]
            kp = piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            if k < n - 1:
                b[k] -= conj(a[k + 1:, k]) @ b[k + 1:]
                b[k - 1] -= conj(a[k + 1:, k - 1]) @ b[k + 1:]
            kp = -piv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


def ldl_solve_xp(xp: Any, LD: Any, pivots: Any, B: Any, hermitian: bool = False) -> Any:
    """X with A X = B from :func:`ldl_factor_xp`'s output; batch dimensions broadcast."""
    batch = np.broadcast_shapes(LD.shape[:-2], B.shape[:-2])
    n, k = LD.shape[-1], B.shape[-1]
    LDb = xp.broadcast_to(LD, batch + (n, n)).reshape((math.prod(batch), n, n))
    Pb = xp.broadcast_to(pivots, batch + (n,)).reshape((math.prod(batch), n))
    Bb = xp.broadcast_to(B, batch + (n, k)).reshape((math.prod(batch), n, k))
    dtype = xp.result_type(LD.dtype, B.dtype)
    out = [_solve_one(xp, LDb[i], [int(p) for p in Pb[i].tolist()], Bb[i].astype(dtype), hermitian)
           for i in range(LDb.shape[0])]
    return xp.stack(out).reshape(batch + (n, k)) if out else xp.zeros(batch + (n, k), dtype=dtype)
