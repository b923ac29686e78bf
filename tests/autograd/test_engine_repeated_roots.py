"""Engine edge cases: the same root passed twice, against torch."""
import numpy as np
import torch

import ember


def test_repeated_root_accumulates_each_seed_like_torch():
    w = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    tw = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    a, ta = w * w, tw * tw
    ember.autograd.backward([a, a], [ember.ones(3), ember.full((3,), 2.0)])
    torch.autograd.backward([ta, ta], [torch.ones(3), torch.full((3,), 2.0)])
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())


def test_repeated_leaf_root():
    w = ember.ones(2, requires_grad=True)
    tw = torch.ones(2, requires_grad=True)
    ember.autograd.backward([w, w], [ember.ones(2), ember.ones(2)])
    torch.autograd.backward([tw, tw], [torch.ones(2), torch.ones(2)])
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())
