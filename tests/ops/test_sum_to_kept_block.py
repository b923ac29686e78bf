"""``sum_to``'s fast path for a kept block of axes (reductions._sum_around_block: a convolution's
bias gradient as one einsum) against a float64 NumPy sum and torch's bias gradient,
with inf/NaN, and the shapes that must keep NumPy's sum."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import reductions

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype, tol", [(np.float32, 2e-6), (np.float64, 1e-13)])
@pytest.mark.parametrize("xshape, target", [
    ((64, 32, 28, 28), (1, 32, 1, 1)),   # conv bias: N, H, W reduced
    ((64, 40, 40), (64, 1, 1)),          # unbatched: only trailing axes
    ((4, 8, 6, 50, 60), (1, 8, 6, 1, 1)),  # a kept block of two axes
    ((64, 32, 28, 28), (1, 1, 28, 1)),   # one kept axis between reduced ones
    ((3, 64, 20, 20, 20), (64, 1, 1, 1)),  # leading axis dropped, 3-D conv bias
])
def test_block_sum_matches_float64(xshape, target, dtype, tol) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(xshape) + 0.5).astype(dtype)
    assert reductions._sum_around_block(x, (1,) * (x.ndim - len(target)) + target) is not None
    got = reductions._sum_to_impl(np, x, target)
    lead = x.ndim - len(target)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(target) if s == 1)
    want = x.astype(np.float64).sum(axis=axes).reshape(target)
    assert got.dtype == dtype and got.shape == target
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * float(np.abs(want).max()))


def test_inf_nan_propagate_as_a_sum() -> None:
    x = np.ones((8, 4, 128, 64), dtype=np.float32)
    x[0, 0, 0, 0] = np.nan
    x[1, 1, 5, 5] = np.inf
    x[2, 2, 3, 3], x[3, 2, 4, 4] = np.inf, -np.inf
    got = reductions._sum_to_impl(np, x, (1, 4, 1, 1)).ravel()
    want = x.sum(axis=(0, 2, 3))
    np.testing.assert_array_equal(got, want)
    assert np.isnan(got[0]) and np.isposinf(got[1]) and np.isnan(got[2]) and got[3] == 8 * 128 * 64


@pytest.mark.parametrize("xshape, target", [
    ((64, 32, 28, 28), (1, 32, 28, 28)),  # only leading axes reduced
    ((64, 32, 28, 28), (1, 32, 1, 28)),   # two kept blocks
    ((4096, 64), (1, 64)),                # only leading axes reduced: NumPy's column sum
    ((8, 8, 8), (8, 1, 1)),               # too small to be worth it
])
def test_other_shapes_keep_numpy_sum(xshape, target) -> None:
    x = np.ones(xshape, dtype=np.float32)
    assert reductions._sum_around_block(x, (1,) * (x.ndim - len(target)) + target) is None
    np.testing.assert_array_equal(reductions._sum_to_impl(np, x, target), x.sum(
        axis=tuple(i for i, (t, s) in enumerate(zip(target, xshape)) if t == 1 and s != 1), keepdims=True))


def test_conv_bias_gradient_matches_torch() -> None:
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((16, 3, 30, 30)), rng.standard_normal((8, 3, 3, 3)), rng.standard_normal(8)
    g = rng.standard_normal((16, 8, 30, 30))
    g[0, 3, 0, 0] = np.nan
    tb = torch.tensor(b, requires_grad=True)
    torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), tb, padding=1).backward(torch.tensor(g))
    eb = ember.tensor(b, requires_grad=True)
    ember.nn.functional.conv2d(ember.tensor(x), ember.tensor(w), eb, padding=1).backward(ember.tensor(g))
    np.testing.assert_allclose(eb.grad.numpy(), tb.grad.numpy(), rtol=1e-12, atol=1e-10)
