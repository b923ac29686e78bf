"""Adam's NumPy update run block by block (cache-sized blocks) equals the whole-array update and torch."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_kernels
from ember.optim import optimizer as optimizer_module


@pytest.fixture
def numpy_kernels():
    saved = _config.CPU_KERNELS
    _config.CPU_KERNELS = "numpy"
    cpu_kernels.reset()
    yield
    _config.CPU_KERNELS = saved
    cpu_kernels.reset()


def _adam_steps(block: int, monkeypatch, steps: int = 3) -> np.ndarray:
    monkeypatch.setattr(optimizer_module, "_CACHE_BLOCK", block)
    rng = np.random.default_rng(0)
    p = ember.nn.Parameter(ember.tensor(rng.standard_normal(300_001).astype(np.float32)))
    opt = ember.optim.AdamW([p], lr=1e-2, weight_decay=0.1)
    for k in range(steps):
        p.grad = ember.tensor(rng.standard_normal(300_001).astype(np.float32))
        opt.step()
    return p.detach().numpy().copy()


def test_blocked_update_equals_whole_array_update_and_torch(numpy_kernels, monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    blocked = _adam_steps(1 << 14, monkeypatch)   # 19 blocks, the last one partial
    whole = _adam_steps(1 << 40, monkeypatch)
    np.testing.assert_array_equal(blocked, whole)
    rng = np.random.default_rng(0)
    tp = torch.nn.Parameter(torch.tensor(rng.standard_normal(300_001).astype(np.float32)))
    topt = torch.optim.AdamW([tp], lr=1e-2, weight_decay=0.1)
    for _ in range(3):
        tp.grad = torch.tensor(rng.standard_normal(300_001).astype(np.float32))
        topt.step()
    np.testing.assert_allclose(blocked, tp.detach().numpy(), rtol=1e-5, atol=1e-6)
