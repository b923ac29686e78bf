"""Pathwise (rsample) gradients of the added reparameterizable families: the same noise pushed through
ember's and torch's transforms gives the same gradients (Kumaraswamy, LogisticNormal); Wishart's gradient
to the covariance matches float64 finite differences at common random numbers; FisherSnedecor's averaged
pathwise gradient estimates the derivative of its closed-form mean."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(17)


def _pair(array):
    return (ember.tensor(array, dtype=ember.float64, requires_grad=True),
            torch.tensor(array, dtype=torch.float64, requires_grad=True))


def _push(transforms, x):
    for t in transforms:
        x = t(x)
    return x


def test_kumaraswamy_same_noise_same_gradients():
    a, b = RNG.uniform(0.5, 4, 5), RNG.uniform(0.5, 4, 5)
    u = RNG.uniform(0.01, 0.99, (3, 5))
    (ea, ta), (eb, tb) = _pair(a), _pair(b)
    ours = _push(ED.Kumaraswamy(ea, eb).transforms, ember.tensor(u))
    theirs = _push(TD.Kumaraswamy(ta, tb).transforms, torch.tensor(u))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    (ours.log() * 0.7 + ours).sum().backward()
    (theirs.log() * 0.7 + theirs).sum().backward()
    np.testing.assert_allclose(ea.grad.numpy(), ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-10)


def test_logistic_normal_same_noise_same_gradients():
    loc, scale = RNG.normal(size=(2, 3)), RNG.uniform(0.3, 2, (2, 3))
    eps = RNG.normal(size=(4, 2, 3))
    (el, tl), (es, ts) = _pair(loc), _pair(scale)
    ours = ED.LogisticNormal(el, es).transforms[0](el + es * ember.tensor(eps))
    theirs = TD.LogisticNormal(tl, ts).transforms[0](tl + ts * torch.tensor(eps))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    weights = RNG.normal(size=4)
    (ours * ember.tensor(weights[:, None, None] * np.arange(1, 5))).sum().backward()
    (theirs * torch.tensor(weights[:, None, None] * np.arange(1, 5))).sum().backward()
    np.testing.assert_allclose(el.grad.numpy(), tl.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(es.grad.numpy(), ts.grad.numpy(), rtol=1e-10)


def test_wishart_covariance_gradient_by_finite_differences():
    base = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 1.5]])
    direction = np.array([[0.5, 0.2, 0.0], [0.2, -0.3, 0.1], [0.0, 0.1, 0.4]])  # symmetric

    def loss(cov):
        ember.manual_seed(8)
        sample = ED.Wishart(ember.tensor(6.0, dtype=ember.float64), covariance_matrix=cov).rsample((5,))
        return (sample * ember.tensor(np.arange(9.0).reshape(3, 3) / 9)).sum()

    leaf = ember.tensor(base, requires_grad=True)
    loss(leaf).backward()
    analytic = float((leaf.grad.numpy() * direction).sum())
    h = 1e-6
    fd = (loss(ember.tensor(base + h * direction)).item() - loss(ember.tensor(base - h * direction)).item()) / (2 * h)
    assert abs(analytic - fd) < 1e-6 * max(1.0, abs(fd))


def test_fisher_snedecor_pathwise_gradient_estimates_the_mean_derivative():
    # E[X] = d2 / (d2 - 2): d/d d1 = 0, d/d d2 = -2 / (d2 - 2)^2. The standard error comes from 20
    # independent batches' gradient estimates.
    ember.manual_seed(2)
    grads = []
    for _ in range(20):
        d1 = ember.tensor(5.0, dtype=ember.float64, requires_grad=True)
        d2 = ember.tensor(12.0, dtype=ember.float64, requires_grad=True)
        ED.FisherSnedecor(d1, d2).rsample((2000,)).mean().backward()
        grads.append((d1.grad.item(), d2.grad.item()))
    grads = np.array(grads)
    mean, se = grads.mean(0), grads.std(0, ddof=1) / np.sqrt(len(grads))
    expected = np.array([0.0, -2 / (12.0 - 2) ** 2])
    assert np.all(np.abs(mean - expected) < 5 * se), (mean, se)
    assert se[1] < abs(expected[1]) / 4  # precise enough that a wrong (e.g. zero) gradient would fail
