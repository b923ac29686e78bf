"""``torch.finfo``/``torch.iinfo`` values and printouts as torch 2.13's (found by a probe of the layer-parameters
tutorial's calls): ``resolution`` is exactly ``10 ** -digits10`` (ember gave NumPy's float32 1e-06,
9.999999974752427e-07), and the printout shows 6 significant digits as torch's C++ stream does."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTS = ["uint8", "int8", "int16", "int32", "int64"]


@pytest.mark.parametrize("name", FLOATS)
def test_finfo_values_and_printout(name):
    e, t = ember.finfo(getattr(ember, name)), torch.finfo(getattr(torch, name))
    for attr in ("resolution", "eps", "max", "min", "tiny", "smallest_normal", "bits"):
        assert getattr(e, attr) == getattr(t, attr), attr
    assert repr(e) == repr(t)
    assert str(e) == str(t)


@pytest.mark.parametrize("name", INTS)
def test_iinfo_printout(name):
    e, t = ember.iinfo(getattr(ember, name)), torch.iinfo(getattr(torch, name))
    assert (e.min, e.max, e.bits) == (t.min, t.max, t.bits)
    assert repr(e) == repr(t)
