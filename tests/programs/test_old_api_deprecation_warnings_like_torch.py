"""Old PyTorch spellings still run in torch 2.13 with a deprecation warning, and now in ember with the same words and
category (ember ran them silently): ``nn.init.xavier_uniform`` & co. (FutureWarning), ``F.upsample`` /
``upsample_nearest`` / ``upsample_bilinear`` (UserWarning), ``nn.utils.clip_grad_norm`` (FutureWarning),
``Variable(x, volatile=True)`` (UserWarning). Seen in pytorch/tutorials' stored NLP tutorials and older scripts."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember

CALLS = {
    "init.uniform": lambda lib: lib.nn.init.uniform(lib.empty(2, 2)).shape,
    "init.normal": lambda lib: lib.nn.init.normal(lib.empty(2, 2)).shape,
    "init.constant": lambda lib: lib.nn.init.constant(lib.empty(3), 0.5).tolist(),
    "init.xavier_uniform": lambda lib: lib.nn.init.xavier_uniform(lib.empty(2, 2)).shape,
    "init.xavier_normal": lambda lib: lib.nn.init.xavier_normal(lib.empty(2, 2)).shape,
    "init.kaiming_uniform": lambda lib: lib.nn.init.kaiming_uniform(lib.empty(2, 2)).shape,
    "init.kaiming_normal": lambda lib: lib.nn.init.kaiming_normal(lib.empty(2, 2)).shape,
    "init.orthogonal": lambda lib: lib.nn.init.orthogonal(lib.empty(2, 2)).shape,
    "F.upsample": lambda lib: lib.nn.functional.upsample(lib.arange(4.0).reshape(1, 1, 2, 2), scale_factor=2).sum(),
    "F.upsample_nearest": lambda lib: lib.nn.functional.upsample_nearest(lib.ones(1, 1, 2, 2), scale_factor=2).sum(),
    "F.upsample_bilinear": lambda lib: lib.nn.functional.upsample_bilinear(
        lib.arange(4.0).reshape(1, 1, 2, 2), scale_factor=2).sum(),
    "clip_grad_norm": lambda lib: lib.nn.utils.clip_grad_norm([lib.nn.Parameter(lib.ones(2))], 1.0),
    "Variable_volatile": lambda lib: lib.autograd.Variable(lib.ones(2), volatile=True).sum(),
    "Variable_plain": lambda lib: lib.autograd.Variable(lib.ones(2)).sum(),
    "init.xavier_uniform_": lambda lib: lib.nn.init.xavier_uniform_(lib.empty(2, 2)).shape,
}


def _record(lib, call):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        value = CALLS[call](lib)
    if hasattr(value, "item"):
        value = round(float(value), 5)
    return (tuple(value) if hasattr(value, "__len__") else value), [(m.category, str(m.message)) for m in w]


@pytest.mark.parametrize("call", sorted(CALLS))
def test_old_spelling_warns_like_torch(call):
    assert _record(ember, call) == _record(torch, call)
