"""``sum``'s CPU path calls ``np.add.reduce`` itself (np.sum's call without its Python wrapper): the same values
bit for bit as ``np.sum`` for every float dtype, axis form, keepdim, 0-d and empty inputs and special values,
and torch's values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.ops.reductions import _sum_impl


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("dims, keepdim", [(None, False), ((1,), False), ((0, 2), True), ((2,), True), ((), False)])
def test_bits_equal_np_sum(dtype, dims, keepdim) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 4, 5)) * 1e3).astype(dtype)
    x[0, 0, 0], x[1, 2, 3], x[2, 1, 0] = np.inf, -0.0, 1e-40
    axis = dims if dims is None or len(dims) != 1 else dims[0]
    got, want = _sum_impl(np, x, dims, keepdim), np.sum(x, axis=axis, keepdims=keepdim)
    assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
    assert np.array_equal(got, want, equal_nan=True)


def test_zero_d_empty_and_nan() -> None:
    for x in (np.array(2.5, np.float32), np.zeros((0, 3), np.float32), np.array([np.nan, 1.0])):
        assert np.array_equal(_sum_impl(np, x), np.sum(x), equal_nan=True)
    assert np.array_equal(_sum_impl(np, np.zeros((0, 3), np.float32), (0,)), np.zeros(3, np.float32))


def test_against_torch_with_gradient() -> None:
    a = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    e, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    (e.sum(1) * ember.arange(4.0)).sum().backward()
    (t.sum(1) * torch.arange(4.0)).sum().backward()
    np.testing.assert_allclose(e.sum(1).detach().numpy(), t.sum(1).detach().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
