"""rsample and log_prob gradients vs torch (same noise), validate_args errors where torch raises,
constraints, and the lgamma/digamma/trigamma helpers."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions._special import digamma, lgamma, trigamma

torch = pytest.importorskip("torch")
TD = torch.distributions
RNG = np.random.default_rng(1)


@pytest.fixture(autouse=True)
def _seed_torch():
    """torch's samples are the test values: seed them so a test never depends on the tests before it."""
    torch.manual_seed(0)


def _pair(a):
    return (ember.tensor(a, dtype=ember.float64, requires_grad=True),
            torch.tensor(a, dtype=torch.float64, requires_grad=True))


def _grads_equal(ours, theirs, rtol=1e-9):
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("family", ["Normal", "Laplace", "LogNormal"])
def test_rsample_grad_loc_scale(family):
    loc_o, loc_t = _pair(RNG.normal(size=4))
    scale_o, scale_t = _pair(RNG.uniform(0.3, 2.0, 4))
    ember.manual_seed(0)
    d = getattr(ED, family)(loc_o, scale_o)
    x = d.rsample((50,))
    (x * x).sum().backward()
    # the same draw through torch's formula: x = f(loc, scale, noise) with the noise recovered
    noise = (x.detach().numpy() if family != "LogNormal" else np.log(x.detach().numpy()))
    base = (noise - loc_o.detach().numpy()) / scale_o.detach().numpy()
    y = loc_t + scale_t * torch.tensor(base)
    if family == "LogNormal":
        y = y.exp()
    (y * y).sum().backward()
    _grads_equal((loc_o, scale_o), (loc_t, scale_t))


def test_rsample_grad_uniform_exponential():
    low_o, low_t = _pair(RNG.normal(size=3))
    high_o, high_t = _pair(RNG.normal(size=3) + 3)
    ember.manual_seed(1)
    x = ED.Uniform(low_o, high_o).rsample((20,))
    x.pow(3).sum().backward()
    u = (x.detach().numpy() - low_o.detach().numpy()) / (high_o.detach().numpy() - low_o.detach().numpy())
    (low_t + torch.tensor(u) * (high_t - low_t)).pow(3).sum().backward()
    _grads_equal((low_o, high_o), (low_t, high_t))
    rate_o, rate_t = _pair(RNG.uniform(0.5, 3.0, 3))
    x = ED.Exponential(rate_o).rsample((20,))
    x.sin().sum().backward()
    e = x.detach().numpy() * rate_o.detach().numpy()
    (torch.tensor(e) / rate_t).sin().sum().backward()
    _grads_equal((rate_o,), (rate_t,))


CASES = {
    "Normal": (lambda D, a, b: D.Normal(a, b), 2),
    "Gamma": (lambda D, a, b: D.Gamma(a, b), 2),
    "Beta": (lambda D, a, b: D.Beta(a, b), 2),
    "Dirichlet": (lambda D, a: D.Dirichlet(a), 1),
    "Poisson": (lambda D, a: D.Poisson(a), 1),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_and_entropy_grads(name):
    build, count = CASES[name]
    shape = (2, 3)
    params = [_pair(RNG.uniform(0.5, 4.0, shape)) for _ in range(count)]
    ours = build(ED, *[p[0] for p in params])
    theirs = build(TD, *[p[1] for p in params])
    torch.manual_seed(0)
    values = theirs.sample((4,))
    total_t = theirs.log_prob(values).sum()
    total_o = ours.log_prob(ember.tensor(values.numpy())).sum()
    if name != "Poisson":  # torch has no Poisson entropy (nor has ember)
        total_t = total_t + theirs.entropy().sum()
        total_o = total_o + ours.entropy().sum()
    total_t.backward()
    total_o.backward()
    # atol: entropy gradients use trigamma, where torch's polygamma(1, x) is only ~1e-9 relative accurate
    for o, t in zip([p[0] for p in params], [p[1] for p in params]):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-8)


def test_kl_grads_gamma_beta():
    a, b, c, d = (_pair(RNG.uniform(0.5, 3.0, 3)) for _ in range(4))
    ED.kl_divergence(ED.Beta(a[0], b[0]), ED.Beta(c[0], d[0])).sum().backward()
    TD.kl_divergence(TD.Beta(a[1], b[1]), TD.Beta(c[1], d[1])).sum().backward()
    _grads_equal([a[0], b[0], c[0], d[0]], [a[1], b[1], c[1], d[1]], rtol=1e-8)


