"""``torch.normal``'s overloads as PyTorch has them: ``normal(mean_tensor)`` (std defaults to 1; MorvanZhou's
306_optimizer.py), tensor/number mixes broadcast together, and the draw is not reparameterized: ``mean`` and
``std`` get zero gradients."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = {
    "mean_only": lambda t: t.normal(t.zeros(3, 4)),
    "mean_keyword": lambda t: t.normal(mean=t.zeros(5)),
    "mean_tensor_std_number": lambda t: t.normal(t.zeros(3), 2.0),
    "mean_number_std_tensor": lambda t: t.normal(2.0, t.ones(2, 3)),
    "both_tensors_broadcast": lambda t: t.normal(t.zeros(2, 1), t.ones(3)),
    "numbers_and_size": lambda t: t.normal(0.0, 1.0, (2, 2)),
    "float64_mean": lambda t: t.normal(t.zeros(4, dtype=t.float64)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_shapes_and_dtypes_like_torch(name):
    ours, theirs = CALLS[name](ember), CALLS[name](torch)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]


def test_moments_follow_mean_and_std():
    ember.manual_seed(0)
    mean = ember.tensor([[-3.0], [0.0], [5.0]])
    std = ember.tensor([0.5, 2.0])
    draws = np.stack([ember.normal(mean, std).numpy() for _ in range(4000)])
    assert np.allclose(draws.mean(0), np.broadcast_to(mean.numpy(), (3, 2)), atol=0.1)
    assert np.allclose(draws.std(0), np.broadcast_to(std.numpy(), (3, 2)), rtol=0.06)


@pytest.mark.parametrize("form", ["mean", "std", "both"])
def test_gradients_are_zero_as_torch(form):
    def run(t):
        mean = t.tensor([0.0, 1.0, float("inf"), -2.0], requires_grad=True)
        std = t.tensor([1.0, 0.0, 2.0, 3.0], requires_grad=True)
        out = {"mean": lambda: t.normal(mean), "std": lambda: t.normal(1.0, std),
               "both": lambda: t.normal(mean, std)}[form]()
        assert out.requires_grad
        out.sum().backward()
        return [None if v.grad is None else v.grad.tolist() for v in (mean, std)]

    assert run(ember) == run(torch)


def test_errors_name_the_problem():
    with pytest.raises(RuntimeError, match="std >= 0"):
        ember.normal(ember.zeros(3), -1.0)
    with pytest.raises(RuntimeError, match=r"normal: mean of shape \(2, 3\) and std of shape \(3, 2\)"):
        ember.normal(ember.zeros(2, 3), ember.ones(3, 2))
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(2, 3), torch.ones(3, 2))
