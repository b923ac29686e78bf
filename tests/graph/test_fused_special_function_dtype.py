"""A fused special function keeps the eager dtype.

SciPy's ``erf`` returns float64 for a float16 input; eager ``ember.erf`` casts back (``astype(x.dtype)``),
but the symbolic namespace once dropped that cast as a no-op (its witness said float16 already), so a
compiled ``erf(x) + erf(x)`` on float16 returned a float64 tensor. Found by the CUDA kernel generator's
tests (tests/backends/test_cuda_codegen.py), which compare each kernel's dtype with the generic replay.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember


@pytest.mark.parametrize("dtype", [ember.float16, ember.bfloat16, ember.float32])
def test_compiled_erf_keeps_dtype(dtype):
    x = ember.tensor(np.linspace(-2, 2, 9), dtype=dtype)
    f = ember.compile(lambda x: ember.erf(x) + ember.erf(x), fallback="raise")
    for _ in range(3):
        got = f(x)
    want = ember.erf(x) + ember.erf(x)
    assert got.dtype is want.dtype is dtype
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())
