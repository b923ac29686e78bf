"""PyTorch's top-level linear-algebra spellings (``torch.svd``, ``torch.qr``, ``torch.inverse``,
``torch.lu_solve``, ``torch.triangular_solve``, ``torch.lobpcg``...) and the matching Tensor methods, all
routed to the op records behind :mod:`ember.linalg` (one implementation, several names). Tensor methods
PyTorch removed (``solve``, ``lstsq``, ``eig``, ``symeig``) raise PyTorch's error naming the replacement;
the deprecated spellings warn once in PyTorch's words (:mod:`ember.surface.deprecated_linalg`).

Example:
    >>> import ember
    >>> U, S, V = ember.svd(ember.tensor([[3.0, 0.0], [0.0, 4.0]]))
    >>> S.tolist(), V.shape
    ([4.0, 3.0], ember.Size([2, 2]))
"""
from __future__ import annotations

import functools
from typing import Any

from ember import linalg as _linalg, return_types
from ember.creation import zeros
from ember.ops import dispatch, linalg_checks as checks, linalg_factor as _factor, linalg_solve as _solve
from ember.surface import linalg_composites as _comp
from ember.surface import deprecated_linalg as _deprecated
from ember.tensor import Tensor

__all__ = ["svd", "qr", "lu", "lu_solve", "lu_unpack", "pinverse", "nuclear_norm", "geqrf", "orgqr", "ormqr",
           "lobpcg", "inverse", "det", "slogdet", "logdet", "cholesky", "cholesky_solve", "cholesky_inverse",
           "triangular_solve", "matrix_exp", "matrix_power"]

_SVD = functools.partial(return_types.make, return_types.svd)
_QR = functools.partial(return_types.make, return_types.qr)
_SLOGDET = functools.partial(return_types.make, return_types.slogdet)
_GEQRF = functools.partial(return_types.make, return_types.geqrf)
_TRI = functools.partial(return_types.make, return_types.triangular_solve)

lu_unpack = _comp.lu_unpack
ormqr = _comp.ormqr
matrix_power = _comp.matrix_power


def svd(input: Tensor, some: bool = True, compute_uv: bool = True, *, out: Any = None) -> tuple:
    """``torch.svd``: ``(U, S, V)`` with V (not V^T); ``some=False`` gives full U and V; without
    ``compute_uv`` U and V are zero-filled, as in PyTorch."""
    U, S, Vh = _linalg.svd(input, full_matrices=not some)
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return _SVD(zeros(batch + (m, m), dtype=input.dtype), S,
                    zeros(batch + (n, n), dtype=input.dtype))
    return _SVD(U, S, Vh.transpose(-2, -1))


def qr(input: Tensor, some: bool = True, *, out: Any = None) -> tuple:
    _deprecated.warn_deprecated("qr")
    Q, R = _linalg.qr(input, "reduced" if some else "complete")
    return _QR(Q, R)


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False, out: Any = None) -> tuple:
    """``torch.lu``: ``(LU, pivots)`` or ``(LU, pivots, infos)`` (never raises for singular input)."""
    _deprecated.warn_deprecated("lu")
    LU, pivots, info = _comp.lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def lu_solve(input: Tensor, LU_data: Tensor, LU_pivots: Tensor, *, out: Any = None) -> Tensor:
    _deprecated.warn_deprecated("lu_solve")
    return _comp.lu_solve(LU_data, LU_pivots, input)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    return _linalg.pinv(input, rtol=rcond)


def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Tensor:
    return _comp.matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)


def geqrf(input: Tensor, *, out: Any = None) -> tuple:
    """LAPACK's geqrf: R and the Householder vectors in one matrix, plus tau (no gradient, as PyTorch)."""
    checks.matrix(input, "geqrf", complex_ok=True)
    a, tau = dispatch.apply(_factor.GEQRF, (input,))
    return _GEQRF(a, tau)


def orgqr(input: Tensor, input2: Tensor) -> Tensor:
    return _comp.householder_product(input, input2)


def inverse(input: Tensor, *, out: Any = None) -> Tensor:
    return _solve.inv(input)


def det(input: Tensor) -> Tensor:
    return _solve.det(input)


def slogdet(input: Tensor) -> tuple:
    sign, logabs = _solve.slogdet(input)
    return _SLOGDET(sign, logabs)


def logdet(input: Tensor) -> Tensor:
    """log(det): NaN for a negative determinant, -inf for a singular matrix; the complex logarithm
    log|det| + i angle(det) for complex matrices."""
    sign, logabs = _solve.slogdet(input)
    if input.dtype.is_complex:
        return logabs.to(input.dtype) + sign.log()
    nan = logabs.detach() * 0 + float("nan")
    return nan.where(sign < 0, logabs)


def cholesky(input: Tensor, upper: bool = False, *, out: Any = None) -> Tensor:
    _deprecated.warn_deprecated("cholesky")
    return _linalg.cholesky(input, upper=upper)


def cholesky_solve(input: Tensor, input2: Tensor, upper: bool = False, *, out: Any = None) -> Tensor:
    """X with (L L^T) X = B for B = ``input`` and the Cholesky factor L = ``input2`` (U^T U with ``upper=True``).
    The gradient treats L as a full matrix (PyTorch's), so A = L L^T is formed and solved."""
    return _solve.solve(_gram(input2, upper), input)


