"""Densities, entropies and KL divergences of the added families run inside ``ember.compile`` and give the
eager values and gradients (the math is ember ops and op records only)."""
from __future__ import annotations

import numpy as np

import ember
import ember.distributions as ED


def _loss(x, a, b):
    total = ED.Kumaraswamy(a, b, validate_args=False).log_prob(x).sum()
    total = total + ED.VonMises(a, b, validate_args=False).log_prob(x).sum()
    total = total + ED.ContinuousBernoulli(probs=x, validate_args=False).entropy().sum()
    total = total + ED.LowRankMultivariateNormal(a, b.unsqueeze(-1), b, validate_args=False).log_prob(x)
    total = total + ED.kl_divergence(ED.Gamma(a, b), ED.Gumbel(x, b)).sum()
    total = total + ED.FisherSnedecor(a, b, validate_args=False).log_prob(x + 1).sum()
    return total


def test_compiled_values_and_gradients_equal_eager():
    values = [np.array([0.3, 0.6]), np.array([2.0, 3.0]), np.array([1.5, 0.5])]
    eager_inputs = [ember.tensor(v, dtype=ember.float64, requires_grad=True) for v in values]
    eager = _loss(*eager_inputs)
    eager.backward()
    compiled = ember.compile(_loss)
    for _ in range(2):  # the first call traces, the second runs the compiled graph
        inputs = [ember.tensor(v, dtype=ember.float64, requires_grad=True) for v in values]
        out = compiled(*inputs)
        np.testing.assert_allclose(out.item(), eager.item(), rtol=1e-12)
        out.backward()
        for got, want in zip(inputs, eager_inputs):
            np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-10)
