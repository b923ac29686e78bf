"""``loss = criterion(scores, targets); loss += alpha * reg; loss.backward()`` (show-attend-tell's training loop):
torch's cross-entropy backward reads the log-softmax, not the loss, so changing the loss in place is fine. ember
saved the loss too and refused ("modified by an inplace operation")."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

KW = {"mean": {}, "none": {"reduction": "none"}, "sum": {"reduction": "sum"}, "ignore": {"ignore_index": 1}}


@pytest.mark.parametrize("kw", sorted(KW))
def test_cross_entropy_loss_changed_in_place_like_torch(kw):
    x0 = np.linspace(-2, 2, 20).reshape(4, 5).astype(np.float32)
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(x0, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor([0, 2, 1, 4]), **KW[kw])
        loss += 0.5 * (x ** 2).mean()
        loss.sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-7)


def test_cross_entropy_double_backward_after_in_place():
    """The second derivative (``create_graph=True``) still goes through the composite, not the saved loss."""
    out = []
    for lib in (ember, torch):
        x = lib.tensor([[0.3, -1.0, 2.0], [1.5, 0.2, -0.7]], dtype=lib.float64, requires_grad=True)
        loss = lib.nn.functional.cross_entropy(x, lib.tensor([2, 0]))
        loss *= 2.0
        (g,) = lib.autograd.grad(loss, x, create_graph=True)
        (gg,) = lib.autograd.grad((g ** 2).sum(), x)
        out.append(gg.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-10)
