"""Complex ldl_factor/ldl_solve (LAPACK's sytrf/sytrs, and hetrf/hetrs with hermitian=True) against torch 2.13:
the same pivots and factors (LAPACK's |re| + |im| pivoting), solutions, 2x2 pivots, batches, singular inputs."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _matrices(rng, n, hermitian, small_diagonal, dtype):
    a = rng.standard_normal((2, n, n)) + 1j * rng.standard_normal((2, n, n))
    if small_diagonal:  # makes Bunch-Kaufman take 2x2 pivots
        a[:, range(n), range(n)] *= 0.01
    a = a + (np.conj(np.swapaxes(a, -1, -2)) if hermitian else np.swapaxes(a, -1, -2))
    return a.astype(dtype)


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("n", [1, 2, 5, 9])
@pytest.mark.parametrize("small_diagonal", [False, True])
@pytest.mark.parametrize("dtype", ["complex128", "complex64"])
def test_complex_ldl_equals_torch(hermitian, n, small_diagonal, dtype):
    rng = np.random.default_rng(n + 10 * small_diagonal)
    a = _matrices(rng, n, hermitian, small_diagonal, dtype)
    b = (rng.standard_normal((2, n, 3)) + 1j * rng.standard_normal((2, n, 3))).astype(dtype)
    ld_t, piv_t = torch.linalg.ldl_factor(torch.tensor(a), hermitian=hermitian)
    ld_e, piv_e = ember.linalg.ldl_factor(ember.tensor(a), hermitian=hermitian)
    np.testing.assert_array_equal(piv_e.numpy(), piv_t.numpy())
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == "complex128" else dict(rtol=2e-3, atol=2e-4)
    np.testing.assert_allclose(ld_e.numpy(), ld_t.numpy(), **tol)
    x_t = torch.linalg.ldl_solve(ld_t, piv_t, torch.tensor(b), hermitian=hermitian)
    x_e = ember.linalg.ldl_solve(ld_e, piv_e, ember.tensor(b), hermitian=hermitian)
    assert x_e.dtype == ember.tensor(b).dtype
    np.testing.assert_allclose(x_e.numpy(), x_t.numpy(), **tol)
    if dtype == "complex128":  # and it solves the system (an independent check)
        np.testing.assert_allclose(a @ x_e.numpy(), b, rtol=1e-9, atol=1e-10)


def test_complex_ldl_upper_triangle_ignored_and_singular_info():
    rng = np.random.default_rng(3)
    a = _matrices(rng, 4, True, False, "complex128")[0]
    noisy = a.copy()
    noisy[np.triu_indices(4, 1)] = 99 + 7j  # only the lower triangle is read, as LAPACK
    noisy[range(4), range(4)] += 5j  # a Hermitian factorization reads the diagonal's real part
    for herm in (True, False):
        want = torch.linalg.ldl_factor_ex(torch.tensor(noisy), hermitian=herm)
        got = ember.linalg.ldl_factor_ex(ember.tensor(noisy), hermitian=herm)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-10, atol=1e-12)
    singular = np.zeros((3, 3), complex)
    singular[0, 0] = 1 + 1j
    want = torch.linalg.ldl_factor_ex(torch.tensor(singular))
    got = ember.linalg.ldl_factor_ex(ember.tensor(singular))
    assert int(got.info) == int(want.info) == 2
    np.testing.assert_array_equal(got.pivots.numpy(), want.pivots.numpy())
    with pytest.raises(RuntimeError):  # torch 2.13 raises an internal assert here, not LinAlgError
        torch.linalg.ldl_factor(torch.tensor(singular))
    with pytest.raises(ember.linalg.LinAlgError, match="singular"):
        ember.linalg.ldl_factor(ember.tensor(singular))
