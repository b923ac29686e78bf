"""Complex qr, lu / lu_factor / lu_solve, pinv, lstsq and matrix_exp against PyTorch: values at complex64 and
complex128, gradients with PyTorch's convention (conjugate Wirtinger derivatives), batched, under vmap, and at
special points (zero and singular matrices)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.func as ef

_DTYPES = [(np.complex64, 2e-5), (np.complex128, 1e-12)]


def _cx(rng: np.random.Generator, shape: tuple, dtype: type) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def _numpy(t) -> np.ndarray:
    return t.detach().resolve_conj().numpy() if isinstance(t, torch.Tensor) else t.detach().numpy()


def _compare(f_ember, f_torch, arrays: list, tol: float, seed: int = 0) -> None:
    """Outputs equal; gradients of real(sum(W * out)) (random complex W, W real for real outputs) equal."""
    rng = np.random.default_rng(seed)
    mine = [ember.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out_e, out_t = f_ember(*mine), f_torch(*theirs)
    out_e = out_e if isinstance(out_e, tuple) else (out_e,)
    out_t = out_t if isinstance(out_t, tuple) else (out_t,)
    loss_e = loss_t = 0
    for a, b in zip(out_e, out_t):
        expected = _numpy(b)
        assert a.shape == tuple(b.shape) and np.dtype(a.dtype.np) == expected.dtype
        scale = max(1.0, float(np.abs(expected).max(initial=0)))
        np.testing.assert_allclose(_numpy(a), expected, rtol=0, atol=tol * scale)
        w = _cx(rng, tuple(b.shape), expected.dtype) if b.is_complex() else rng.standard_normal(tuple(b.shape))
        loss_e = loss_e + (a * ember.tensor(w)).real.sum() if b.is_complex() else loss_e + (a * ember.tensor(w)).sum()
        loss_t = loss_t + (b * torch.tensor(w)).real.sum() if b.is_complex() else loss_t + (b * torch.tensor(w)).sum()
    loss_e.backward()
    loss_t.backward()
    for x, y in zip(mine, theirs):
        expected = _numpy(y.grad)
        scale = max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(_numpy(x.grad), expected, rtol=0, atol=10 * tol * scale)


_SHAPES = [(4, 3), (3, 3), (3, 5), (2, 4, 3), (2, 3, 5)]


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("shape", _SHAPES)
def test_qr_values_and_gradients(dtype, tol, shape) -> None:
    a = _cx(np.random.default_rng(1), shape, dtype)
    _compare(lambda x: tuple(ember.linalg.qr(x)), lambda x: tuple(torch.linalg.qr(x)), [a], tol)
    if shape[-2] <= shape[-1]:  # complete mode is differentiable for m <= n (PyTorch's rule)
        _compare(lambda x: tuple(ember.linalg.qr(x, "complete")), lambda x: tuple(torch.linalg.qr(x, "complete")),
                 [a], tol)


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("shape", _SHAPES)
def test_lu_and_lu_factor_values_and_gradients(dtype, tol, shape) -> None:
    a = _cx(np.random.default_rng(2), shape, dtype)
    _compare(lambda x: tuple(ember.linalg.lu(x)), lambda x: tuple(torch.linalg.lu(x)), [a], tol)
    _compare(lambda x: ember.linalg.lu_factor(x)[0], lambda x: torch.linalg.lu_factor(x)[0], [a], tol)
    assert ember.linalg.lu_factor(ember.tensor(a)).pivots.tolist() == torch.linalg.lu_factor(torch.tensor(a)).pivots.tolist()


def test_lu_pivots_follow_lapack_for_complex_numbers() -> None:
    """LAPACK picks the pivot of largest |re| + |im|, not of largest modulus: 3 + 3j (6) beats 4.5 (4.5 > |3+3j|)."""
    a = np.array([[4.5, 1.0], [3 + 3j, 2.0]], dtype=np.complex128)
    assert ember.linalg.lu_factor(ember.tensor(a)).pivots.tolist() == torch.linalg.lu_factor(torch.tensor(a)).pivots.tolist() == [2, 2]


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("adjoint", [False, True])
def test_lu_solve_values_and_gradients(dtype, tol, left, adjoint) -> None:
    rng = np.random.default_rng(3)
    a = _cx(rng, (2, 4, 4), dtype)
    b = _cx(rng, (2, 4, 3) if left else (2, 3, 4), dtype)
    lu_np, piv_np = (t.numpy() for t in torch.linalg.lu_factor(torch.tensor(a)))
    _compare(lambda lu, x: ember.linalg.lu_solve(lu, ember.tensor(piv_np), x, left=left, adjoint=adjoint),
             lambda lu, x: torch.linalg.lu_solve(lu, torch.tensor(piv_np), x, left=left, adjoint=adjoint),
             [lu_np, b], tol)


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("shape", _SHAPES)
def test_pinv_values_and_gradients(dtype, tol, shape) -> None:
    a = _cx(np.random.default_rng(4), shape, dtype)
    _compare(ember.linalg.pinv, torch.linalg.pinv, [a], tol)


@pytest.mark.parametrize("dtype,tol", _DTYPES)
def test_pinv_hermitian_values_and_gradients(dtype, tol) -> None:
    a = _cx(np.random.default_rng(5), (2, 4, 4), dtype)
    _compare(lambda x: ember.linalg.pinv(x + x.mH, hermitian=True),
             lambda x: torch.linalg.pinv(x + x.mH, hermitian=True), [a], tol)


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("shapes", [((5, 3), (5, 2)), ((3, 3), (3,)), ((3, 5), (3, 2)), ((2, 4, 3), (2, 4, 1))])
def test_lstsq_solution_and_gradients(dtype, tol, shapes) -> None:
    rng = np.random.default_rng(6)
    a, b = _cx(rng, shapes[0], dtype), _cx(rng, shapes[1], dtype)
    _compare(lambda x, y: ember.linalg.lstsq(x, y).solution, lambda x, y: torch.linalg.lstsq(x, y).solution, [a, b],
             50 * tol)


@pytest.mark.parametrize("driver", ["gelsy", "gelsd", "gelss", "gels"])
def test_lstsq_fields_are_real_where_pytorch_makes_them_real(driver) -> None:
    rng = np.random.default_rng(7)
    a, b = _cx(rng, (5, 3), np.complex128), _cx(rng, (5, 2), np.complex128)
    mine = ember.linalg.lstsq(ember.tensor(a), ember.tensor(b), driver=driver)
    theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    for x, y in zip(mine, theirs):
        assert tuple(x.shape) == tuple(y.shape) and str(x.dtype).split(".")[1] == str(y.dtype).split(".")[1], (driver, x.dtype, y.dtype)
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype,tol", _DTYPES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (1, 1)])
@pytest.mark.parametrize("scale", [0.3, 3.0])
def test_matrix_exp_values_and_gradients(dtype, tol, shape, scale) -> None:
    a = _cx(np.random.default_rng(8), shape, dtype) * scale
    _compare(ember.linalg.matrix_exp, torch.linalg.matrix_exp, [a], 20 * tol)


def test_special_points() -> None:
    zero = np.zeros((3, 3), dtype=np.complex128)
    np.testing.assert_array_equal(ember.linalg.matrix_exp(ember.tensor(zero)).numpy(), np.eye(3))
    np.testing.assert_array_equal(ember.linalg.pinv(ember.tensor(zero)).numpy(), zero)
    singular = np.array([[1 + 1j, 2 - 1j], [2 + 2j, 4 - 2j]])  # second row = 2 x first
    mine = ember.linalg.lu_factor_ex(ember.tensor(singular))
    theirs = torch.linalg.lu_factor_ex(torch.tensor(singular))
    np.testing.assert_allclose(mine.LU.numpy(), theirs.LU.numpy(), atol=1e-15)
    assert int(mine.info) == int(theirs.info) == 2
    with pytest.raises(RuntimeError, match="U\\[2,2\\] is zero"):
        ember.linalg.lu_factor(ember.tensor(singular))
    # pinv of a rank-1 complex matrix keeps one singular value, as torch's
    np.testing.assert_allclose(ember.linalg.pinv(ember.tensor(singular)).numpy(),
                               torch.linalg.pinv(torch.tensor(singular)).numpy(), atol=1e-14)
    assert int(ember.linalg.matrix_rank(ember.tensor(singular))) == 1


def test_vmap_over_complex_factorizations_equals_a_loop() -> None:
    rng = np.random.default_rng(9)
    a = ember.tensor(_cx(rng, (3, 4, 3), np.complex128))

    def f(x):
        q, r = ember.linalg.qr(x)
        return (q @ ember.linalg.pinv(r)).abs().sum() + ember.linalg.matrix_exp(x.narrow(-2, 0, 3) * 0.1).real.sum()

    batched = ef.vmap(ef.grad(f))(a)
    for i in range(3):
        np.testing.assert_allclose(batched[i].numpy(), ef.grad(f)(a[i]).numpy(), atol=1e-12)


@pytest.mark.parametrize("fn", [lambda x: ember.linalg.qr(x), ember.linalg.pinv, ember.linalg.matrix_exp,
                                lambda x: ember.linalg.lu(x)])
def test_low_precision_still_refused(fn) -> None:
    with pytest.raises(RuntimeError):
        fn(ember.ones(2, 2, dtype=ember.float16))


@pytest.mark.parametrize("dtype,tol", _DTYPES)
def test_geqrf_householder_product_and_ormqr(dtype, tol) -> None:
    rng = np.random.default_rng(10)
    a = _cx(rng, (2, 5, 3), dtype)
    mine, theirs = ember.geqrf(ember.tensor(a)), torch.geqrf(torch.tensor(a))
    for x, y in zip(mine, theirs):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=0, atol=tol * 10)
    np.testing.assert_allclose(ember.linalg.householder_product(*mine).numpy(),
                               torch.linalg.householder_product(*theirs).numpy(), rtol=0, atol=tol * 10)
    for left in (True, False):
        for transpose in (False, True):  # transpose means Q^H for complex Q, as torch.ormqr
            c = _cx(rng, (2, 5, 2) if left else (2, 2, 5), dtype)
            np.testing.assert_allclose(ember.ormqr(*mine, ember.tensor(c), left, transpose).numpy(),
                                       torch.ormqr(*theirs, torch.tensor(c), left, transpose).numpy(), rtol=0,
                                       atol=tol * 20)
    _compare(lambda x, t: ember.linalg.householder_product(x, t), lambda x, t: torch.linalg.householder_product(x, t),
             [theirs[0].numpy(), theirs[1].numpy()], tol * 10)


def test_ex_variants_and_cond_take_complex_matrices() -> None:
    rng = np.random.default_rng(11)
    m = _cx(rng, (2, 3, 3), np.complex128)
    m[1] = 0
    m[1, 0, 0] = 1  # singular: info 2
    b = _cx(rng, (2, 3, 2), np.complex128)
    for mine, theirs in [(ember.linalg.inv_ex(ember.tensor(m)), torch.linalg.inv_ex(torch.tensor(m))),
                         (ember.linalg.solve_ex(ember.tensor(m), ember.tensor(b)),
                          torch.linalg.solve_ex(torch.tensor(m), torch.tensor(b)))]:
        assert mine.info.tolist() == theirs.info.tolist() == [0, 2]
        np.testing.assert_allclose(mine[0].numpy(), theirs[0].numpy(), atol=1e-13)  # NaN + NaN j where it failed
    h = m @ np.conj(np.swapaxes(m, -1, -2)) + np.eye(3) * np.array([1, 0])[:, None, None]
    mine, theirs = ember.linalg.cholesky_ex(ember.tensor(h)), torch.linalg.cholesky_ex(torch.tensor(h))
    assert mine.info.tolist() == theirs.info.tolist() == [0, 2]
    np.testing.assert_allclose(mine.L.numpy()[0], theirs.L.numpy()[0], atol=1e-13)
    full = _cx(rng, (2, 3, 3), np.complex128)
    for p in (None, 2, -2, "fro", "nuc", 1, -1, np.inf, -np.inf):
        got, expected = ember.linalg.cond(ember.tensor(full), p), torch.linalg.cond(torch.tensor(full), p)
        assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1]
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-12)
