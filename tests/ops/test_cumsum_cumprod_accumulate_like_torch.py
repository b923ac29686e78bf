"""float32 / complex64 ``cumsum`` and ``cumprod`` accumulate in double and round each output, as torch's CPU
kernels (their ``acc_type``): bit for bit against torch 2.13, values and gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember


def _pair(array: np.ndarray, grad: bool = False):
    return ember.tensor(array, requires_grad=grad), torch.tensor(array, requires_grad=grad)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex64, np.float64])
def test_running_sums_and_products_bitwise_like_torch(op, dtype):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((7, 3000)).astype(dtype) * (1 if op == "cumsum" else 1.001)
    if dtype is np.complex64:
        data = data + 1j * rng.standard_normal((7, 3000)).astype(np.float32)
    for dim in (0, 1):
        e, t = _pair(data)
        got, want = getattr(e, op)(dim).numpy(), getattr(t, op)(dim).numpy()
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_special_points():
    cases = {"cumsum": [16777216.0, 1.0, 1.0, -16777216.0, -0.0, 1e8, 1.0, -1e8],
             "cumprod": [1e30, -1e30, 1e-40, 3.0, -0.0, np.inf, 0.5]}
    for op, values in cases.items():
        e, t = _pair(np.array(values, np.float32))
        got, want = getattr(e, op)(0).numpy(), getattr(t, op)(0).numpy()
        np.testing.assert_array_equal(got, want)
        assert (np.signbit(got) == np.signbit(want)).all()


def test_gradient_of_a_long_float32_cumsum_like_torch():
    data = np.random.default_rng(1).random(20000, dtype=np.float32)
    e, t = _pair(data, grad=True)
    weights = np.linspace(-1, 1, 20000, dtype=np.float32)
    (e.cumsum(0) * ember.tensor(weights)).sum().backward()
    (t.cumsum(0) * torch.tensor(weights)).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy(), t.grad.numpy())
