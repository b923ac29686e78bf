"""Cases for tests/torch_surface/test_linalg_vs_torch.py: each runs the same code on ``torch`` and on
``ember`` (``lib`` is the module), so one table checks values, dtypes, gradients and errors of every
``torch.linalg`` name, its top-level aliases and Tensor methods.

A case's ``fn(lib, *inputs)`` returns a tensor or a tuple of tensors. Functions of singular vectors are
written gauge-invariantly (``U * Vh.mT``-style products, squares), as PyTorch's documentation requires for
differentiating them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass
class Case:
    name: str
    fn: Callable[..., Any]
    inputs: Callable[[np.random.Generator], list]  # float64 arrays (ints stay ints)
    grad: bool = True
    diff: tuple | None = None  # input positions to differentiate (default: all float inputs)
    rtol: float = 1e-7
    atol: float = 1e-9
    float32: bool = True  # also compare in float32 (values only, loose tolerance)
    kw: dict = field(default_factory=dict)


def _mat(*shape: int) -> Callable:
    return lambda rng: [rng.standard_normal(shape)]


def _spd(*shape: int) -> Callable:
    def make(rng: np.random.Generator) -> list:
        a = rng.standard_normal(shape)
        return [a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])]
    return make


def _sym(*shape: int) -> Callable:
    def make(rng: np.random.Generator) -> list:
        a = rng.standard_normal(shape)
        return [a + np.swapaxes(a, -1, -2)]
    return make


def _pair(sa: tuple, sb: tuple) -> Callable:
    return lambda rng: [rng.standard_normal(sa) + 3 * np.eye(sa[-1]) if sa[-1] == sa[-2] else
                        rng.standard_normal(sa), rng.standard_normal(sb)]


def _wellcond(*shape: int) -> Callable:
    return lambda rng: [rng.standard_normal(shape) + 3 * np.eye(shape[-1])]


def _gauge_svd(out: Any) -> tuple:
    U, S, Vh = out
    k = S.shape[-1]
    U, Vh = U[..., :, :k], Vh[..., :k, :]
    return S, U * U, Vh * Vh, U @ Vh  # each invariant under u_i, v_i -> -u_i, -v_i


def _gauge_eigh(out: Any) -> tuple:
    L, V = out
    return L, V * V, (V[..., :, :1] * V[..., :, :1].transpose(-2, -1))


def _sym_input(lib: Any, A: Any) -> Any:
    return (A + A.transpose(-2, -1)) / 2  # so the gradient is symmetric on both sides


def _qr_fixed(out: Any) -> tuple:
    return tuple(out)


CASES = [
    Case("svd_tall", lambda L, A: _gauge_svd(L.linalg.svd(A, full_matrices=False)), _mat(5, 3)),
    Case("svd_wide_batched", lambda L, A: _gauge_svd(L.linalg.svd(A, full_matrices=False)), _mat(2, 3, 3, 5)),
    Case("svd_full_matrices", lambda L, A: _gauge_svd(L.linalg.svd(A)), _mat(4, 3)),
    Case("svd_square", lambda L, A: _gauge_svd(L.linalg.svd(A)), _mat(2, 4, 4)),
    Case("svdvals", lambda L, A: L.linalg.svdvals(A), _mat(3, 4, 2)),
    Case("torch_svd_some", lambda L, A: (lambda r: (r.S, r.U * r.U, r.V * r.V))(L.svd(A)), _mat(5, 3)),
    Case("torch_svd_full", lambda L, A: (lambda r: (r.S, r.U.shape[-1] + 0 * r.S))(L.svd(A, some=False)), _mat(5, 3)),
    Case("tensor_svd", lambda L, A: A.svd()[1], _mat(3, 3)),
    Case("eigh", lambda L, A: _gauge_eigh(L.linalg.eigh(_sym_input(L, A))), _mat(2, 4, 4)),
    Case("eigh_upper", lambda L, A: _gauge_eigh(L.linalg.eigh(_sym_input(L, A), UPLO="U")), _mat(3, 3)),
    Case("eigvalsh", lambda L, A: L.linalg.eigvalsh(_sym_input(L, A)), _mat(2, 3, 3)),
    Case("qr_tall", lambda L, A: tuple(L.linalg.qr(A)), _mat(5, 3)),
    Case("qr_wide", lambda L, A: tuple(L.linalg.qr(A)), _mat(2, 3, 5)),
    Case("qr_complete_wide", lambda L, A: tuple(L.linalg.qr(A, mode="complete")), _mat(3, 4)),
    Case("qr_r", lambda L, A: L.linalg.qr(A, mode="r")[1], _mat(4, 3), grad=False),
    Case("torch_qr", lambda L, A: tuple(L.qr(A)), _mat(4, 3)),
    Case("tensor_qr", lambda L, A: tuple(A.qr(some=False)), _mat(3, 3)),
    Case("lu_factor", lambda L, A: tuple(L.linalg.lu_factor(A)), _mat(2, 4, 4)),
    Case("lu_square", lambda L, A: tuple(L.linalg.lu(A)), _mat(2, 4, 4)),
    Case("lu_tall", lambda L, A: tuple(L.linalg.lu(A)), _mat(5, 3)),
    Case("lu_wide", lambda L, A: tuple(L.linalg.lu(A)), _mat(2, 3, 5)),
    Case("lu_factor_ex", lambda L, A: tuple(L.linalg.lu_factor_ex(A)), _mat(3, 3)),
    Case("lu_solve", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B), _pair((2, 3, 3), (2, 3, 2))),
    Case("lu_solve_adjoint", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B, adjoint=True),
         _pair((3, 3), (3, 2))),
    Case("lu_solve_right", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B, left=False),
         _pair((3, 3), (2, 3))),
    Case("lu_solve_right_adjoint", lambda L, A, B: L.linalg.lu_solve(*L.linalg.lu_factor(A), B, left=False,
                                                                     adjoint=True), _pair((3, 3), (2, 3))),
    Case("torch_lu_solve", lambda L, A, B: L.lu_solve(B, *L.linalg.lu_factor(A)), _pair((3, 3), (3, 1))),
    Case("torch_lu_unpack", lambda L, A: tuple(L.lu_unpack(*L.linalg.lu_factor(A))), _mat(2, 4, 3)),
    Case("torch_lu", lambda L, A: tuple(L.lu(A)), _mat(3, 3)),
    Case("tensor_lu", lambda L, A: tuple(A.lu()), _mat(3, 3)),
    Case("cholesky", lambda L, A: L.linalg.cholesky(_sym_input(L, A)), _spd(2, 3, 3)),
    Case("cholesky_upper", lambda L, A: L.linalg.cholesky(_sym_input(L, A), upper=True), _spd(3, 3)),
    Case("cholesky_ex", lambda L, A: tuple(L.linalg.cholesky_ex(_sym_input(L, A))), _spd(3, 3)),
    Case("torch_cholesky", lambda L, A: L.cholesky(_sym_input(L, A)), _spd(3, 3)),
    Case("cholesky_solve", lambda L, A, B: L.cholesky_solve(B, L.linalg.cholesky(_sym_input(L, A))),
         lambda rng: _spd(3, 3)(rng) + [rng.standard_normal((3, 2))]),
    Case("cholesky_inverse", lambda L, A: L.cholesky_inverse(L.linalg.cholesky(_sym_input(L, A))), _spd(3, 3)),
    Case("inv", lambda L, A: L.linalg.inv(A), _wellcond(2, 3, 3)),
    Case("inv_ex", lambda L, A: tuple(L.linalg.inv_ex(A)), _wellcond(3, 3)),
    Case("inverse", lambda L, A: L.inverse(A), _wellcond(3, 3)),
    Case("det", lambda L, A: L.linalg.det(A), _mat(2, 3, 3)),
    Case("torch_det", lambda L, A: L.det(A), _mat(4, 4)),
    Case("slogdet", lambda L, A: tuple(L.linalg.slogdet(A)), _mat(2, 3, 3)),
    Case("logdet", lambda L, A: L.logdet(_sym_input(L, A)), _spd(3, 3)),
    Case("solve", lambda L, A, B: L.linalg.solve(A, B), _pair((2, 3, 3), (2, 3, 2))),
    Case("solve_vector", lambda L, A, B: L.linalg.solve(A, B), _pair((3, 3), (3,))),
    Case("solve_broadcast", lambda L, A, B: L.linalg.solve(A, B), _pair((3, 3), (2, 3, 2))),
    Case("solve_left_false", lambda L, A, B: L.linalg.solve(A, B, left=False), _pair((3, 3), (2, 3))),
    Case("solve_ex", lambda L, A, B: tuple(L.linalg.solve_ex(A, B)), _pair((3, 3), (3, 2))),
    Case("solve_triangular_upper", lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True),
         _pair((2, 3, 3), (2, 3, 2))),
    Case("solve_triangular_lower_right_unit", lambda L, A, B: L.linalg.solve_triangular(
        A, B, upper=False, left=False, unitriangular=True), _pair((3, 3), (2, 3))),
    Case("triangular_solve", lambda L, A, B: tuple(L.triangular_solve(B, A, upper=False, transpose=True)),
         _pair((3, 3), (3, 2))),
    Case("pinv_tall", lambda L, A: L.linalg.pinv(A), _mat(5, 3)),
    Case("pinv_wide_batched", lambda L, A: L.linalg.pinv(A), _mat(2, 3, 4)),
    Case("pinv_hermitian", lambda L, A: L.linalg.pinv(_sym_input(L, A), hermitian=True), _spd(3, 3)),
    Case("pinverse", lambda L, A: L.pinverse(A), _mat(4, 3)),
    Case("tensor_pinverse", lambda L, A: A.pinverse(), _mat(3, 4)),
    Case("lstsq_tall", lambda L, A, B: tuple(L.linalg.lstsq(A, B)[:3]), _pair((5, 3), (5, 2))),
    Case("lstsq_gels_residuals", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gels")), _pair((5, 3), (5, 2))),
    Case("lstsq_wide", lambda L, A, B: L.linalg.lstsq(A, B).solution, _pair((3, 5), (3, 2))),
    Case("lstsq_gelsd", lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelsd")), _pair((2, 4, 3), (2, 4, 1))),
    Case("matrix_rank", lambda L, A: L.linalg.matrix_rank(A), _mat(2, 4, 3), grad=False),
    Case("matrix_exp", lambda L, A: L.linalg.matrix_exp(A), _mat(2, 3, 3)),
    Case("torch_matrix_exp", lambda L, A: L.matrix_exp(0.5 * A), _mat(3, 3)),
    Case("matrix_power", lambda L, A: L.linalg.matrix_power(A, 3), _mat(2, 3, 3)),
    Case("matrix_power_neg", lambda L, A: L.linalg.matrix_power(A, -2), _wellcond(3, 3)),
    Case("matrix_norm_fro", lambda L, A: L.linalg.matrix_norm(A), _mat(2, 3, 4)),
    Case("matrix_norm_nuc", lambda L, A: L.linalg.matrix_norm(A, "nuc"), _mat(2, 3, 4)),
    Case("matrix_norm_2", lambda L, A: L.linalg.matrix_norm(A, 2), _mat(3, 4)),
    Case("matrix_norm_m2_keepdim", lambda L, A: L.linalg.matrix_norm(A, -2, keepdim=True), _mat(2, 3, 4)),
    Case("matrix_norm_inf_dims", lambda L, A: L.linalg.matrix_norm(A, float("inf"), dim=(0, 2)), _mat(3, 2, 4)),
    Case("matrix_norm_1", lambda L, A: L.linalg.matrix_norm(A, 1), _mat(3, 4)),
    Case("matrix_norm_m1", lambda L, A: L.linalg.matrix_norm(A, -1), _mat(3, 4)),
    Case("nuclear_norm", lambda L, A: L.nuclear_norm(A), _mat(3, 4)),
    Case("norm_matrix_default", lambda L, A: L.linalg.norm(A), _mat(3, 4)),
    Case("norm_vector_3", lambda L, A: L.linalg.norm(A, 3, dim=1), _mat(3, 4)),
    Case("norm_nuc", lambda L, A: L.linalg.norm(A, "nuc"), _mat(3, 4)),
    Case("vector_norm_inf", lambda L, A: L.linalg.vector_norm(A, float("inf"), dim=-1), _mat(3, 4)),
    Case("vector_norm_0", lambda L, A: L.linalg.vector_norm(A, 0), _mat(3, 4), grad=False),
    Case("vector_norm_half", lambda L, A: L.linalg.vector_norm(A, 0.5, dim=(0, 1)), _mat(3, 4)),
    Case("cond", lambda L, A: L.linalg.cond(A), _mat(2, 3, 3)),
    Case("cond_fro", lambda L, A: L.linalg.cond(A, "fro"), _wellcond(3, 3), grad=False),  # torch 2.13 cannot differentiate it
    Case("cond_m2", lambda L, A: L.linalg.cond(A, -2), _mat(3, 4)),
    Case("cross", lambda L, a, b: L.linalg.cross(a, b), lambda rng: [rng.standard_normal((2, 3)),
                                                                      rng.standard_normal((2, 3))]),
    Case("multi_dot", lambda L, a, b, c: L.linalg.multi_dot([a, b, c]),
         lambda rng: [rng.standard_normal((3,)), rng.standard_normal((3, 4)), rng.standard_normal((4, 2))]),
    Case("vecdot", lambda L, a, b: L.linalg.vecdot(a, b), lambda rng: [rng.standard_normal((2, 3)),
                                                                        rng.standard_normal((3,))]),
    Case("diagonal", lambda L, A: L.linalg.diagonal(A, offset=1), _mat(2, 3, 4)),
    Case("vander", lambda L, x: L.linalg.vander(x), _mat(2, 4)),
    Case("vander_N", lambda L, x: L.linalg.vander(x, N=2), _mat(3)),
    Case("tensorinv", lambda L, A: L.linalg.tensorinv(A, ind=2),
         lambda rng: [(rng.standard_normal((6, 6)) + 3 * np.eye(6)).reshape(2, 3, 6)]),
    Case("tensorsolve", lambda L, A, B: L.linalg.tensorsolve(A, B),
         lambda rng: [(rng.standard_normal((6, 6)) + 3 * np.eye(6)).reshape(2, 3, 6), rng.standard_normal((2, 3))]),
    Case("tensorsolve_dims", lambda L, A, B: L.linalg.tensorsolve(A, B, dims=(0,)),
         lambda rng: [(rng.standard_normal((6, 6)) + 3 * np.eye(6)).reshape(6, 2, 3), rng.standard_normal((2, 3))]),
    Case("householder_product", lambda L, A, tau: L.linalg.householder_product(A, tau),
         lambda rng: [rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 2))]),
    Case("geqrf_orgqr", lambda L, A: (lambda r: (r[0], r[1], L.orgqr(*r)))(L.geqrf(A)), _mat(5, 3), grad=False),
    Case("geqrf_batched", lambda L, A: tuple(L.geqrf(A)), _mat(2, 3, 4), grad=False),
    Case("ormqr", lambda L, A, C: L.ormqr(*L.geqrf(A), C, left=False, transpose=True),
         lambda rng: [rng.standard_normal((4, 3)), rng.standard_normal((2, 4))], diff=(1,)),
    Case("ormqr_left", lambda L, A, C: L.ormqr(*L.geqrf(A), C), lambda rng: [rng.standard_normal((4, 3)),
                                                                          rng.standard_normal((4, 2))], diff=(1,)),
    Case("ldl_factor", lambda L, A: tuple(L.linalg.ldl_factor(A)), _sym(2, 5, 5), grad=False),
    Case("ldl_factor_indefinite", lambda L, A: tuple(L.linalg.ldl_factor_ex(A)),
         lambda rng: [np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])], grad=False),
    Case("ldl_solve", lambda L, A, B: L.linalg.ldl_solve(*L.linalg.ldl_factor(A), B),
         lambda rng: _sym(2, 4, 4)(rng) + [rng.standard_normal((2, 4, 2))], grad=False),
    Case("tensor_det_methods", lambda L, A: (A.det(), A.logdet(), A.slogdet()[1], A.inverse()),
         _spd(3, 3)),
    Case("tensor_cholesky_methods", lambda L, A: (A.cholesky(), A.cholesky_inverse()), _spd(3, 3), grad=False),
    Case("lobpcg", lambda L, A: L.lobpcg(_sym_input(L, A), k=2)[0], _spd(12, 12), grad=False, rtol=1e-5),
]

# Special inputs: singular, zero, identity, rank-deficient. fn and inputs as above; grad compared too.
SPECIAL = [
    Case("det_singular", lambda L, A: L.linalg.det(A), lambda rng: [np.array([[1.0, 2.0], [2.0, 4.0]])]),
    Case("det_zero", lambda L, A: L.linalg.det(A), lambda rng: [np.zeros((3, 3))]),
    Case("det_identity", lambda L, A: L.linalg.det(A), lambda rng: [np.eye(3)]),
    Case("det_1x1", lambda L, A: L.linalg.det(A), lambda rng: [np.array([[-2.0]])]),
    Case("slogdet_singular", lambda L, A: tuple(L.linalg.slogdet(A)), lambda rng: [np.zeros((2, 2))], grad=False),
    # the zero singular value's vectors are any unit vectors of the null spaces: only s_max has one gradient
    Case("svd_rank_deficient", lambda L, A: L.linalg.svdvals(A)[..., :1], lambda rng: [np.outer([1.0, 2, 3], [1.0, -1])]),
    Case("svd_identity_values", lambda L, A: L.linalg.svd(A).S, lambda rng: [np.eye(3)], grad=False),
    Case("pinv_rank_deficient", lambda L, A: L.linalg.pinv(A), lambda rng: [np.outer([1.0, 2, 3], [1.0, -1])]),
    Case("matrix_rank_deficient", lambda L, A: L.linalg.matrix_rank(A), lambda rng: [np.outer([1.0, 2, 3], [1.0, -1])],
         grad=False),
    Case("lu_factor_ex_singular", lambda L, A: tuple(L.linalg.lu_factor_ex(A)),
         lambda rng: [np.array([[1.0, 2.0], [2.0, 4.0]])], grad=False),
    Case("lu_singular", lambda L, A: tuple(L.linalg.lu(A)), lambda rng: [np.array([[0.0, 0.0], [0.0, 0.0]])],
         grad=False),
    Case("inv_ex_singular", lambda L, A: L.linalg.inv_ex(A).info, lambda rng: [np.stack([np.eye(2), np.ones((2, 2))])],
         grad=False),
    Case("cholesky_ex_not_pd", lambda L, A: L.linalg.cholesky_ex(A).info,
         lambda rng: [np.stack([np.eye(3), -np.eye(3), np.diag([1.0, 1.0, -1.0])])], grad=False),
    Case("eigh_repeated_values", lambda L, A: L.linalg.eigvalsh(A), lambda rng: [np.eye(3) * 2.0]),
    Case("matrix_exp_zero", lambda L, A: L.linalg.matrix_exp(A), lambda rng: [np.zeros((2, 3, 3))]),
    Case("matrix_exp_large", lambda L, A: L.linalg.matrix_exp(A), lambda rng: [np.array([[10.0, 2.0], [-3.0, 7.0]])],
         rtol=1e-10),
    Case("solve_triangular_zero_diag", lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True),
         lambda rng: [np.array([[1.0, 2.0], [0.0, 0.0]]), np.ones((2, 1))], grad=False),
    Case("empty_batch_inv", lambda L, A: L.linalg.inv(A), lambda rng: [np.zeros((0, 3, 3))], grad=False),
    Case("norm_zero_vector", lambda L, x: L.linalg.vector_norm(x), lambda rng: [np.zeros(3)]),
    Case("matrix_norm_inf_values", lambda L, A: L.linalg.matrix_norm(A, float("-inf")),
         lambda rng: [np.array([[np.inf, 1.0], [2.0, -3.0]])], grad=False),
]

# (name, fn(lib, *inputs), inputs) that must raise; ember's message must contain torch's first words.
ERRORS = [
    ("inv_singular", lambda L, A: L.linalg.inv(A), lambda: [np.array([[1.0, 2.0], [2.0, 4.0]])]),
    ("inv_singular_batched", lambda L, A: L.linalg.inv(A), lambda: [np.stack([np.eye(2), np.ones((2, 2))])]),
    ("inv_not_square", lambda L, A: L.linalg.inv(A), lambda: [np.ones((2, 3))]),
    ("inv_int", lambda L, A: L.linalg.inv(A), lambda: [np.ones((2, 2), dtype=np.int64)]),
    ("svd_1d", lambda L, A: L.linalg.svd(A), lambda: [np.ones(3)]),
    ("cholesky_not_pd", lambda L, A: L.linalg.cholesky(A), lambda: [np.array([[1.0, 2.0], [2.0, 1.0]])]),
    ("solve_singular", lambda L, A, B: L.linalg.solve(A, B), lambda: [np.ones((2, 2)), np.ones(2)]),
    ("lu_factor_singular", lambda L, A: L.linalg.lu_factor(A), lambda: [np.array([[1.0, 2.0], [2.0, 4.0]])]),
    ("qr_bad_mode", lambda L, A: L.linalg.qr(A, mode="full"), lambda: [np.ones((2, 2))]),
    ("eigh_bad_uplo", lambda L, A: L.linalg.eigh(A, UPLO="X"), lambda: [np.eye(2)]),
    ("tensorinv_bad", lambda L, A: L.linalg.tensorinv(A, ind=1), lambda: [np.ones((2, 3))]),
    ("solve_triangular_shapes", lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True),
     lambda: [np.eye(3), np.ones((2, 1))]),
    ("tensor_solve_removed", lambda L, A, B: A.solve(B), lambda: [np.eye(2), np.ones((2, 1))]),
    ("tensor_lstsq_removed", lambda L, A, B: A.lstsq(B), lambda: [np.eye(2), np.ones((2, 1))]),
    ("tensor_symeig_removed", lambda L, A: A.symeig(), lambda: [np.eye(2)]),
    ("tensor_eig_removed", lambda L, A: A.eig(), lambda: [np.eye(2)]),
]
