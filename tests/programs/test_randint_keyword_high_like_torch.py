"""``torch.randint_like(p, high=2)`` (torch-optimizer's Adahessian draws its Rademacher vectors so) and
``torch.randint(high=5, size=...)``: torch's ``high`` overloads by keyword. ember required ``low`` (TypeError).
Values are torch's (ember's random numbers are torch's)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "like high=": lambda lib, x: lib.randint_like(x, high=2, memory_format=lib.preserve_format),
    "like high": lambda lib, x: lib.randint_like(x, 7),
    "like low high": lambda lib, x: lib.randint_like(x, 3, 9),
    "like low, high=": lambda lib, x: lib.randint_like(x, 3, high=9, dtype=lib.int64),
    "randint high= size=": lambda lib, x: lib.randint(high=5, size=(4,)),
    "randint high size": lambda lib, x: lib.randint(5, (4,)),
    "randint low high= size=": lambda lib, x: lib.randint(2, high=5, size=(2, 2)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_randint_keyword_forms_like_torch(name):
    outs = []
    for lib in (torch, ember):
        lib.manual_seed(5)
        out = CALLS[name](lib, lib.zeros(2, 3))
        outs.append((out.numpy(), str(out.dtype).split(".")[-1]))
    np.testing.assert_array_equal(outs[1][0], outs[0][0])
    assert outs[1][1] == outs[0][1]


def test_randint_like_without_high_raises():
    for lib in (torch, ember):
        with pytest.raises(TypeError):
            lib.randint_like(lib.zeros(2))
