"""Sampling of the families added for full coverage, checked statistically with fixed seeds: moments
within 5 standard errors, Kolmogorov-Smirnov against SciPy's / torch's / closed-form CDFs (p > 1e-4),
and laws that follow from the construction (LKJ's marginal correlations are Beta, a Wishart diagonal
entry over Sigma_ii is chi-squared, LogisticNormal maps back to its Normal)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.distributions as ED

N = 20000


def _moments_ok(samples: np.ndarray, mean: np.ndarray, var: np.ndarray) -> None:
    n = samples.shape[0]
    assert np.all(np.abs(samples.mean(0) - mean) <= 5 * np.sqrt(var / n) + 1e-12), (samples.mean(0), mean)
    assert np.all(np.abs(samples.var(0) - var) <= 0.1 * var + 1e-12), (samples.var(0), var)


def _f64(*values):
    return [ember.tensor(v, dtype=ember.float64) for v in values]


CASES = [
    lambda: ED.ContinuousBernoulli(probs=_f64([0.1, 0.4999, 0.5, 0.8])[0]),
    lambda: ED.Kumaraswamy(*_f64([0.7, 2.0, 5.0], [1.5, 3.0, 0.8])),
    lambda: ED.FisherSnedecor(*_f64([3.0, 10.0], [12.0, 30.0])),
    lambda: ED.GeneralizedPareto(*_f64([0.0, 1.0, -1.0], [1.0, 0.5, 2.0], [-0.3, 0.0, 0.2])),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_moments_and_support(index):
    ember.manual_seed(100 + index)
    dist = CASES[index]()
    samples = dist.sample((N,)).numpy()
    assert samples.shape == (N,) + tuple(dist.batch_shape)
    _moments_ok(samples, dist.mean.numpy(), dist.variance.numpy())
    assert bool(dist.support.check(ember.tensor(samples)).all())


def test_ks_against_exact_cdfs():
    stats = pytest.importorskip("scipy.stats")
    torch = pytest.importorskip("torch")
    ember.manual_seed(21)
    a, b = 2.5, 1.7
    cases = [
        (ED.FisherSnedecor(*_f64(4.0, 9.0)), stats.f(4.0, 9.0).cdf),
        (ED.GeneralizedPareto(*_f64(0.5, 2.0, 0.3)), stats.genpareto(0.3, loc=0.5, scale=2.0).cdf),
        (ED.GeneralizedPareto(*_f64(0.0, 1.0, -0.4)), stats.genpareto(-0.4, loc=0.0, scale=1.0).cdf),
        (ED.VonMises(*_f64(1.0, 2.5)), stats.vonmises(2.5, loc=1.0).cdf),
        (ED.VonMises(*_f64(-2.0, 0.05)), stats.vonmises(0.05, loc=-2.0).cdf),
        (ED.Kumaraswamy(*_f64(a, b)), lambda x: 1 - (1 - x ** a) ** b),
        (ED.ContinuousBernoulli(probs=_f64(0.2)[0]),
         lambda x: TDcdf(torch, torch.distributions.ContinuousBernoulli(probs=torch.tensor(0.2, dtype=torch.float64)), x)),
    ]
    for dist, cdf in cases:
        samples = dist.sample((4000,)).numpy()
        if isinstance(dist, ED.VonMises):  # angles in [-pi, pi): SciPy's CDF counts from loc - pi
            loc = dist.loc.item()
            samples = (samples - loc + math.pi) % (2 * math.pi) - math.pi + loc
        assert stats.kstest(samples, cdf).pvalue > 1e-4, dist
        if dist.has_rsample:
            assert stats.kstest(dist.rsample((4000,)).detach().numpy(), cdf).pvalue > 1e-4, dist


def TDcdf(torch, dist, x):
    return dist.cdf(torch.tensor(np.clip(x, 0, 1), dtype=torch.float64)).numpy()


def test_von_mises_circular_moments_and_range():
    ember.manual_seed(5)
    loc, kappa = np.array([3.0, -1.0, 0.2]), np.array([0.3, 4.0, 50.0])
    d = ED.VonMises(*_f64(loc, kappa))
    x = d.sample((N,)).numpy()
    assert x.min() >= -math.pi and x.max() < math.pi
    # E[cos(X - loc)] = I1(k)/I0(k) = 1 - circular variance
    mean_cos = np.cos(x - loc).mean(0)
    np.testing.assert_allclose(mean_cos, 1 - d.variance.numpy(), atol=5 / math.sqrt(N))
    np.testing.assert_allclose(np.sin(x - loc).mean(0), 0.0, atol=5 / math.sqrt(N))


def test_logistic_normal_maps_back_to_its_normal():
    stats = pytest.importorskip("scipy.stats")
    ember.manual_seed(9)
    loc, scale = np.array([0.5, -1.0, 2.0]), np.array([1.0, 0.3, 2.0])
    d = ED.LogisticNormal(*_f64(loc, scale))
    x = d.sample((4000,))
    assert tuple(x.shape) == (4000, 4)
    np.testing.assert_allclose(x.sum(-1).numpy(), 1.0, atol=1e-12)
    z = ED.transforms.StickBreakingTransform().inv(x).numpy()
    for i in range(3):
        assert stats.kstest(z[:, i], stats.norm(loc[i], scale[i]).cdf).pvalue > 1e-4


def test_lowrank_mvn_sample_covariance():
    ember.manual_seed(4)
    d = ED.LowRankMultivariateNormal(*_f64([1.0, -2.0, 0.5], [[1.0, 0.0], [0.5, 1.0], [-1.0, 0.3]], [0.5, 0.2, 1.0]))
    x = d.sample((N,)).numpy()
    cov = d.covariance_matrix.numpy()
    np.testing.assert_allclose(x.mean(0), d.mean.numpy(), atol=5 * np.sqrt(np.diag(cov) / N).max())
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.08)


@pytest.mark.parametrize("eta", [0.5, 1.0, 3.0])
def test_lkj_marginal_correlations_are_beta(eta):
    """For LKJ(d, eta), each off-diagonal correlation r has (r + 1)/2 ~ Beta(eta - 1 + d/2, eta - 1 + d/2)."""
    stats = pytest.importorskip("scipy.stats")
    ember.manual_seed(int(eta * 10))
    dim = 4
    chol = ED.LKJCholesky(dim, _f64(eta)[0]).sample((4000,)).numpy()
    corr = chol @ np.swapaxes(chol, -1, -2)
    np.testing.assert_allclose(np.diagonal(corr, axis1=-2, axis2=-1), 1.0, atol=1e-12)
    shape = eta - 1 + dim / 2
    for i, j in [(i, j) for i in range(dim) for j in range(i)]:  # every entry (torch 2.13 fails from row 2 on)
        assert stats.kstest((corr[:, i, j] + 1) / 2, stats.beta(shape, shape).cdf).pvalue > 1e-4, (i, j)


def test_wishart_mean_and_chi2_diagonal():
    stats = pytest.importorskip("scipy.stats")
    ember.manual_seed(12)
    cov = np.array([[2.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.5]])
    df = 5.5
    d = ED.Wishart(*_f64(df), covariance_matrix=_f64(cov)[0])
    w = d.sample((N,)).numpy()
    np.testing.assert_allclose(w.mean(0), d.mean.numpy(), atol=5 * np.sqrt(d.variance.numpy() / N).max())
    np.testing.assert_allclose(w.var(0), d.variance.numpy(), rtol=0.1)
    for i in range(3):
        assert stats.kstest(w[:4000, i, i] / cov[i, i], stats.chi2(df).cdf).pvalue > 1e-4
    assert bool(d.support.check(ember.tensor(w[:100])).all())


def test_seed_reproducible():
    for make in CASES + [lambda: ED.VonMises(*_f64(0.0, 1.0)), lambda: ED.LKJCholesky(3, 1.0),
                         lambda: ED.Wishart(4.0, covariance_matrix=ember.eye(2, dtype=ember.float64))]:
        ember.manual_seed(3)
        first = make().sample((5,)).numpy()
        ember.manual_seed(3)
        np.testing.assert_array_equal(first, make().sample((5,)).numpy())
