"""Sampling of ember.distributions checked statistically: moments within bounds for many samples and a
Kolmogorov-Smirnov test against the exact CDF (SciPy's), plus reproducibility under ember.manual_seed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.distributions as ED

N = 20000


def _moments_ok(samples: np.ndarray, mean: np.ndarray, var: np.ndarray, axis: int = 0) -> None:
    """Sample mean within 5 standard errors; sample variance within 10% (plus 5 s.e. of the mean scale)."""
    n = samples.shape[axis]
    got_mean = samples.mean(axis)
    assert np.all(np.abs(got_mean - mean) <= 5 * np.sqrt(var / n) + 1e-12), (got_mean, mean)
    got_var = samples.var(axis)
    assert np.all(np.abs(got_var - var) <= 0.1 * var + 1e-12), (got_var, var)


CONTINUOUS = [
    (lambda: ED.Normal(ember.tensor([0.0, 3.0]), ember.tensor([1.0, 0.5])), None),
    (lambda: ED.Laplace(ember.tensor([1.0, -2.0]), ember.tensor([0.5, 2.0])), None),
    (lambda: ED.Uniform(ember.tensor([0.0, -1.0]), ember.tensor([1.0, 5.0])), None),
    (lambda: ED.Exponential(ember.tensor([0.5, 4.0])), None),
    (lambda: ED.LogNormal(ember.tensor([0.0, 0.5]), ember.tensor([0.25, 0.5])), None),
    (lambda: ED.Gamma(ember.tensor([0.3, 2.0, 9.0]), ember.tensor([1.0, 3.0, 0.5])), None),
    (lambda: ED.Beta(ember.tensor([0.5, 2.0, 5.0]), ember.tensor([0.5, 3.0, 1.0])), None),
    (lambda: ED.Poisson(ember.tensor([0.5, 4.0, 30.0])), None),
    (lambda: ED.Bernoulli(probs=ember.tensor([0.1, 0.5, 0.9])), None),
    (lambda: ED.Gumbel(ember.tensor([0.0, 2.0]), ember.tensor([1.0, 0.3])), None),
    (lambda: ED.HalfNormal(ember.tensor([0.5, 2.0])), None),
    (lambda: ED.StudentT(ember.tensor([6.0, 30.0]), ember.tensor([1.0, -1.0]), ember.tensor([2.0, 0.5])), None),
    (lambda: ED.Chi2(ember.tensor([1.0, 7.0])), None),
    (lambda: ED.Geometric(probs=ember.tensor([0.2, 0.7])), None),
    (lambda: ED.Binomial(ember.tensor([5.0, 40.0]), probs=ember.tensor([0.3, 0.9])), None),
    (lambda: ED.Multinomial(10, probs=ember.tensor([0.2, 0.3, 0.5])), None),
    (lambda: ED.Weibull(ember.tensor([1.0, 2.0]), ember.tensor([0.8, 3.0])), None),
    (lambda: ED.Pareto(ember.tensor([1.0, 0.5]), ember.tensor([6.0, 9.0])), None),
    (lambda: ED.InverseGamma(ember.tensor([8.0, 12.0]), ember.tensor([2.0, 1.0])), None),
    (lambda: ED.NegativeBinomial(ember.tensor([3.0, 10.5]), probs=ember.tensor([0.3, 0.6])), None),
    (lambda: ED.MixtureSameFamily(ED.Categorical(probs=ember.tensor([0.3, 0.7])),
                                  ED.Normal(ember.tensor([-2.0, 1.0]), ember.tensor([0.5, 1.0]))), None),
]


@pytest.mark.parametrize("index", range(len(CONTINUOUS)))
def test_moments(index):
    ember.manual_seed(index)
    dist = CONTINUOUS[index][0]()
    samples = dist.sample((N,)).double().numpy()
    assert samples.shape == (N,) + tuple(dist.batch_shape) + tuple(dist.event_shape)
    _moments_ok(samples, dist.mean.double().numpy(), dist.variance.double().numpy())
    assert bool(dist.support.check(ember.tensor(samples)).all())


def test_moments_vector_families():
    ember.manual_seed(1)
    conc = ember.tensor([[0.5, 1.0, 3.0], [4.0, 4.0, 4.0]], dtype=ember.float64)
    dirichlet = ED.Dirichlet(conc)
    samples = dirichlet.sample((N,)).numpy()
    assert samples.shape == (N, 2, 3)
    np.testing.assert_allclose(samples.sum(-1), 1.0, atol=1e-12)
    _moments_ok(samples, dirichlet.mean.numpy(), dirichlet.variance.numpy())
    probs = ember.tensor([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]], dtype=ember.float64)
    categorical = ED.Categorical(probs=probs)
    draws = categorical.sample((N,)).numpy()
    assert draws.shape == (N, 2) and draws.dtype == np.int64
    freq = np.stack([(draws == k).mean(0) for k in range(3)], -1)
    np.testing.assert_allclose(freq, probs.numpy(), atol=5 * math.sqrt(0.25 / N))
    onehot = ED.OneHotCategorical(probs=probs).sample((N,)).numpy()
    assert onehot.shape == (N, 2, 3) and np.all(onehot.sum(-1) == 1)
    np.testing.assert_allclose(onehot.mean(0), probs.numpy(), atol=5 * math.sqrt(0.25 / N))


def test_ks_against_exact_cdf():
    stats = pytest.importorskip("scipy.stats")
    ember.manual_seed(7)
    cases = [
        (ED.Normal(1.0, 2.0), stats.norm(1.0, 2.0).cdf),
        (ED.Laplace(-1.0, 0.5), stats.laplace(-1.0, 0.5).cdf),
        (ED.Exponential(3.0), stats.expon(scale=1 / 3.0).cdf),
        (ED.Uniform(-2.0, 5.0), stats.uniform(-2.0, 7.0).cdf),
        (ED.LogNormal(0.3, 0.7), stats.lognorm(0.7, scale=math.exp(0.3)).cdf),
        (ED.Gamma(0.4, 2.0), stats.gamma(0.4, scale=0.5).cdf),
        (ED.Gamma(5.0, 1.0), stats.gamma(5.0).cdf),
        (ED.Beta(0.7, 2.5), stats.beta(0.7, 2.5).cdf),
        (ED.Cauchy(1.0, 0.5), stats.cauchy(1.0, 0.5).cdf),
        (ED.Gumbel(1.0, 2.0), stats.gumbel_r(1.0, 2.0).cdf),
        (ED.HalfNormal(1.5), stats.halfnorm(scale=1.5).cdf),
        (ED.StudentT(3.0, 0.5, 2.0), stats.t(3.0, 0.5, 2.0).cdf),
        (ED.HalfCauchy(2.0), stats.halfcauchy(scale=2.0).cdf),
        (ED.Weibull(2.0, 1.5), stats.weibull_min(1.5, scale=2.0).cdf),
        (ED.Pareto(1.5, 2.5), stats.pareto(2.5, scale=1.5).cdf),
        (ED.InverseGamma(3.0, 2.0), stats.invgamma(3.0, scale=2.0).cdf),
        (ED.TransformedDistribution(ED.Normal(0.0, 1.0), [ED.SigmoidTransform()]),
         lambda x: stats.norm.cdf(np.log(x) - np.log1p(-x))),
    ]
    for dist, cdf in cases:
        samples = dist.sample((4000,)).double().numpy()
        result = stats.kstest(samples, cdf)
        assert result.pvalue > 1e-4, (dist, result)
        # rsample draws from the same distribution
        if dist.has_rsample:
            assert stats.kstest(dist.rsample((4000,)).double().numpy(), cdf).pvalue > 1e-4, dist


def test_seed_reproducible():
    for make in (lambda: ED.Normal(0.0, 1.0), lambda: ED.Gamma(2.0, 1.0), lambda: ED.Categorical(logits=ember.zeros(4))):
        ember.manual_seed(3)
        a = make().sample((5,)).numpy()
        ember.manual_seed(3)
        b = make().sample((5,)).numpy()
        np.testing.assert_array_equal(a, b)
