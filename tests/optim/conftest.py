"""Fixtures shared by the optimizer tests."""
from __future__ import annotations

import numpy as np
import pytest

from ember.graph.passes.symbolic_xp import Untraceable
from ember.ops.registry import OPS


@pytest.fixture
def torch_sqrt(monkeypatch):
    """ember's sqrt replaced by torch's (MKL's vector sqrt, not correctly rounded) for float32/float64: with it,
    trajectories that take square roots can be compared with torch's bit for bit (see
    test_optimizer_trajectories_bitwise.py::test_torch_cpu_sqrt_is_not_correctly_rounded)."""
    torch = pytest.importorskip("torch")
    op = OPS["sqrt"]
    original = op.impl_no_half

    def impl(xp, x, *args, **kwargs):
        if xp is not np:
            raise Untraceable("torch's sqrt runs as its own node")  # not replayed inside a fused kernel
        if getattr(x, "dtype", None) in (np.float32, np.float64):
            return torch.from_numpy(np.ascontiguousarray(x)).sqrt().numpy().reshape(np.shape(x))  # (0-d stays 0-d)
        return original(xp, x, *args, **kwargs)

    monkeypatch.setattr(op, "impl", impl)
    monkeypatch.setattr(op, "impl_no_half", impl)
