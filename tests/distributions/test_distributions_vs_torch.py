"""ember.distributions against torch.distributions (float64): log_prob, entropy, moments, cdf/icdf,
shapes, expand, and KL divergences, at random parameters and at edge values."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seed_torch():
    """torch's samples are the test values: seed them so a test never depends on the tests before it."""
    torch.manual_seed(0)


def _pos(*shape: int, low: float = 0.2, high: float = 4.0) -> np.ndarray:
    return RNG.uniform(low, high, shape)


def _pair(array: np.ndarray, requires_grad: bool = False):
    return ember.tensor(array, dtype=ember.float64, requires_grad=requires_grad), \
        torch.tensor(array, dtype=torch.float64, requires_grad=requires_grad)


def _close(ours, theirs, rtol=1e-10, atol=1e-12):
    ours = ours.detach().numpy() if hasattr(ours, "detach") else np.asarray(ours)
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else np.asarray(theirs)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


def _probs(*shape: int) -> np.ndarray:
    p = RNG.uniform(0.05, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


# name -> (build(lib, params), params as arrays, value sampler (numpy) or None -> use torch samples)
CASES = {
    "Normal": (lambda D, a, b: D.Normal(a, b), [RNG.normal(size=(3, 4)), _pos(3, 4)]),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), [RNG.normal(size=(4,)), _pos(4)]),
    "Uniform": (lambda D, a, b: D.Uniform(a, a + b), [RNG.normal(size=(2, 3)), _pos(2, 3)]),
    "Exponential": (lambda D, r: D.Exponential(r), [_pos(5)]),
    "LogNormal": (lambda D, a, b: D.LogNormal(a, b), [RNG.normal(size=(3,)), _pos(3, low=0.3, high=1.5)]),
    "Gamma": (lambda D, c, r: D.Gamma(c, r), [_pos(2, 5, low=0.3, high=6), _pos(2, 5)]),
    "Beta": (lambda D, a, b: D.Beta(a, b), [_pos(6, low=0.3, high=5), _pos(6, low=0.3, high=5)]),
    "Dirichlet": (lambda D, c: D.Dirichlet(c), [_pos(3, 4, low=0.3, high=5)]),
    "Poisson": (lambda D, r: D.Poisson(r), [_pos(7, low=0.1, high=20)]),
    "Bernoulli_probs": (lambda D, p: D.Bernoulli(probs=p), [RNG.uniform(0.01, 0.99, (4, 2))]),
    "Bernoulli_logits": (lambda D, l: D.Bernoulli(logits=l), [RNG.normal(size=(5,)) * 3]),
    "Categorical_probs": (lambda D, p: D.Categorical(probs=p), [_probs(3, 5)]),
    "Categorical_logits": (lambda D, l: D.Categorical(logits=l), [RNG.normal(size=(2, 3, 4))]),
    "OneHotCategorical": (lambda D, p: D.OneHotCategorical(probs=p), [_probs(4, 3)]),
    "Independent_Normal": (lambda D, a, b: D.Independent(D.Normal(a, b), 1), [RNG.normal(size=(3, 4)), _pos(3, 4)]),
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), [RNG.normal(size=(3,)), _pos(3)]),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), [RNG.normal(size=(2, 2)), _pos(2, 2)]),
    "HalfNormal": (lambda D, s: D.HalfNormal(s), [_pos(4)]),
    "StudentT": (lambda D, df, a, b: D.StudentT(df, a, b), [_pos(5, low=0.5, high=8), RNG.normal(size=5), _pos(5)]),
    "Chi2": (lambda D, df: D.Chi2(df), [_pos(4, low=0.5, high=9)]),
    "Geometric_probs": (lambda D, p: D.Geometric(probs=p), [RNG.uniform(0.05, 0.95, (4,))]),
    "Geometric_logits": (lambda D, l: D.Geometric(logits=l), [RNG.normal(size=(3,))]),
    "Binomial_probs": (lambda D, n, p: D.Binomial(n, probs=p), [RNG.integers(0, 20, (2, 3)).astype(float),
                                                                 RNG.uniform(0.05, 0.95, (2, 3))]),
    "Binomial_logits": (lambda D, n, l: D.Binomial(n, logits=l), [np.full(4, 7.0), RNG.normal(size=4)]),
    "Multinomial": (lambda D, p: D.Multinomial(6, probs=p), [_probs(2, 4)]),
    "Mixture_Normal": (lambda D, p, a, b: D.MixtureSameFamily(D.Categorical(probs=p), D.Normal(a, b)),
                       [_probs(3, 4), RNG.normal(size=(3, 4)), _pos(3, 4)]),
    "Mixture_MVN_diag": (lambda D, p, a, b: D.MixtureSameFamily(D.Categorical(logits=p), D.Independent(D.Normal(a, b), 1)),
                         [RNG.normal(size=(2, 3)), RNG.normal(size=(2, 3, 2)), _pos(2, 3, 2)]),
    "RelaxedBernoulli": (lambda D, t, l: D.RelaxedBernoulli(t, logits=l), [np.array(0.7), RNG.normal(size=(3,))]),
    "RelaxedBernoulli_probs": (lambda D, t, p: D.RelaxedBernoulli(t, probs=p), [np.array(2.0),
                                                                                 RNG.uniform(0.05, 0.95, (2, 2))]),
    "RelaxedOneHotCategorical": (lambda D, t, p: D.RelaxedOneHotCategorical(t, probs=p), [np.array(0.6), _probs(2, 3)]),
    "ExpRelaxedCategorical": (lambda D, t, l: D.relaxed_categorical.ExpRelaxedCategorical(t, logits=l)
                              if D is TD else D.relaxed.ExpRelaxedCategorical(t, logits=l),
                              [np.array(1.3), RNG.normal(size=(4,))]),
    "HalfCauchy": (lambda D, s: D.HalfCauchy(s), [_pos(3)]),
    "Weibull": (lambda D, s, c: D.Weibull(s, c), [_pos(4), _pos(4, low=0.5, high=3)]),
    "Pareto": (lambda D, s, a: D.Pareto(s, a), [_pos(4), _pos(4, low=0.5, high=4)]),
    "InverseGamma": (lambda D, c, r: D.InverseGamma(c, r), [_pos(5, low=0.5, high=5), _pos(5)]),
    "NegativeBinomial_probs": (lambda D, n, p: D.NegativeBinomial(n, probs=p), [_pos(4, low=0.5, high=10),
                                                                               RNG.uniform(0.05, 0.9, 4)]),
    "NegativeBinomial_logits": (lambda D, n, l: D.NegativeBinomial(n, logits=l), [_pos(3), RNG.normal(size=3)]),
    "OneHotStraightThrough": (lambda D, p: D.OneHotCategoricalStraightThrough(probs=p), [_probs(2, 3)]),
    "Affine_Sigmoid": (lambda D, a, b: D.TransformedDistribution(
        D.Normal(a, b), [D.transforms.AffineTransform(0.5, 2.0), D.transforms.SigmoidTransform()]),
        [RNG.normal(size=(4,)), _pos(4, low=0.3, high=1.0)]),
}


