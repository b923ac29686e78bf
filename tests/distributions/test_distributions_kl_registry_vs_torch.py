"""Every (p, q) pair of torch.distributions.kl._KL_REGISTRY is registered in ember, and kl_divergence
agrees with torch's value for it (float64, a batch of 4 mixing finite and infinite cases); the pairs
where ember deliberately differs are checked against numerical integration instead."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.distributions as ED
import ember.distributions.kl as EKL

torch = pytest.importorskip("torch")
TD = torch.distributions
from torch.distributions import kl as TKL  # noqa: E402

RNG = np.random.default_rng(5)
B = 4


@pytest.fixture(autouse=True)
def _float64():
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    yield
    ember.set_default_dtype(ember.float32)
    torch.set_default_dtype(torch.float32)


def _u(low, high, *shape):
    return RNG.uniform(low, high, (B,) + shape)


def _probs(k):
    p = RNG.uniform(0.1, 1.0, (B, k))
    return p / p.sum(-1, keepdims=True)


def _tril(n):
    a = np.tril(RNG.normal(size=(B, n, n)) * 0.4, -1)
    return a + np.einsum("bi,ij->bij", RNG.uniform(0.5, 1.5, (B, n)), np.eye(n))


def _spd(n):
    low = _tril(n)
    return low @ np.swapaxes(low, -1, -2)


# class name -> role -> (builder(D, *params), params as numpy arrays)
def _params(name: str, role: str):
    if name in ("Normal", "Laplace", "Gumbel", "Cauchy"):
        return lambda D, a, b: getattr(D, name)(a, b), [RNG.normal(size=B), _u(0.5, 2)]
    if name == "Uniform":
        if role == "p":  # some inside [0, 1], some not; none touching 0 exactly (see the deviation tests)
            return lambda D, a, b: D.Uniform(a, b), [np.array([0.1, -0.2, 0.3, 0.05]), np.array([0.6, 0.9, 1.2, 0.8])]
        return lambda D, a, b: D.Uniform(a, b), [np.array([-0.1, -0.5, 0.2, -1.0]), np.array([1.1, 2.0, 1.5, 0.9])]
    if name == "Exponential":
        return lambda D, r: D.Exponential(r), [_u(0.5, 2)]
    if name == "Gamma":
        return lambda D, c, r: D.Gamma(c, r), [_u(0.5, 3), _u(0.5, 2)]
    if name == "Beta":
        return lambda D, a, b: D.Beta(a, b), [_u(0.5, 3), _u(0.5, 3)]
    if name == "ContinuousBernoulli":
        return lambda D, p: D.ContinuousBernoulli(probs=p), [np.array([0.2, 0.5, 0.7, 0.4999])]
    if name == "Pareto":
        return lambda D, s, a: D.Pareto(s, a), [_u(0.5, 2), np.array([0.8, 1.5, 2.5, 4.0])]
    if name == "Poisson":
        return lambda D, r: D.Poisson(r), [_u(0.5, 3)]
    if name in ("Bernoulli", "Geometric"):
        return lambda D, p: getattr(D, name)(probs=p), [_u(0.1, 0.9)]
    if name == "Binomial":
        counts = np.array([5.0, 6.0, 5.0, 7.0]) if role == "p" else np.full(B, 5.0)
        return lambda D, n, p: D.Binomial(n, probs=p), [counts, _u(0.1, 0.9)]
    if name in ("Categorical", "OneHotCategorical"):
        return lambda D, p: getattr(D, name)(probs=p), [_probs(3)]
    if name == "Dirichlet":
        return lambda D, c: D.Dirichlet(c), [_u(0.5, 3, 3)]
    if name == "HalfNormal":
        return lambda D, s: D.HalfNormal(s), [_u(0.5, 2)]
    if name == "Independent":
        return lambda D, a, b: D.Independent(D.Normal(a, b), 1), [RNG.normal(size=(B, 2)), _u(0.5, 2, 2)]
    if name == "TransformedDistribution":
        return (lambda D, a, b: D.TransformedDistribution(D.Normal(a, b), [D.transforms.ExpTransform()]),
                [RNG.normal(size=B), _u(0.5, 2)])
    if name == "MultivariateNormal":
        return lambda D, m, l: D.MultivariateNormal(m, scale_tril=l), [RNG.normal(size=(B, 3)), _tril(3)]
    if name == "LowRankMultivariateNormal":
        return (lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d),
                [RNG.normal(size=(B, 3)), RNG.normal(size=(B, 3, 2)), _u(0.5, 2, 3)])
    if name == "ExponentialFamily":  # abstract: exercised through Wishart, an ExponentialFamily without its own pair
        return lambda D, df, c: D.Wishart(df, covariance_matrix=c), [_u(3.5, 8), _spd(3)]
    raise KeyError(name)


def _registered(registry):
    return sorted((p.__name__, q.__name__) for p, q in registry)


def test_every_torch_pair_is_registered():
    assert _registered(EKL._KL_REGISTRY) == _registered(TKL._KL_REGISTRY)


PAIRS = _registered(TKL._KL_REGISTRY)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_kl_matches_torch(pair):
    build_p, params_p = _params(pair[0], "p")
    build_q, params_q = _params(pair[1], "q")
    ours = ED.kl_divergence(build_p(ED, *[ember.tensor(v) for v in params_p]),
                            build_q(ED, *[ember.tensor(v) for v in params_q]))
    if pair[0] == "ExponentialFamily":
        # torch 2.13's Bregman KL sums its scalar natural-parameter term over the batch (_sum_rightmost by
        # the event rank): it is right only for one distribution at a time, so compare element by element
        theirs = torch.stack([TD.kl_divergence(build_p(TD, *[torch.tensor(v[i]) for v in params_p]),
                                               build_q(TD, *[torch.tensor(v[i]) for v in params_q]))
                              for i in range(B)])
    else:
        theirs = TD.kl_divergence(build_p(TD, *[torch.tensor(v) for v in params_p]),
                                  build_q(TD, *[torch.tensor(v) for v in params_q]))
    ours, theirs = ours.detach().numpy(), theirs.detach().numpy()
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=1e-8, atol=1e-10)


def test_kl_is_differentiable_and_nonnegative_across_families():
    loc = ember.tensor([0.2, 1.0], requires_grad=True)
    scale = ember.tensor([1.0, 2.0], requires_grad=True)
    kl = ED.kl_divergence(ED.Gamma(ember.tensor([2.0, 3.0]), ember.tensor([1.0, 0.5])), ED.Normal(loc, scale))
    assert bool((kl >= 0).all())
    kl.sum().backward()
    tloc = torch.tensor([0.2, 1.0], requires_grad=True)
    tscale = torch.tensor([1.0, 2.0], requires_grad=True)
    TD.kl_divergence(TD.Gamma(torch.tensor([2.0, 3.0]), torch.tensor([1.0, 0.5])), TD.Normal(tloc, tscale)).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), tloc.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(scale.grad.numpy(), tscale.grad.numpy(), rtol=1e-10)


def _quad_kl(log_p, log_q, low, high, points=None):
    integrate = pytest.importorskip("scipy.integrate")
    value, _ = integrate.quad(lambda x: math.exp(log_p(x)) * (log_p(x) - log_q(x)), low, high, limit=200,
                              points=points)
    return value


def test_deviations_from_torch_against_quadrature():
    # ContinuousBernoulli || Uniform(0, 1): finite (torch: inf); = -H(p)
    cb = ED.ContinuousBernoulli(probs=ember.tensor(0.3))
    u01 = ED.Uniform(ember.tensor(0.0), ember.tensor(1.0))

    def log_cb(x):
        return cb.log_prob(ember.tensor(x)).item()

    assert abs(ED.kl_divergence(cb, u01).item() - _quad_kl(log_cb, lambda x: 0.0, 0, 1)) < 1e-8
    # Uniform(0, 1) || ContinuousBernoulli: finite (torch: inf)
    assert abs(ED.kl_divergence(u01, cb).item() - _quad_kl(lambda x: 0.0, log_cb, 0, 1)) < 1e-8
    # Uniform(0, 0.5) || Beta / Gamma: finite (torch: nan, from 0 * log 0)
    u = ED.Uniform(ember.tensor(0.0), ember.tensor(0.5))
    log_u = math.log(2.0)
    for q in (ED.Beta(ember.tensor(2.0), ember.tensor(3.0)), ED.Gamma(ember.tensor(2.5), ember.tensor(1.5))):
        expected = _quad_kl(lambda x: log_u, lambda x: q.log_prob(ember.tensor(x)).item(), 0, 0.5)
        assert abs(ED.kl_divergence(u, q).item() - expected) < 1e-7


@pytest.mark.parametrize("pair", [("Gamma", "Gumbel"), ("Normal", "Gumbel"), ("Beta", "Normal"), ("Pareto", "Gamma"),
                                  ("Uniform", "Gumbel"), ("Laplace", "Normal"), ("Exponential", "Gumbel"),
                                  ("ContinuousBernoulli", "Normal")])
def test_cross_family_kl_against_quadrature(pair):
    """An independent reference: KL = integral of p log(p/q), with SciPy's quadrature."""
    pytest.importorskip("scipy.integrate")
    build_p, params_p = _params(pair[0], "p")
    build_q, params_q = _params(pair[1], "q")
    i = 2 if pair[0] == "Pareto" else 0  # Pareto's first alpha (0.8) has no finite mean: KL is inf there
    p = build_p(ED, *[ember.tensor(v[i:i + 1]) for v in params_p])
    q = build_q(ED, *[ember.tensor(v[i:i + 1]) for v in params_q])
    if pair[0] in ("Normal", "Laplace"):  # far enough that the rest is negligible (and q's tails do not overflow)
        center, width = float(p.loc.item()), (12 if pair[0] == "Normal" else 60) * float(p.scale.item())
        support = (center - width, center + width)
    elif pair[0] in ("Beta", "ContinuousBernoulli"):
        support = (0.0, 1.0)
    elif pair[0] == "Uniform":
        support = (p.low, p.high)
    elif pair[0] == "Pareto":
        support = (p.scale, np.inf)
    else:
        support = (0.0, np.inf)
    low, high = (float(v.item()) if hasattr(v, "item") else v for v in support)

    def lp(x):
        return p.log_prob(ember.tensor([x])).item()

    def lq(x):
        return q.log_prob(ember.tensor([x])).item()

    kl = ED.kl_divergence(p, q).item()
    assert math.isfinite(kl)
    kink = [float(p.loc.item())] if pair[0] == "Laplace" else None  # Laplace's density has a corner at loc
    assert abs(kl - _quad_kl(lp, lq, low, high, points=kink)) < 1e-6 * max(1.0, abs(kl))
