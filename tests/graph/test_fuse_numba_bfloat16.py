"""Numba cannot take bfloat16 arrays (an ml_dtypes extension type): a fused group over bfloat16 values
must run as NumPy calls instead of crashing at its first call (it raised numba's TypingError before)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.passes import fuse_numba

pytest.importorskip("numba")
pytest.importorskip("ml_dtypes")


def test_big_bfloat16_chain_compiles_and_equals_eager():
    f = ember.compile(lambda x: ((x * 2 + 1).exp() * x - 3).sin())
    x = ember.randn(300_000).to(ember.bfloat16)  # big enough that fusion wants a Numba loop
    np.testing.assert_array_equal(f(x).float().numpy(), ((x * 2 + 1).exp() * x - 3).sin().float().numpy())


def test_every_group_skips_bfloat16_casts_and_arrays():
    with fuse_numba.every_group():
        f = ember.compile(lambda x: (x.float() * 3 + 1).to(ember.bfloat16))
        x = ember.randn(64).to(ember.bfloat16)
        np.testing.assert_array_equal(f(x).float().numpy(), (x.float() * 3 + 1).to(ember.bfloat16).float().numpy())
    assert not fuse_numba.native_dtypes([ember.bfloat16.np]) and fuse_numba.native_dtypes([np.float32, np.bool_])
