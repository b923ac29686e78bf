"""max_pool2d's NumPy tap scan runs planes in cache-sized groups (ember/ops/pooling.py ``_scan_taps_fast``): values
and indices equal torch's for group sizes that split the planes unevenly, with ties, -inf and NaN."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _config
from ember.backends import cpu_kernels
from ember.ops import pooling


@pytest.fixture
def numpy_kernels(monkeypatch):
    """NumPy's paths only: the kernel table is built once per process, so it is rebuilt after the switch (and
    again after the test, under the restored setting), whatever ran before in this process."""
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
    cpu_kernels.reset()
    yield
    monkeypatch.undo()
    cpu_kernels.reset()


@pytest.mark.parametrize("scan_bytes", [1, 3000, 1 << 19])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grouped_scan_equals_torch(scan_bytes: int, dtype: str, monkeypatch, numpy_kernels) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(pooling, "_SCAN_BYTES", scan_bytes)
    rng = np.random.default_rng(4)
    x = rng.integers(-3, 4, (3, 7, 13, 11)).astype(dtype)  # small integers: many ties
    x[0, 0, :2] = -np.inf
    for args in ((3, 2, 1), (2, 1, 0), (3, 3, 1)):
        got, gi = F.max_pool2d(ember.tensor(x), *args, return_indices=True)
        want, wi = torch.nn.functional.max_pool2d(torch.tensor(x), *args, return_indices=True)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(gi.numpy(), wi.numpy())
    x[1, 2, 3, 4] = np.nan
    got, gi = F.max_pool2d(ember.tensor(x), 3, 2, 1, return_indices=True)
    want, wi = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    np.testing.assert_array_equal(gi.numpy(), wi.numpy())


@pytest.mark.parametrize("unpool_bytes", [1, 5000, 1 << 18])
def test_grouped_overlapping_backward_equals_one_bincount_and_torch(unpool_bytes: int, monkeypatch,
                                                                    numpy_kernels) -> None:
    """The NumPy backward of overlapping windows sums each pixel's gradients in float64 by plane groups: the same
    bits as one bincount over all planes (independent reference here), and torch's gradient within float32
    rounding (torch adds in float32)."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(pooling, "_UNPOOL_BYTES", unpool_bytes)
    rng = np.random.default_rng(5)
    x = rng.integers(-2, 3, (3, 5, 12, 9)).astype(np.float32)  # ties: pixels win several windows
    g = rng.standard_normal((3, 5, 6, 5)).astype(np.float32)
    xe = ember.tensor(x, requires_grad=True)
    out, idx = F.max_pool2d(xe, 3, 2, 1, return_indices=True)
    out.backward(ember.tensor(g))
    flat = idx.numpy().reshape(15, -1) + np.arange(15)[:, None] * (12 * 9)
    want = np.bincount(flat.reshape(-1), weights=g.reshape(-1).astype(np.float64), minlength=15 * 12 * 9)
    np.testing.assert_array_equal(xe.grad.numpy(), want.astype(np.float32).reshape(x.shape))
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.max_pool2d(xt, 3, 2, 1).backward(torch.tensor(g))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)