def _raises_like_torch(fn_ours, fn_theirs, match):
    with pytest.raises(ValueError, match=match):
        fn_theirs()
    with pytest.raises(ValueError, match=match):
        fn_ours()


def test_validate_args_errors_as_torch():
    E, T = ember.tensor, torch.tensor
    _raises_like_torch(lambda: ED.Normal(E([0.0]), E([-1.0])), lambda: TD.Normal(T([0.0]), T([-1.0])),
                       r"Expected parameter scale .* to satisfy the constraint GreaterThan\(lower_bound=0.0\)")
    _raises_like_torch(lambda: ED.Bernoulli(probs=E([1.5])), lambda: TD.Bernoulli(probs=T([1.5])),
                       r"Expected parameter probs")
    _raises_like_torch(lambda: ED.Bernoulli(), lambda: TD.Bernoulli(), r"Either `probs` or `logits` must be specified")
    _raises_like_torch(lambda: ED.Categorical(probs=E([0.5, -0.1])), lambda: TD.Categorical(probs=T([0.5, -0.1])),
                       r"Expected parameter probs")
    _raises_like_torch(lambda: ED.Uniform(1.0, 0.0), lambda: TD.Uniform(1.0, 0.0),
                       r"Expected parameter low .* to satisfy the constraint LessThan")
    _raises_like_torch(lambda: ED.Dirichlet(E([1.0, 0.0])), lambda: TD.Dirichlet(T([1.0, 0.0])),
                       r"Expected parameter concentration")
    _raises_like_torch(lambda: ED.Exponential(1.0).log_prob(E(-1.0)), lambda: TD.Exponential(1.0).log_prob(T(-1.0)),
                       r"Expected value argument .* to be within the support")
    _raises_like_torch(lambda: ED.Poisson(2.0).log_prob(E(1.5)), lambda: TD.Poisson(2.0).log_prob(T(1.5)),
                       r"within the support")
    _raises_like_torch(lambda: ED.Normal(E([0.0, 1.0]), 1.0).log_prob(E([0.0, 1.0, 2.0])),
                       lambda: TD.Normal(T([0.0, 1.0]), 1.0).log_prob(T([0.0, 1.0, 2.0])),
                       r"Value is not broadcastable with batch_shape\+event_shape")
    _raises_like_torch(lambda: ED.Dirichlet(E([1.0, 1.0])).log_prob(E([0.5, 0.25, 0.25])),
                       lambda: TD.Dirichlet(T([1.0, 1.0])).log_prob(T([0.5, 0.25, 0.25])),
                       r"The right-most size of value must match event_shape")
    _raises_like_torch(lambda: ED.Normal(0.0, 1.0).log_prob(0.5), lambda: TD.Normal(0.0, 1.0).log_prob(0.5),
                       r"The value argument to log_prob must be a Tensor")
    _raises_like_torch(lambda: ED.Independent(ED.Normal(E([0.0]), 1.0), 2),
                       lambda: TD.Independent(TD.Normal(T([0.0]), 1.0), 2), r"reinterpreted_batch_ndims")


def test_validate_args_switches():
    # off per instance and by default: no error, values as torch's
    assert ED.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    ED.Distribution.set_default_validate_args(False)
    try:
        ED.Normal(ember.tensor([0.0]), ember.tensor([-1.0]))
        ED.Exponential(1.0).log_prob(ember.tensor(-1.0))
    finally:
        ED.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ED.Normal(ember.tensor([0.0]), ember.tensor([-1.0]))
    with pytest.raises(ValueError):
        ED.Distribution.set_default_validate_args("yes")


