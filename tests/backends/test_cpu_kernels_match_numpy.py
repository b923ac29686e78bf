"""Native CPU kernels (numba, optional) must compute exactly what the NumPy paths compute."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember import _config
from ember.backends import cpu_kernels

pytest.importorskip("numba")


@pytest.fixture
def numpy_only():
    previous = _config.CPU_KERNELS
    _config.CPU_KERNELS = "numpy"
    cpu_kernels.reset()
    yield
    _config.CPU_KERNELS = previous
    cpu_kernels.reset()


def _pool_and_grad(x_np: np.ndarray) -> tuple:
    x = ember.tensor(x_np, requires_grad=True)
    values, indices = ember.nn.functional.max_pool2d(x, 2, return_indices=True)
    (values * ember.tensor(np.arange(values.numel(), dtype=x_np.dtype).reshape(tuple(values.shape)))).sum().backward()
    return values.detach().numpy().copy(), indices.numpy().copy(), x.grad.numpy().copy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_max_pool_matches_numpy_path_and_torch(dtype, request) -> None:
    assert cpu_kernels.get("max_pool2d_2x2") is not None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 6, 8)).astype(dtype)
    x[0, 0, :2, :2] = 1.5           # a four-way tie: the first position wins
    x[1, 2, 2:4, 4:6] = [[0.0, 2.0], [2.0, 0.0]]
    native = _pool_and_grad(x)
    request.getfixturevalue("numpy_only")
    assert cpu_kernels.get("max_pool2d_2x2") is None
    portable = _pool_and_grad(x)
    for a, b in zip(native, portable):
        np.testing.assert_array_equal(a, b)
    tv, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2, return_indices=True)
    np.testing.assert_array_equal(native[0], tv.numpy())
    np.testing.assert_array_equal(native[1], ti.numpy())


def test_native_unpool_rejects_out_of_range_indices() -> None:
    values = ember.ones(1, 1, 2, 2)
    indices = ember.tensor([[[[0, 1], [4, 99]]]])
    with pytest.raises(IndexError, match="max_unpool2d"):
        ember.nn.functional.max_unpool2d(values, indices, 2)


def test_native_max_pool_propagates_nan_like_numpy_path() -> None:
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    x[0, 1, 0, 1] = np.nan
    values = ember.nn.functional.max_pool2d(ember.tensor(x), 2).numpy()
    expected = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2).numpy()
    np.testing.assert_array_equal(np.isnan(values), np.isnan(expected))
    np.testing.assert_array_equal(values[~np.isnan(values)], expected[~np.isnan(expected)])


