"""``torch.svd_lowrank`` / ``torch.pca_lowrank`` (``ember/surface/lowrank.py``) against torch 2.13. Both are
randomized, so the comparison is on what the algorithm guarantees for a matrix of rank <= q: the singular values
(equal to torch's and to the exact ones), the reconstruction ``U diag(S) V^H``, orthonormal columns and the shapes."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _low_rank(shape, rank, seed, dtype=np.float64):
    rng = np.random.default_rng(seed)
    *batch, m, n = shape
    return (rng.standard_normal((*batch, m, rank)) @ rng.standard_normal((*batch, rank, n))).astype(dtype)


CASES = [((40, 12), 3, 5), ((12, 40), 3, 5), ((3, 20, 9), 2, 4), ((30, 30), 6, 6), ((25, 10), 1, 1)]


@pytest.mark.parametrize("shape, rank, q", CASES, ids=str)
def test_svd_lowrank_vs_torch(shape, rank, q):
    A = _low_rank(shape, rank, 0)
    ember.manual_seed(0)
    U, S, V = ember.svd_lowrank(ember.tensor(A), q=q)
    tU, tS, tV = torch.svd_lowrank(torch.tensor(A), q=q)
    assert (tuple(U.shape), tuple(S.shape), tuple(V.shape)) == (tuple(tU.shape), tuple(tS.shape), tuple(tV.shape))
    np.testing.assert_allclose(S.numpy()[..., :rank], tS.numpy()[..., :rank], rtol=1e-8)
    np.testing.assert_allclose(S.numpy()[..., :rank], np.linalg.svd(A, compute_uv=False)[..., :rank], rtol=1e-8)
    recon = (U * S.unsqueeze(-2)) @ V.mT
    np.testing.assert_allclose(recon.numpy(), A, atol=1e-8 * np.abs(A).max())
    eye = np.broadcast_to(np.eye(q), U.shape[:-2] + (q, q))
    np.testing.assert_allclose((U.mT @ U).numpy(), eye, atol=1e-8)


def test_svd_lowrank_with_a_mean_matrix_vs_torch():
    A = _low_rank((30, 8), 2, 1) + 5.0
    M = np.full((1, 8), 5.0)
    U, S, V = ember.svd_lowrank(ember.tensor(A), q=4, M=ember.tensor(M))
    _, tS, _ = torch.svd_lowrank(torch.tensor(A), q=4, M=torch.tensor(M))
    np.testing.assert_allclose(S.numpy()[:2], tS.numpy()[:2], rtol=1e-8)
    np.testing.assert_allclose(((U * S) @ V.T).numpy(), A - M, atol=1e-8)


@pytest.mark.parametrize("center", [True, False])
def test_pca_lowrank_vs_torch(center):
    rng = np.random.default_rng(2)
    data = _low_rank((60, 7), 3, 3) + rng.standard_normal(7) * 3
    U, S, V = ember.pca_lowrank(ember.tensor(data), center=center)
    tU, tS, tV = torch.pca_lowrank(torch.tensor(data), center=center)
    assert tuple(S.shape) == tuple(tS.shape) == (6,)
    k = 3 if center else 4
    np.testing.assert_allclose(S.numpy()[:k], tS.numpy()[:k], rtol=1e-7)
    # principal directions agree up to sign
    np.testing.assert_allclose(np.abs((V.mT @ ember.tensor(tV.numpy())).numpy().diagonal()[:k]), 1.0, atol=1e-7)


def test_gradients_flow_through_the_factors():
    A = ember.tensor(_low_rank((12, 6), 2, 4), requires_grad=True)
    U, S, V = ember.svd_lowrank(A, q=3)
    S[:2].sum().backward()  # the nuclear norm's gradient of a rank-2 matrix: U[:, :2] V[:, :2]^T
    expected = (U[:, :2] @ V[:, :2].T).detach().numpy()
    np.testing.assert_allclose(A.grad.numpy(), expected, atol=1e-6)


def test_errors_like_torch():
    for lib in (ember, torch):
        with pytest.raises(ValueError, match=r"q\(=9\) must be non-negative integer and not greater than"):
            lib.pca_lowrank(lib.ones(5, 8, dtype=lib.float64), q=9)
        with pytest.raises(ValueError, match="niter"):
            lib.pca_lowrank(lib.ones(5, 8, dtype=lib.float64), niter=-1)