def cholesky_inverse(input: Tensor, upper: bool = False, *, out: Any = None) -> Tensor:
    return _solve.inv(_gram(input, upper))


def _gram(L: Tensor, upper: bool) -> Tensor:
    """L L^H from L's triangle (LAPACK reads only that), with the gradient PyTorch gives: that of a full L. The
    conjugate transpose for complex factors (a plain transpose gave a non-Hermitian, wrong A)."""
    other = L.tril(-1) if upper else L.triu(1)
    tri = L - other.detach()
    adjoint = tri.transpose(-2, -1).conj() if tri.is_complex() else tri.transpose(-2, -1)
    return adjoint @ tri if upper else tri @ adjoint


def triangular_solve(input: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False, *, out: Any = None) -> tuple:
    """``torch.triangular_solve``: ``(solution of op(A) X = input, A.clone())``."""
    _deprecated.warn_deprecated("triangular_solve")
    tri = A.transpose(-2, -1) if transpose else A
    solution = _solve.solve_triangular(tri, input, upper=upper != transpose, unitriangular=unitriangular)
    return _TRI(solution, A.clone())


def matrix_exp(input: Tensor) -> Tensor:
    return _linalg.matrix_exp(input)


def lobpcg(A: Tensor, k: int | None = None, B: Tensor | None = None, X: Tensor | None = None,
           n: int | None = None, iK: Any = None, niter: Any = None, tol: Any = None, largest: bool | None = None,
           method: Any = None, tracker: Any = None, ortho_iparams: Any = None, ortho_fparams: Any = None,
           ortho_bparams: Any = None) -> tuple:
    """The ``k`` largest (or smallest) eigenpairs of the symmetric-definite problem ``A x = l B x``.

    ember solves it densely (Cholesky of B, then eigh), which gives the eigenpairs LOBPCG converges to
    without its iterations: exact to rounding at ember's matrix sizes, differentiable in A through eigh.
    The iteration controls (``niter``, ``tol``, ``method``, ``tracker``...) are accepted and unused. Complex
    Hermitian ``A`` (and Hermitian positive-definite ``B``) work too (torch 2.13's lobpcg refuses them)."""
    checks.square(A, "lobpcg", complex_ok=True)
    k = (X.shape[-1] if X is not None else 1) if k is None else int(k)
    size = A.shape[-1]
    if size < 3 * (k if n is None else max(k, n)):
        raise ValueError(f"LPBPCG algorithm is not applicable when the number of A rows (={size}) is smaller than "
                         f"3 x the number of requested eigenpairs (={k if n is None else max(k, n)})")
    largest = True if largest is None else largest
    if B is not None:
        low = _linalg.cholesky(B)
        # C = L^-1 A L^-H (Hermitian when A is): the standard problem with the same eigenvalues
        C = _solve.solve_triangular(low, _solve.solve_triangular(low, A, upper=False).mH, upper=False).mH
        w, y = _linalg.eigh(C)
        v = _solve.solve_triangular(low.mH, y, upper=True)
    else:
        w, v = _linalg.eigh(A)
    if largest:
        w, v = w.flip(-1), v.flip(-1)
    return w.narrow(-1, 0, k), v.narrow(-1, 0, k)


def install_methods() -> None:
    """Tensor methods for the names above (``A.svd()``, ``A.pinverse()``, ``LU.lu_solve``-style ``b.lu_solve``)."""
    Tensor.svd = lambda self, some=True, compute_uv=True: svd(self, some, compute_uv)
    Tensor.qr = lambda self, some=True: qr(self, some)
    Tensor.lu = lambda self, pivot=True, get_infos=False: lu(self, pivot, get_infos)
    Tensor.lu_solve = lambda self, LU_data, LU_pivots: lu_solve(self, LU_data, LU_pivots)
    Tensor.pinverse = lambda self, rcond=1e-15: pinverse(self, rcond)
    Tensor.geqrf = lambda self: geqrf(self)
    Tensor.orgqr = lambda self, input2: orgqr(self, input2)
    Tensor.ormqr = lambda self, input2, input3, left=True, transpose=False: ormqr(self, input2, input3, left,
                                                                                transpose)
    Tensor.inverse = lambda self: inverse(self)
    Tensor.det = lambda self: det(self)
    Tensor.slogdet = lambda self: slogdet(self)
    Tensor.logdet = lambda self: logdet(self)
    Tensor.cholesky = lambda self, upper=False: cholesky(self, upper)
    Tensor.cholesky_solve = lambda self, input2, upper=False: cholesky_solve(self, input2, upper)
    Tensor.cholesky_inverse = lambda self, upper=False: cholesky_inverse(self, upper)
    Tensor.triangular_solve = lambda self, A, upper=True, transpose=False, unitriangular=False: \
        triangular_solve(self, A, upper, transpose, unitriangular)
    Tensor.matrix_exp = lambda self: matrix_exp(self)
    Tensor.matrix_power = lambda self, n: matrix_power(self, n)
    Tensor.nuclear_norm = lambda self, dim=None, keepdim=False: nuclear_norm(self, dim, keepdim)
    Tensor.solve = _deprecated.solve  # removed from PyTorch: its RuntimeError, as torch's
    Tensor.lstsq = _deprecated.lstsq
    Tensor.eig = _deprecated.eig
    Tensor.symeig = _deprecated.symeig