def test_constraints_check():
    C = ED.constraints
    TC = torch.distributions.constraints
    values = np.array([[-1.0, 0.0, 0.3, 1.0, 2.0, np.nan], [0.5, 0.5, 0.0, 0.0, 0.0, 0.0]])
    for name in ("real", "positive", "nonnegative", "unit_interval", "boolean", "nonnegative_integer"):
        ours = getattr(C, name).check(ember.tensor(values)).numpy()
        theirs = getattr(TC, name).check(torch.tensor(values)).numpy()
        np.testing.assert_array_equal(ours, theirs, err_msg=name)
    for ours, theirs in ((C.simplex, TC.simplex), (C.one_hot, TC.one_hot), (C.real_vector, TC.real_vector)):
        np.testing.assert_array_equal(ours.check(ember.tensor(values)).numpy(), theirs.check(torch.tensor(values)).numpy())
    np.testing.assert_array_equal(C.interval(0.0, 1.0).check(ember.tensor(values)).numpy(),
                                  TC.interval(0.0, 1.0).check(torch.tensor(values)).numpy())
    assert repr(C.positive) == repr(TC.positive) and repr(C.real) == repr(TC.real)
    a = np.array([[[1.0, 0.0], [0.5, 2.0]], [[1.0, 2.0], [2.0, 1.0]], [[2.0, 1.0], [1.0, 2.0]],
                  [[0.6, 0.0], [0.6, 0.8]], [[1.0, 0.0], [0.0, 1.0]]])
    for name in ("lower_triangular", "lower_cholesky", "symmetric", "square", "corr_cholesky"):
        np.testing.assert_array_equal(getattr(C, name).check(ember.tensor(a)).numpy(),
                                      getattr(TC, name).check(torch.tensor(a)).numpy(), err_msg=name)
    # definiteness on a batch of symmetric matrices (torch answers only the symmetry mask for mixed batches)
    symmetric = a[[1, 2, 4]]
    for name in ("positive_definite", "positive_semidefinite"):
        np.testing.assert_array_equal(getattr(C, name).check(ember.tensor(symmetric)).numpy(),
                                      getattr(TC, name).check(torch.tensor(symmetric)).numpy(), err_msg=name)
    assert C.positive_definite.check(ember.tensor(a)).tolist() == [False, False, True, False, True]
    counts = np.array([[1.0, 2.0, 0.0], [3.0, 2.0, 1.0], [-1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(C.multinomial(5).check(ember.tensor(counts)).numpy(),
                                  TC.multinomial(5).check(torch.tensor(counts)).numpy())
    assert C.is_dependent(ED.Uniform.support) and not C.is_dependent(C.positive)


def test_enumerate_support_and_repr():
    ours = ED.Categorical(probs=ember.tensor([[0.2, 0.8], [0.5, 0.5]]))
    theirs = TD.Categorical(probs=torch.tensor([[0.2, 0.8], [0.5, 0.5]]))
    np.testing.assert_array_equal(ours.enumerate_support().numpy(), theirs.enumerate_support().numpy())
    np.testing.assert_array_equal(ED.Bernoulli(ember.tensor([0.3, 0.4])).enumerate_support(False).numpy(),
                                  TD.Bernoulli(torch.tensor([0.3, 0.4])).enumerate_support(False).numpy())
    np.testing.assert_array_equal(ED.OneHotCategorical(ember.tensor([0.3, 0.7])).enumerate_support().numpy(),
                                  TD.OneHotCategorical(torch.tensor([0.3, 0.7])).enumerate_support().numpy())
    assert repr(ED.Normal(ember.zeros(3), 1.0)) == "Normal(loc: ember.Size([3]), scale: ember.Size([3]))"


def test_special_helpers_vs_torch():
    x = np.array([-2.5, -0.3, 1e-3, 0.5, 1.0, 2.5, 7.0, 13.0, 100.0, 1e5])
    xt = torch.tensor(x)
    np.testing.assert_allclose(lgamma(ember.tensor(x)).numpy(), torch.lgamma(xt).numpy(), rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(digamma(ember.tensor(x)).numpy(), torch.digamma(xt).numpy(), rtol=1e-12, atol=1e-13)
    # torch's trigamma is only ~1e-9 accurate; compare with SciPy when present, torch loosely otherwise
    np.testing.assert_allclose(trigamma(ember.tensor(x)).numpy(), torch.polygamma(1, xt).numpy(), rtol=1e-8)
    special = pytest.importorskip("scipy.special")
    np.testing.assert_allclose(trigamma(ember.tensor(x)).numpy(), special.polygamma(1, x), rtol=2e-15)
    assert np.isinf(trigamma(ember.tensor([0.0, -2.0])).numpy()).all()
    e = ember.tensor(x[2:], requires_grad=True)
    digamma(lgamma(e)).sum().backward()  # chain through digamma's derivative (trigamma)
    t = torch.tensor(x[2:], requires_grad=True)
    torch.digamma(torch.lgamma(t)).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-8)