def _build(name):
    build, params = CASES[name]
    ours = build(ED, *[_pair(p)[0] for p in params])
    theirs = build(TD, *[_pair(p)[1] for p in params])
    return ours, theirs


@pytest.mark.parametrize("name", sorted(CASES))
def test_shapes_moments_entropy_log_prob(name):
    ours, theirs = _build(name)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    for attr in ("mean", "variance", "stddev", "mode"):
        try:
            expected = getattr(theirs, attr)
        except NotImplementedError:
            continue
        _close(getattr(ours, attr), expected)
    try:
        expected_entropy = theirs.entropy()
    except NotImplementedError:
        expected_entropy = None
    if expected_entropy is not None:
        # torch's Multinomial.entropy takes lgamma(n + 1) of an integer tensor, in float32 (7e-8 off)
        _close(ours.entropy(), expected_entropy, atol=1e-6 if name == "Multinomial" else 1e-12)
    values = theirs.sample((6,))
    _close(ours.log_prob(ember.tensor(values.numpy())), theirs.log_prob(values))
    # sample shapes as torch: sample_shape + batch_shape + event_shape
    for sample_shape in ((), (2,), (2, 3)):
        assert tuple(ours.sample(sample_shape).shape) == tuple(theirs.sample(sample_shape).shape)
    # expand to a new leading batch dimension
    new_batch = (2,) + tuple(theirs.batch_shape)
    expanded_ours, expanded_theirs = ours.expand(new_batch), theirs.expand(new_batch)
    assert tuple(expanded_ours.batch_shape) == tuple(expanded_theirs.batch_shape)
    values = expanded_theirs.sample()
    _close(expanded_ours.log_prob(ember.tensor(values.numpy())), expanded_theirs.log_prob(values))


