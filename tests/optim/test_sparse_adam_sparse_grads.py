"""SparseAdam with real sparse gradients (ember/sparse/) against torch.optim.SparseAdam, explicit zeros included."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("options", [{}, {"lr": 0.05, "betas": (0.5, 0.9)}, {"maximize": True}])
def test_sparse_adam_with_sparse_gradients_matches_torch(options: dict) -> None:
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((6, 3))
    e, t = ember.tensor(w0, requires_grad=True), torch.tensor(w0, requires_grad=True)
    eopt, topt = ember.optim.SparseAdam([e], **options), torch.optim.SparseAdam([t], **options)
    for step in range(5):
        rows = rng.choice(6, size=3, replace=True)          # a repeated row: its entries add
        values = rng.standard_normal((3, 3))
        values[0, 1] = 0.0                                    # an explicitly stored zero is still "touched"
        index = np.stack([rows]).astype(np.int64)
        e.grad = ember.sparse_coo_tensor(index, values, (6, 3))
        t.grad = torch.sparse_coo_tensor(torch.tensor(index), torch.tensor(values), (6, 3))
        eopt.step()
        topt.step()
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
