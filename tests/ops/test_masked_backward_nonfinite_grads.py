"""relu's and clamp's backward take a fast masked-multiply path; inf/NaN incoming gradients must
still give PyTorch's answer (0 where the mask is off, the gradient itself where it is on)."""
import numpy as np
import pytest
import torch

import ember

SPECIAL = [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 2.5]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["relu", "clamp"])
def test_nonfinite_upstream_gradients_match_torch(op, dtype):
    inputs = np.array([-1.0, 1.0] * len(SPECIAL), dtype=dtype)
    upstream = np.repeat(np.array(SPECIAL, dtype=dtype), 2)
    results = []
    for lib in (ember, torch):
        x = lib.tensor(inputs, requires_grad=True)
        y = lib.relu(x) if op == "relu" else lib.clamp(x, min=0.0, max=0.5)
        y.backward(lib.tensor(upstream))
        results.append(np.asarray(x.grad.detach().numpy()))
    np.testing.assert_array_equal(results[0], results[1])


def test_large_finite_gradients_take_the_fast_path_and_stay_exact():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10_000)
    g = rng.standard_normal(10_000)
    xe = ember.tensor(x, requires_grad=True)
    ember.relu(xe).backward(ember.tensor(g))
    np.testing.assert_array_equal(xe.grad.numpy(), np.where(x > 0, g, 0.0))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_numpy_path_without_native_kernels_matches_where(dtype):
    # With numba installed relu's backward runs a native kernel; this checks the NumPy form directly.
    from ember.ops.elementwise import _masked_grad

    g = np.array(SPECIAL * 3, dtype=dtype)
    mask = np.arange(g.size) % 3 == 0
    expected = np.where(mask, g, 0).astype(dtype)
    got = _masked_grad(np, g, mask)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    finite = np.linspace(-3, 3, 999).astype(dtype)
    np.testing.assert_array_equal(_masked_grad(np, finite, finite > 0), np.where(finite > 0, finite, 0))
