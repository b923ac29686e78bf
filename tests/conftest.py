"""Shared fixtures for the core test suites: a seeded NumPy generator and ember's default state.

Example:
    def test_something(rng):
        x = rng.standard_normal((2, 3))
"""
from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

import ember


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move everything alive after collection (torch, the op tables, ~30,000 test items) out of the cyclic collector's
    reach: a full collection would walk it all again and again for the whole run. Objects made by tests are collected
    as before."""
    gc.collect()
    gc.freeze()


@pytest.fixture
def rng() -> np.random.Generator:
    """A fresh, seeded NumPy generator per test, so test order never changes the data."""
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _restore_ember_defaults():
    """Tests that change the default dtype or grad mode cannot leak the change into others."""
    dtype, grad = ember.get_default_dtype(), ember.is_grad_enabled()
    torch = sys.modules.get("torch")
    validate = torch.distributions.Distribution._validate_args if torch is not None else None
    yield
    ember.set_default_dtype(dtype)
    ember.autograd.grad_mode.STATE.enabled = grad
    # Anything that starts torch's dynamo (torch.compile, torch.cond, flex_attention's compiled path) switches
    # off torch.distributions' argument validation for the whole process; tests comparing validation errors
    # with torch's need it back.
    if torch is not None and validate is not None:
        torch.distributions.Distribution.set_default_validate_args(validate)
