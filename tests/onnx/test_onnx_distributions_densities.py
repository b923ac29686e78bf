"""Densities, entropies, CDFs and KL divergences of ember.distributions exported to ONNX (their lgamma/digamma are
the op records, which export) and run in onnxruntime against torch.distributions' values. Argument validation
reads the values (as PyTorch's), so a traced density is built with validate_args=False, as for torch.onnx."""
from __future__ import annotations

import numpy as np
import pytest

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import ember.onnx as eonnx  # noqa: E402

X = (np.random.default_rng(4).uniform(0.1, 0.9, (4, 3))).astype(np.float32)

CASES = {  # name -> fn(lib, t): the same line for ember and torch
    "Normal.log_prob": lambda L, t: L.distributions.Normal(t, t + 1).log_prob(t * 2),
    "Normal.icdf": lambda L, t: L.distributions.Normal(t, t + 1).icdf(t),
    "Gamma.log_prob": lambda L, t: L.distributions.Gamma(t + 1, t + 2).log_prob(t + 0.5),
    "Gamma.entropy": lambda L, t: L.distributions.Gamma(t + 1, t + 2).entropy(),
    "Beta.log_prob": lambda L, t: L.distributions.Beta(t + 1, t + 2).log_prob(t),
    "Beta.entropy": lambda L, t: L.distributions.Beta(t + 1, t + 2).entropy(),
    "Dirichlet.log_prob": lambda L, t: L.distributions.Dirichlet(t + 1).log_prob(t / t.sum(-1, keepdim=True)),
    "StudentT.log_prob": lambda L, t: L.distributions.StudentT(t + 2).log_prob(t),
    "Poisson.log_prob": lambda L, t: L.distributions.Poisson(t + 1).log_prob((t * 5).floor()),
    "Binomial.log_prob": lambda L, t: L.distributions.Binomial(10, t).log_prob((t * 10).floor()),
    "Categorical.log_prob": lambda L, t: L.distributions.Categorical(probs=t).log_prob(L.tensor([0, 1, 2, 1])),
    "kl.Gamma": lambda L, t: L.distributions.kl_divergence(L.distributions.Gamma(t + 1, t + 2),
                                                           L.distributions.Gamma(t + 2, t + 1)),
    "kl.Beta": lambda L, t: L.distributions.kl_divergence(L.distributions.Beta(t + 1, t + 2),
                                                          L.distributions.Beta(t + 2, t + 1)),
}


@pytest.fixture
def no_validation():
    ember.distributions.Distribution.set_default_validate_args(False)
    torch.distributions.Distribution.set_default_validate_args(False)
    yield
    ember.distributions.Distribution.set_default_validate_args(True)
    torch.distributions.Distribution.set_default_validate_args(True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_density_exports_and_matches_torch(name, no_validation):
    fn = CASES[name]
    model = eonnx.export(lambda t: fn(ember, t), (ember.tensor(X),), None)
    (got,) = eonnx.run(model, [X])
    eager = fn(ember, ember.tensor(X)).numpy()
    want = fn(torch, torch.tensor(X.astype(np.float64))).numpy()
    np.testing.assert_allclose(eager, want, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_validation_reads_values_so_tracing_it_is_refused():
    with pytest.raises(ember.interpreters.TracingError):
        eonnx.export(lambda t: ember.distributions.Normal(t, t + 1, validate_args=True).log_prob(t),
                     (ember.tensor(X),), None)
