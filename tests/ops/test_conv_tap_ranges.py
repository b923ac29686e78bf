"""Convolution forward and both gradients against torch where kernel taps read partly or only padding
(im2col and col2im work tap by tap on the unpadded input and skip the padding)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [  # (input shape, weight shape, stride, padding, dilation, groups)
    ((2, 3, 5, 6), (4, 3, 3, 3), 1, 1, 1, 1),
    ((2, 4, 5, 5), (6, 2, 3, 2), (2, 3), (3, 2), 1, 2),       # padding wider than the kernel reaches
    ((1, 2, 4, 4), (3, 2, 2, 2), 3, 4, 1, 1),                  # taps that read only padding
    ((2, 2, 9, 7), (2, 2, 3, 3), (2, 1), (2, 0), (3, 2), 1),  # dilation, stride, one-sided rows only
    ((1, 1, 3, 3), (2, 1, 5, 5), 1, 2, 1, 1),                  # kernel as big as the padded input
    ((2, 3, 6, 6), (3, 3, 2, 2), 1, "same", 1, 1),             # even kernel: asymmetric padding
]


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", CASES)
def test_conv2d_matches_torch(xs, ws, stride, padding, dilation, groups) -> None:
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal(xs), rng.standard_normal(ws)
    kwargs = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    tx, tw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, **kwargs)
    g_np = rng.standard_normal(tuple(ty.shape))
    ty.backward(torch.tensor(g_np))
    ex, ew = ember.tensor(x_np, requires_grad=True), ember.tensor(w_np, requires_grad=True)
    ey = ember.nn.functional.conv2d(ex, ew, **kwargs)
    ey.backward(ember.tensor(g_np))
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)
