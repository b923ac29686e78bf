"""ember.lobpcg on complex Hermitian problems (torch 2.13's refuses complex input): eigenpairs against SciPy's
generalized Hermitian eigensolver, and the gradient of the eigenvalues against central differences."""
from __future__ import annotations

import numpy as np
import pytest

import ember

sl = pytest.importorskip("scipy.linalg")


def _hermitian_pd(rng, n, dtype):
    m = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    return (m @ m.conj().T + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("dtype,tol", [(np.complex128, 1e-12), (np.complex64, 2e-5)])
@pytest.mark.parametrize("generalized", [False, True])
@pytest.mark.parametrize("largest", [True, False])
def test_complex_lobpcg_matches_scipy_eigh(dtype, tol, generalized, largest):
    rng = np.random.default_rng(3)
    A = _hermitian_pd(rng, 10, dtype)
    B = _hermitian_pd(rng, 10, dtype) if generalized else None
    e, v = ember.lobpcg(ember.tensor(A), k=3, B=None if B is None else ember.tensor(B), largest=largest)
    ref = sl.eigh(A.astype(np.complex128), None if B is None else B.astype(np.complex128), eigvals_only=True)
    ref = ref[::-1][:3] if largest else ref[:3]
    assert e.dtype is (ember.float64 if dtype == np.complex128 else ember.float32)
    np.testing.assert_allclose(e.numpy(), ref, rtol=tol)
    lhs = A @ v.numpy()
    rhs = (np.eye(10) if B is None else B) @ v.numpy() * e.numpy()
    np.testing.assert_allclose(lhs, rhs, atol=tol * np.abs(lhs).max())


def test_complex_lobpcg_eigenvalue_gradient_matches_central_differences():
    """d(sum of the top eigenvalues)/dM for A = M + M^H + 12 I, in PyTorch's convention dL/dRe + i dL/dIm."""
    rng = np.random.default_rng(5)
    m0 = rng.standard_normal((9, 9)) + 1j * rng.standard_normal((9, 9))

    def loss(m):
        a = m + m.conj().T + 12 * np.eye(9)
        return np.linalg.eigvalsh(a)[-2:].sum()

    M = ember.tensor(m0, requires_grad=True)
    e, _ = ember.lobpcg(M + M.mH + 12 * ember.eye(9, dtype=ember.complex128), k=2)
    e.sum().backward()
    h = 1e-6
    want = np.zeros_like(m0)
    for i in range(9):
        for j in range(9):
            for step, unit in ((1.0, 1.0), (1j, 1j)):
                d = np.zeros_like(m0)
                d[i, j] = h * step
                want[i, j] += unit * (loss(m0 + d) - loss(m0 - d)) / (2 * h)
    np.testing.assert_allclose(M.grad.numpy(), want, atol=1e-6)
