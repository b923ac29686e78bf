"""A convolution's bias added inside the ``conv2d`` record (in place into its fresh output) gives, bit for
bit, what ``conv2d(x, w) + bias`` gave: the output and all three gradients, on every algorithm the forward
can pick; and it matches torch in float64."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import conv

torch = pytest.importorskip("torch")

# (x shape, w shape, stride, padding, groups): per-image, Winograd F4/F2, channels-last im2col, trimmed
# dense, grouped.
CASES = [
    ((2, 1, 16, 16), (4, 1, 3, 3), 1, 1, 1),
    ((2, 16, 8, 8), (16, 16, 3, 3), 1, 1, 1),
    ((2, 16, 2, 2), (16, 16, 3, 3), 1, 1, 1),
    ((3, 4, 7, 7), (6, 4, 3, 3), 2, 1, 1),
    ((2, 8, 1, 1), (5, 8, 3, 3), 1, 1, 1),
    ((2, 4, 6, 6), (6, 2, 3, 3), 1, 0, 2),
]


def _grads(fn, arrays, g):
    tensors = [ember.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    out.backward(ember.tensor(g))
    return [out.detach().numpy()] + [t.grad.numpy() for t in tensors]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,ws,stride,pad,groups", CASES)
def test_bias_in_the_record_is_bitwise_the_separate_add(xs, ws, stride, pad, groups, dtype):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    geo = dict(stride=(stride, stride), padding=(pad,) * 4, dilation=(1, 1), groups=groups)
    y_shape = conv.conv2d_raw(ember.tensor(x), ember.tensor(w), **geo).shape
    g = rng.standard_normal(tuple(y_shape)).astype(dtype)
    fused = _grads(lambda a, c, d: conv.conv2d_raw(a, c, **geo, bias=d), (x, w, b), g)
    separate = _grads(lambda a, c, d: conv.conv2d_raw(a, c, **geo) + d.reshape(1, -1, 1, 1), (x, w, b), g)
    for got, expected in zip(fused, separate):
        np.testing.assert_array_equal(got, expected)
    if dtype == np.float64:  # and torch agrees
        tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
        ty = torch.nn.functional.conv2d(tx, tw, tb, stride=stride, padding=pad, groups=groups)
        ty.backward(torch.tensor(g))
        for got, ref in zip(fused, (ty, tx.grad, tw.grad, tb.grad)):
            np.testing.assert_allclose(got, ref.detach().numpy(), rtol=1e-10, atol=1e-10)


def test_bias_alone_needing_a_gradient_and_one_node_per_layer():
    x, w = ember.randn(2, 3, 5, 5), ember.randn(4, 3, 3, 3)
    b = ember.zeros(4, requires_grad=True)
    y = ember.nn.functional.conv2d(x, w, b, padding=1)
    # the bias add is part of the conv node (was AddBackward0); it prints torch's name, ConvolutionBackward0
    assert y.grad_fn.op.name == "conv2d" and y.grad_fn.name() == "ConvolutionBackward0"
    y.sum().backward()
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 2 * 5 * 5, dtype=np.float32))