@pytest.mark.parametrize("name", ["Normal", "Laplace", "Uniform", "Exponential", "LogNormal", "Affine_Sigmoid",
                                  "Cauchy", "Gumbel", "HalfNormal", "Mixture_Normal", "HalfCauchy", "Weibull", "Pareto"])
def test_cdf_icdf(name):
    ours, theirs = _build(name)
    values = theirs.sample((5,))
    _close(ours.cdf(ember.tensor(values.numpy())), theirs.cdf(values))
    q = torch.tensor(RNG.uniform(0.01, 0.99, tuple(values.shape)), dtype=torch.float64)
    try:
        expected = theirs.icdf(q)
    except NotImplementedError:  # torch has no icdf for it (a mixture): neither has ember
        with pytest.raises(NotImplementedError):
            ours.icdf(ember.tensor(q.numpy()))
        return
    _close(ours.icdf(ember.tensor(q.numpy())), expected, rtol=1e-9)


@pytest.fixture
def float64_default():
    """Scalar parameters become float64 tensors in both libraries."""
    ember.set_default_dtype(ember.float64)
    torch.set_default_dtype(torch.float64)
    yield
    ember.set_default_dtype(ember.float32)
    torch.set_default_dtype(torch.float32)


def test_edge_values(float64_default):
    # log_prob at the edges of the support and outside it (validation off), as torch
    def both(builder, value):
        ours = builder(ED)(ember.tensor(value, dtype=ember.float64))
        theirs = builder(TD)(torch.tensor(value, dtype=torch.float64))
        _close(ours, theirs)

    x = [0.0, 1e-300, 1.0, 50.0]
    both(lambda D: D.Gamma(torch.tensor(1.0, dtype=torch.float64) if D is TD else ember.tensor(1.0, dtype=ember.float64),
                           2.0, validate_args=False).log_prob, x)
    both(lambda D: D.Exponential(3.0, validate_args=False).log_prob, x)
    both(lambda D: D.Beta(1.0, 1.0, validate_args=False).log_prob, [0.0, 0.5, 1.0])
    both(lambda D: D.Beta(2.5, 0.7, validate_args=False).log_prob, [0.0, 1e-12, 0.5, 1 - 1e-12])
    both(lambda D: D.Poisson(0.0, validate_args=False).log_prob, [0.0, 1.0])
    both(lambda D: D.Poisson(3.5, validate_args=False).log_prob, [0.0, 1.0, 100.0])
    both(lambda D: D.Normal(0.0, 1e-8, validate_args=False).log_prob, [0.0, 1e-8, 1.0])
    both(lambda D: D.Normal(0.0, 1.0, validate_args=False).cdf, [-40.0, -1.0, 0.0, 40.0, float("inf")])
    both(lambda D: D.Uniform(0.0, 1.0, validate_args=False).log_prob, [-0.5, 0.0, 0.5, 1.0])
    both(lambda D: D.Laplace(0.0, 2.0, validate_args=False).cdf, [-1e3, 0.0, 1e3])
    both(lambda D: D.Bernoulli(probs=(ember.tensor([0.0, 1.0, 0.5], dtype=ember.float64) if D is ED else
                                      torch.tensor([0.0, 1.0, 0.5], dtype=torch.float64))).log_prob, [1.0, 1.0, 0.0])
    # zero probabilities: Categorical entropy and KL stay finite / inf as torch
    p = np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])
    q = np.array([[0.5, 0.5, 0.0], [0.1, 0.1, 0.8]])
    ours = ED.Categorical(probs=ember.tensor(p)), ED.Categorical(probs=ember.tensor(q))
    theirs = TD.Categorical(probs=torch.tensor(p)), TD.Categorical(probs=torch.tensor(q))
    _close(ours[0].entropy(), theirs[0].entropy())
    _close(ED.kl_divergence(*ours), TD.kl_divergence(*theirs))
    # Dirichlet with tiny concentrations
    c = np.array([0.05, 0.1, 20.0])
    _close(ED.Dirichlet(ember.tensor(c)).entropy(), TD.Dirichlet(torch.tensor(c)).entropy(), rtol=1e-9)


