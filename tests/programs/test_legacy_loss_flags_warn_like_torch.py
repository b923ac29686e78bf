"""The deprecated ``size_average`` / ``reduce`` loss flags warn with torch's words and pick torch's reduction
(sgrvinod's SSD tutorial: ``nn.CrossEntropyLoss(reduce=False)``; torch prints the warning, ember did not)."""
from __future__ import annotations

import warnings

import pytest
import torch

import ember

FLAGS = [(None, False), (False, None), (True, None), (None, True), (False, False), (True, False), (False, True)]


def _warnings_and_reduction(lib, make):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        reduction = make(lib)
    return reduction, [str(x.message) for x in w]


@pytest.mark.parametrize("size_average,reduce", FLAGS)
@pytest.mark.parametrize("cls", ["CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCELoss"])
def test_module_flags_like_torch(cls, size_average, reduce):
    def make(lib):
        return getattr(lib.nn, cls)(size_average=size_average, reduce=reduce).reduction
    assert _warnings_and_reduction(ember, make) == _warnings_and_reduction(torch, make)


@pytest.mark.parametrize("size_average,reduce", FLAGS)
def test_functional_flags_like_torch(size_average, reduce):
    def make(lib):
        x = lib.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 3.0]])
        out = lib.nn.functional.cross_entropy(x, lib.tensor([2, 0]), size_average=size_average, reduce=reduce)
        return [round(v, 5) for v in out.reshape(-1).tolist()]
    assert _warnings_and_reduction(ember, make) == _warnings_and_reduction(torch, make)


def test_no_flags_no_warning():
    for lib in (ember, torch):
        assert _warnings_and_reduction(lib, lambda lib: lib.nn.MSELoss().reduction) == ("mean", [])
