"""``torch.svd_lowrank`` and ``torch.pca_lowrank``: randomized truncated SVD (Halko, Martinsson and Tropp 2009,
"Finding structure with randomness", algorithm 4.4: a random range finder refined by subspace iterations).

Built from ember ops (``randn``, ``linalg.qr``, ``linalg.svd``, matmul), so results are differentiable and run on any
device. The draws come from ember's generator: same seed, same result in ember, but not torch's numbers.

Example:
    >>> import ember
    >>> A = ember.randn(50, 4) @ ember.randn(4, 30)          # rank 4
    >>> U, S, V = ember.svd_lowrank(A, q=6)
    >>> U.shape, S.shape, V.shape
    (ember.Size([50, 6]), ember.Size([6]), ember.Size([30, 6]))
"""
from __future__ import annotations

from typing import Any

from ember.creation import randn
from ember.linalg import qr, svd
from ember.tensor import Tensor

__all__ = ["svd_lowrank", "pca_lowrank"]


def _adjoint(x: Tensor) -> Tensor:
    return x.mH if x.dtype.is_complex else x.mT


def _basis(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """Q with q orthonormal columns such that Q Q^H (A - M) approximates A - M."""
    dtype = A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else None
    R = randn(A.shape[-1], q, dtype=dtype, device=A.device)

    def apply(X: Tensor, adjoint: bool) -> Tensor:
        op = _adjoint(A) if adjoint else A
        out = op @ X
        if M is not None:
            out = out - (_adjoint(M) if adjoint else M) @ X
        return out

    Q = qr(apply(R, False)).Q
    for _ in range(niter):
        Q = qr(apply(Q, True)).Q
        Q = qr(apply(Q, False)).Q
    return Q


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None) -> tuple:
    """``(U, S, V)`` with ``A - M ~ U diag(S) V^H``: U (*, m, q), S (*, q), V (*, n, q)."""
    q = 6 if q is None else int(q)
    niter = 2 if niter is None else int(niter)
    if niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    m, n = A.shape[-2:]
    if not 0 <= q <= min(m, n):
        raise ValueError(f"svd_lowrank: q(={q}) must be non-negative integer and not greater than min(m, n)="
                         f"{min(m, n)}")
    if M is not None:
        M = M.broadcast_to(tuple(A.shape))
    wide = m < n
    if wide:  # work on the tall adjoint, then swap U and V
        A = _adjoint(A)
        M = None if M is None else _adjoint(M)
    Q = _basis(A, q, niter, M)
    B = _adjoint(Q) @ A
    if M is not None:
        B = B - _adjoint(Q) @ M
    U, S, Vh = svd(B, full_matrices=False)
    U, V = Q @ U, _adjoint(Vh)
    return (V, S, U) if wide else (U, S, V)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True, niter: int = 2) -> tuple:
    """Principal components of the rows of ``A`` (m samples x n features): ``(U, S, V)`` of the centered data, V's
    columns the principal directions, ``S**2 / (m - 1)`` the variances along them."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if niter < 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(dim=-2, keepdim=True), q, niter=niter)
