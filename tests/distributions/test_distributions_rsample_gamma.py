"""Reparameterized Gamma/Beta/Dirichlet/Chi2/StudentT samples: the implicit gradient dx/da against a
finite-difference reference built from SciPy's incomplete gamma and against torch's approximation;
pathwise gradients that are unbiased for d/da E[x]."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED
from ember.distributions._gamma_rsample import standard_gamma_grad

torch = pytest.importorskip("torch")


def test_standard_gamma_grad_vs_references():
    special = pytest.importorskip("scipy.special")
    a = np.array([0.02, 0.3, 1.0, 2.5, 10.0, 100.0, 1000.0])
    for q in (1e-4, 0.01, 0.5, 0.99, 0.9999):
        x = special.gammaincinv(a, q)
        h = 1e-6 * a
        pdf = np.exp((a - 1) * np.log(x) - x - special.gammaln(a))
        reference = -(special.gammainc(a + h, x) - special.gammainc(a - h, x)) / (2 * h) / pdf
        ours = standard_gamma_grad(x, a)
        np.testing.assert_allclose(ours, reference, rtol=2e-7)
        theirs = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=2e-3)  # torch's own formula is an approximation


def test_gamma_rsample_grads_match_torch_formula():
    conc = ember.tensor([[0.5, 2.0, 7.0]], dtype=ember.float64, requires_grad=True)
    rate = ember.tensor([1.5, 0.5, 3.0], dtype=ember.float64, requires_grad=True)
    ember.manual_seed(0)
    x = ED.Gamma(conc, rate).rsample((50,))
    assert tuple(x.shape) == (50, 1, 3)
    (x.log() * 1.0 + x).sum().backward()
    # torch: d x / d conc = _standard_gamma_grad(conc, x * rate) / rate; d x / d rate = -x / rate
    conc_t = torch.tensor([[0.5, 2.0, 7.0]], dtype=torch.float64)
    rate_t = torch.tensor([1.5, 0.5, 3.0], dtype=torch.float64)
    xv = torch.tensor(x.detach().numpy())
    upstream = 1 / xv + 1
    dconc = (upstream * torch._standard_gamma_grad(conc_t.expand_as(xv), xv * rate_t) / rate_t).sum(0)
    drate = (upstream * (-xv / rate_t)).sum((0, 1))
    np.testing.assert_allclose(conc.grad.numpy(), dconc.numpy(), rtol=2e-3)
    np.testing.assert_allclose(rate.grad.numpy(), drate.numpy(), rtol=1e-10)


@pytest.mark.parametrize("family", ["Beta", "Dirichlet", "Gamma", "Chi2", "StudentT"])
def test_pathwise_gradient_unbiased(family):
    """d/dparam of the sample mean of f(rsample) estimates d/dparam E[f(X)], known in closed form."""
    ember.manual_seed(1)
    n = 20000
    if family == "Beta":
        a = ember.tensor([0.7, 3.0], dtype=ember.float64, requires_grad=True)
        b = ember.tensor([2.0, 1.5], dtype=ember.float64, requires_grad=True)
        x = ED.Beta(a, b).rsample((n,))
        x.mean(0).sum().backward()
        an, bn = a.detach().numpy(), b.detach().numpy()
        expected = [bn / (an + bn) ** 2, -an / (an + bn) ** 2]  # d/da and d/db of a / (a + b)
        grads = [a.grad.numpy(), b.grad.numpy()]
    elif family == "Dirichlet":
        c = ember.tensor([0.5, 1.0, 4.0], dtype=ember.float64, requires_grad=True)
        x = ED.Dirichlet(c).rsample((n,))
        x[..., 0].mean().backward()
        cn = c.detach().numpy()
        total = cn.sum()
        expected = [np.array([(total - cn[0]) / total ** 2, -cn[0] / total ** 2, -cn[0] / total ** 2])]
        grads = [c.grad.numpy()]
    elif family == "Gamma":
        c = ember.tensor([0.3, 4.0], dtype=ember.float64, requires_grad=True)
        x = ED.Gamma(c, 2.0).rsample((n,))
        x.pow(2).mean(0).sum().backward()  # E[x^2] = c (c + 1) / rate^2
        cn = c.detach().numpy()
        expected = [(2 * cn + 1) / 4]
        grads = [c.grad.numpy()]
    elif family == "Chi2":
        df = ember.tensor([1.0, 6.0], dtype=ember.float64, requires_grad=True)
        ED.Chi2(df).rsample((n,)).mean(0).sum().backward()  # E[x] = df
        expected, grads = [np.ones(2)], [df.grad.numpy()]
    else:
        df = ember.tensor([8.0], dtype=ember.float64, requires_grad=True)
        scale = ember.tensor([1.5], dtype=ember.float64, requires_grad=True)
        ED.StudentT(df, 0.0, scale).rsample((n,)).pow(2).mean(0).sum().backward()  # E[x^2] = s^2 df / (df - 2)
        d, s = 8.0, 1.5
        expected = [np.array([-2 * s * s / (d - 2) ** 2]), np.array([2 * s * d / (d - 2)])]
        grads = [df.grad.numpy(), scale.grad.numpy()]
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=0.1, atol=0.02)
