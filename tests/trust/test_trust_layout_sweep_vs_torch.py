"""The layout sweep (tests/trust/trust_layout_sweep.py): ops x dtypes x layouts x special values vs torch 2.13.

Default: a fixed spread of the cases, in a few grouped tests (every op, dtype and layout appears); ``-m slow``: all
of them. A difference fails unless the sweep's ALLOW names it as a decision.
"""
from __future__ import annotations

import os
import sys
import warnings

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
pytest.importorskip("torch")

import trust_layout_sweep as S  # noqa: E402


def _check_all(cases):
    problems = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for case in cases:
            problem = S.check(*case)
            if problem:
                problems.append(problem)
    assert not problems, "\n".join(problems[:20])


_SAMPLE = S.sample()


@pytest.mark.parametrize("part", range(4))
def test_layout_sweep_sample_vs_torch(part):
    _check_all(_SAMPLE[part::4])


@pytest.mark.slow
@pytest.mark.parametrize("layout", S.LAYOUTS)
def test_layout_sweep_full_vs_torch(layout):
    _check_all([c for c in S.cases() if c[2] == layout])


def test_sweep_can_fail():
    """The comparison sees a sign of zero, a NaN and a dtype (a sweep that cannot fail proves nothing)."""
    import numpy as np

    a = [(np.array([0.0, 1.0]), "float32", (2,))]
    assert S.compare(a, [(np.array([-0.0, 1.0]), "float32", (2,))], "add", "float32")
    assert S.compare(a, [(np.array([np.nan, 1.0]), "float32", (2,))], "add", "float32")
    assert S.compare(a, [(np.array([0.0, 1.0]), "float64", (2,))], "add", "float32")
    assert S.compare(a, "raises RuntimeError: x", "add", "float32")
