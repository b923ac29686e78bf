"""``linspace`` equals torch's bit for bit in every real dtype (ember/ops/linspace_values.py replays torch's CPU
kernel: one fused multiply-add per value, counted from both ends, half precision operation by operation), and
refuses the ends torch refuses. The default test draws a fast seeded sample; the slow one sweeps 3000 cases (the
OpInfo sweep found 113 of 3000 integer results one off before: ``linspace(79, -23, 1283, dtype=int64)[641]``).
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

DTYPES = ("int64", "int32", "int16", "int8", "uint8", "float32", "float64", "float16", "bfloat16")
SPECIAL = (0.0, -0.0, 127.0, 255, -128, 70000.0, float("inf"), float("-inf"), float("nan"), 2 ** 40, -(2 ** 62))


def _value(rng: random.Random) -> object:
    return rng.choice([rng.uniform(-300, 300), rng.randint(-200, 200), rng.uniform(-1e6, 1e6), rng.choice(SPECIAL)])


def _run(lib, start, end, steps, dtype):
    try:
        out = lib.linspace(start, end, steps, dtype=getattr(lib, dtype))
    except (RuntimeError, ValueError, OverflowError) as error:
        return "raises", str(error)
    return "values", out.float().numpy() if dtype == "bfloat16" else out.numpy()


def _check(start, end, steps, dtype) -> None:
    kind_t, got_t = _run(torch, start, end, steps, dtype)
    kind_e, got_e = _run(ember, start, end, steps, dtype)
    where = f"linspace({start!r}, {end!r}, {steps}, dtype={dtype})"
    assert kind_e == kind_t, f"{where}: torch {kind_t} ({got_t}), ember {kind_e} ({got_e})"
    if kind_t == "values":
        assert got_e.dtype == got_t.dtype, where
        np.testing.assert_array_equal(got_e, got_t, err_msg=where)  # NaN positions equal; signs of zero below
        finite = ~np.isnan(got_t)
        assert np.array_equal(np.signbit(got_e[finite]), np.signbit(got_t[finite])), where


def _cases(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        steps = rng.choice([0, 1, 2, 3, rng.randint(0, 100), rng.randint(0, 3000)])
        yield _value(rng), _value(rng), steps, rng.choice(DTYPES)


@pytest.mark.parametrize("case", [
    (79, -23, 1283, "int64"),          # the exact-integer midpoint torch's fused multiply-add puts below 28
    (-61, 123.77642579981307, 254, "int16"),
    (4.3, 0, 50, "uint8"),             # the ends are truncated first
    (-3, 5, 5, "uint8"),               # a negative int wraps (253); -3.5 raises
    (-3.5, 5, 5, "uint8"),
    (127.9, 0, 3, "int8"),             # above int8's range: torch raises
    (float("nan"), 1, 3, "int32"),
    (13.840774964442446, 60.45301223363671, 2029, "float32"),  # np.linspace cast down differed in 738 values
    (-92.59374624612178, 73, 56, "float16"),  # the end goes double -> float -> half (a tie rounds to even)
    (70000.0, 0, 1, "float16"),        # fill_ does not check half's range: inf
    (70000.0, 0, 2, "float16"),        # the kernel does: raises
    (-7.3, 12345.6, 40000, "int64"),   # several parallel chunks in torch
])
def test_linspace_named_points_equal_torch(case):
    _check(*case)


def test_linspace_seeded_sample_equals_torch():
    for case in _cases(18, 150):
        _check(*case)


@pytest.mark.slow
def test_linspace_sweep_equals_torch():
    for case in _cases(2026, 3000):
        _check(*case)
