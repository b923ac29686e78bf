"""MultivariateNormal against torch (float64): the three parameterizations, log_prob, entropy,
moments, KL, gradients to every parameter, sample moments, shapes and errors; and the Cholesky /
triangular-solve helpers it rests on."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions._linalg import cholesky, solve_triangular

torch = pytest.importorskip("torch")
TD = torch.distributions
RNG = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def _seed_torch():
    """torch's samples are the test values: seed them so a test never depends on the tests before it."""
    torch.manual_seed(0)


def _spd(*batch: int, n: int = 3) -> np.ndarray:
    m = RNG.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + 0.5 * np.eye(n)


def _pair(a):
    return (ember.tensor(a, dtype=ember.float64, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def _close(ours, theirs, rtol=1e-9):
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-11)


@pytest.mark.parametrize("kind", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_mvn_values_and_grads(kind):
    matrix = _spd(2)
    if kind == "scale_tril":
        matrix = np.linalg.cholesky(matrix)
    loc_o, loc_t = _pair(RNG.normal(size=(4, 1, 3)))  # broadcasts against the (2,) matrix batch
    mat_o, mat_t = _pair(matrix)
    ours = ED.MultivariateNormal(loc_o, **{kind: mat_o})
    theirs = TD.MultivariateNormal(loc_t, **{kind: mat_t})
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape) == (4, 2)
    assert tuple(ours.event_shape) == (3,)
    for attr in ("mean", "variance", "stddev", "covariance_matrix", "precision_matrix", "scale_tril"):
        _close(getattr(ours, attr), getattr(theirs, attr))
    values = theirs.sample((5,)).detach()
    lp_o, lp_t = ours.log_prob(ember.tensor(values.numpy())), theirs.log_prob(values)
    _close(lp_o, lp_t)
    _close(ours.entropy(), theirs.entropy())
    (lp_o.sum() + ours.entropy().sum()).backward()
    (lp_t.sum() + theirs.entropy().sum()).backward()
    np.testing.assert_allclose(loc_o.grad.numpy(), loc_t.grad.numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(mat_o.grad.numpy(), mat_t.grad.numpy(), rtol=1e-7, atol=1e-9)
    assert tuple(ours.sample((2, 3)).shape) == tuple(theirs.sample((2, 3)).shape)
    expanded_o, expanded_t = ours.expand((5, 4, 2)), theirs.expand((5, 4, 2))
    v = expanded_t.sample().detach()
    _close(expanded_o.log_prob(ember.tensor(v.numpy())), expanded_t.log_prob(v))


def test_mvn_rsample_grad_and_moments():
    loc_o, loc_t = _pair(RNG.normal(size=3))
    tril = np.linalg.cholesky(_spd())
    tril_o, tril_t = _pair(tril)
    ember.manual_seed(0)
    x = ED.MultivariateNormal(loc_o, scale_tril=tril_o).rsample((40,))
    (x.pow(2).sum(-1) * ember.arange(40, dtype=ember.float64)).sum().backward()
    eps = np.linalg.solve(tril, (x.detach().numpy() - loc_o.detach().numpy())[..., None])[..., 0]
    y = loc_t + (tril_t @ torch.tensor(eps).unsqueeze(-1)).squeeze(-1)
    (y.pow(2).sum(-1) * torch.arange(40, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(loc_o.grad.numpy(), loc_t.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(tril_o.grad.numpy(), tril_t.grad.numpy(), rtol=1e-9, atol=1e-10)
    cov = _spd()
    samples = ED.MultivariateNormal(ember.tensor([1.0, -1.0, 0.0], dtype=ember.float64),
                                    covariance_matrix=ember.tensor(cov)).sample((40000,)).numpy()
    np.testing.assert_allclose(samples.mean(0), [1.0, -1.0, 0.0], atol=5 * np.sqrt(np.diag(cov).max() / 40000))
    np.testing.assert_allclose(np.cov(samples.T), cov, rtol=0.1, atol=0.05 * np.abs(cov).max())


def test_mvn_kl_and_grad():
    p_loc, q_loc = _pair(RNG.normal(size=(2, 3))), _pair(RNG.normal(size=(2, 3)))
    p_cov, q_cov = _pair(_spd(2)), _pair(_spd(2))
    ours = ED.kl_divergence(ED.MultivariateNormal(p_loc[0], p_cov[0]), ED.MultivariateNormal(q_loc[0], q_cov[0]))
    theirs = TD.kl_divergence(TD.MultivariateNormal(p_loc[1], p_cov[1]), TD.MultivariateNormal(q_loc[1], q_cov[1]))
    _close(ours, theirs)
    ours.sum().backward()
    theirs.sum().backward()
    for o, t in (p_loc, q_loc, p_cov, q_cov):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_mvn_errors_as_torch():
    E, T = ember.tensor, torch.tensor
    for make in (lambda D, t: D.MultivariateNormal(t([0.0, 0.0])),
                 lambda D, t: D.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 0.0], [0.0, 1.0]]),
                                                   scale_tril=t([[1.0, 0.0], [0.0, 1.0]])),
                 lambda D, t: D.MultivariateNormal(t(0.0), t([[1.0]])),
                 lambda D, t: D.MultivariateNormal(t([0.0, 0.0]), t([[1.0, 2.0], [2.0, 1.0]])),
                 lambda D, t: D.MultivariateNormal(t([0.0, 0.0]), scale_tril=t([[1.0, 1.0], [0.0, 1.0]]))):
        with pytest.raises(ValueError) as theirs:
            make(TD, T)
        with pytest.raises(ValueError) as ours:
            make(ED, E)
        assert str(theirs.value).split(" (")[0].split(" of ")[0] == str(ours.value).split(" (")[0].split(" of ")[0]


def test_cholesky_not_positive_definite_message():
    with pytest.raises(RuntimeError, match="cholesky: .*not positive-definite"):
        cholesky(ember.tensor([[1.0, 2.0], [2.0, 1.0]]))


def test_solve_triangular_grads_vs_torch():
    a = np.tril(RNG.normal(size=(2, 4, 4))) + 3 * np.eye(4)
    b = RNG.normal(size=(4, 2))
    for upper in (False, True):
        mat = np.swapaxes(a, -1, -2) if upper else a
        a_o, a_t = _pair(mat)
        b_o, b_t = _pair(b)
        weight = RNG.normal(size=(2, 4, 2))
        (solve_triangular(a_o, b_o, upper=upper) * ember.tensor(weight)).sum().backward()
        (torch.linalg.solve_triangular(a_t, b_t, upper=upper) * torch.tensor(weight)).sum().backward()
        np.testing.assert_allclose(a_o.grad.numpy(), a_t.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(b_o.grad.numpy(), b_t.grad.numpy(), rtol=1e-10, atol=1e-12)