KL_PAIRS = [
    ("Normal", "Normal"), ("Laplace", "Laplace"), ("Exponential", "Exponential"), ("Gamma", "Gamma"),
    ("Beta", "Beta"), ("Dirichlet", "Dirichlet"), ("Poisson", "Poisson"), ("Bernoulli_probs", "Bernoulli_probs"),
    ("Categorical_probs", "Categorical_probs"), ("OneHotCategorical", "OneHotCategorical"),
    ("Independent_Normal", "Independent_Normal"), ("LogNormal", "LogNormal"), ("Uniform", "Uniform"),
]


def _rebuild(name, scale=1.0):
    """The case with fresh parameters (same shapes)."""
    build, params = CASES[name]
    fresh = []
    for p in params:
        if name.startswith(("Categorical", "OneHot")):
            fresh.append(_probs(*p.shape))
        elif name.startswith("Bernoulli_probs"):
            fresh.append(RNG.uniform(0.01, 0.99, p.shape))
        elif p.min() > 0:
            fresh.append(p * RNG.uniform(0.5, 1.5, p.shape) * scale)
        else:
            fresh.append(p + RNG.normal(size=p.shape))
    return build(ED, *[_pair(p)[0] for p in fresh]), build(TD, *[_pair(p)[1] for p in fresh])


@pytest.mark.parametrize("pair", KL_PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_kl_same_family(pair):
    p_ours, p_theirs = _rebuild(pair[0])
    q_ours, q_theirs = _rebuild(pair[1])
    _close(ED.kl_divergence(p_ours, q_ours), TD.kl_divergence(p_theirs, q_theirs), rtol=1e-9)


def test_kl_across_families(float64_default):
    low, width, loc, scale = RNG.normal(size=3), _pos(3), RNG.normal(size=3), _pos(3)
    ours = ED.kl_divergence(ED.Uniform(*_pair(low)[:1], _pair(low + width)[0]), ED.Normal(_pair(loc)[0], _pair(scale)[0]))
    theirs = TD.kl_divergence(TD.Uniform(_pair(low)[1], _pair(low + width)[1]), TD.Normal(_pair(loc)[1], _pair(scale)[1]))
    _close(ours, theirs)
    rate, conc, rate2 = _pos(4), _pos(4), _pos(4)
    _close(ED.kl_divergence(ED.Exponential(_pair(rate)[0]), ED.Gamma(_pair(conc)[0], _pair(rate2)[0])),
           TD.kl_divergence(TD.Exponential(_pair(rate)[1]), TD.Gamma(_pair(conc)[1], _pair(rate2)[1])))
    _close(ED.kl_divergence(ED.Normal(_pair(loc)[0], _pair(scale)[0]), ED.Laplace(_pair(low)[0], _pair(width)[0])),
           TD.kl_divergence(TD.Normal(_pair(loc)[1], _pair(scale)[1]), TD.Laplace(_pair(low)[1], _pair(width)[1])))
    # a Uniform not covered by the other Uniform: inf, as torch
    _close(ED.kl_divergence(ED.Uniform(0.0, 2.0), ED.Uniform(0.5, 3.0)),
           TD.kl_divergence(TD.Uniform(0.0, 2.0), TD.Uniform(0.5, 3.0)))


def test_kl_registry_dispatch_and_missing_pair():
    class MyNormal(ED.Normal):
        pass

    # a subclass uses its base's KL until it registers its own
    p, q = MyNormal(0.0, 1.0), ED.Normal(1.0, 2.0)
    _close(ED.kl_divergence(p, q), TD.kl_divergence(TD.Normal(0.0, 1.0), TD.Normal(1.0, 2.0)))

    @ED.register_kl(MyNormal, ED.Normal)
    def _mine(p, q):
        return ember.tensor(42.0)

    assert ED.kl_divergence(p, q).item() == 42.0
    assert ED.kl_divergence(ED.Normal(0.0, 1.0), q).item() != 42.0
    with pytest.raises(NotImplementedError, match="No KL"):
        ED.kl_divergence(ED.Cauchy(1.0, 1.0), ED.Normal(0.0, 1.0))
    # two exponential families without a closed form: the Bregman fallback refuses, as torch's does
    with pytest.raises(NotImplementedError, match="different exponential families"):
        ED.kl_divergence(ED.Poisson(1.0), ED.Normal(0.0, 1.0))
    with pytest.raises(TypeError):
        ED.register_kl(int, ED.Normal)
