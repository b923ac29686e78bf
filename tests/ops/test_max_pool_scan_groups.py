"""max_pool2d's NumPy tap scan runs planes in cache-sized groups (ember/ops/pooling.py ``_scan_taps_fast``): values
and indices equal torch's for group sizes that split the planes unevenly, with ties, -inf and NaN."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import _config
from ember.ops import pooling


@pytest.mark.parametrize("scan_bytes", [1, 3000, 1 << 19])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_grouped_scan_equals_torch(scan_bytes: int, dtype: str, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(_config, "CPU_KERNELS", "numpy")
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
