"""Transforms against torch.distributions.transforms (float64): forward, inverse, log|det J|, shapes."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.distributions as ED

torch = pytest.importorskip("torch")
TT = torch.distributions.transforms
RNG = np.random.default_rng(3)

CASES = {
    "Exp": (lambda T: T.ExpTransform(), lambda: RNG.normal(size=(3, 4))),
    "Affine": (lambda T: T.AffineTransform(0.5, -2.0), lambda: RNG.normal(size=(5,))),
    "Sigmoid": (lambda T: T.SigmoidTransform(), lambda: RNG.normal(size=(4,)) * 5),
    "Tanh": (lambda T: T.TanhTransform(), lambda: RNG.normal(size=(6,)) * 3),
    "Softplus": (lambda T: T.SoftplusTransform(), lambda: RNG.normal(size=(6,)) * 3),
    "Power": (lambda T: T.PowerTransform(2.5), lambda: RNG.uniform(0.1, 3.0, (4,))),
    "Abs": (lambda T: T.AbsTransform(), lambda: RNG.normal(size=(4,))),
    "Softmax": (lambda T: T.SoftmaxTransform(), lambda: RNG.normal(size=(2, 4))),
    "StickBreaking": (lambda T: T.StickBreakingTransform(), lambda: RNG.normal(size=(3, 4))),
    "Independent_Exp": (lambda T: T.IndependentTransform(T.ExpTransform(), 1), lambda: RNG.normal(size=(2, 3))),
    "Compose": (lambda T: T.ComposeTransform([T.AffineTransform(1.0, 2.0), T.ExpTransform()]),
                lambda: RNG.normal(size=(3,))),
    "Inverse_Sigmoid": (lambda T: T.SigmoidTransform().inv, lambda: RNG.uniform(0.05, 0.95, (4,))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transform_vs_torch(name):
    build, sample = CASES[name]
    ours, theirs = build(ED.transforms), build(TT)
    x = sample()
    y_o, y_t = ours(ember.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(y_o.numpy(), y_t.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours.inv(y_o).numpy(), theirs.inv(y_t).numpy(), rtol=1e-10, atol=1e-12)
    try:
        expected = theirs.log_abs_det_jacobian(torch.tensor(x), y_t)
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            ours.log_abs_det_jacobian(ember.tensor(x), y_o)
    else:
        np.testing.assert_allclose(ours.log_abs_det_jacobian(ember.tensor(x), y_o).numpy(), expected.numpy(),
                                   rtol=1e-10, atol=1e-12)
    assert ours.forward_shape(x.shape) == tuple(theirs.forward_shape(torch.Size(x.shape)))
    assert ours.bijective == theirs.bijective
    assert ours.domain.event_dim == theirs.domain.event_dim and ours.codomain.event_dim == theirs.codomain.event_dim


def test_stick_breaking_distribution_vs_torch():
    """A TransformedDistribution onto the simplex: log_prob uses the forward/inverse shapes and log-det."""
    loc, scale = RNG.normal(size=3), RNG.uniform(0.5, 1.5, 3)
    ours = ED.TransformedDistribution(ED.Independent(ED.Normal(ember.tensor(loc), ember.tensor(scale)), 1),
                                      ED.transforms.StickBreakingTransform())
    theirs = torch.distributions.TransformedDistribution(
        torch.distributions.Independent(torch.distributions.Normal(torch.tensor(loc), torch.tensor(scale)), 1),
        TT.StickBreakingTransform())
    assert tuple(ours.event_shape) == tuple(theirs.event_shape) == (4,)
    torch.manual_seed(0)
    values = theirs.sample((5,))
    np.testing.assert_allclose(ours.log_prob(ember.tensor(values.numpy())).numpy(), theirs.log_prob(values).numpy(),
                               rtol=1e-9)
