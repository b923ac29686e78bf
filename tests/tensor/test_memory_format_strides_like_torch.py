"""Strides of ``to``/``contiguous``/``clone``/``empty``/``empty_like`` with a memory format, and
``is_contiguous(memory_format=)``, equal torch's for shapes with size-1 dims (``N1HW`` images, ``NC11`` pooled
maps): torch gives a fresh channels-last tensor c10's strides (an ``N1HW`` one has channel stride 1), and
``x.to(memory_format=f)`` copies unless ``f`` is the format its strides suggest. Empty tensors are left out: NumPy
keeps no strides for them (docs/pytorch-compat.md)."""
from __future__ import annotations

import pytest
import torch

import ember

SHAPES = [(2, 3, 4, 5), (1, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 5), (2, 3, 4, 1), (1, 1, 1, 1), (1, 3, 1, 1),
          (2, 1, 1, 1), (1, 1, 4, 5), (2, 3, 1, 1), (2, 3, 4, 5, 6), (1, 3, 1, 5, 6), (2, 1, 4, 5, 6),
          (2, 3, 1, 1, 1), (1, 1, 1, 1, 1)]
FORMATS = ["contiguous_format", "channels_last", "channels_last_3d", "preserve_format"]


def _observe(lib, shape, target: str, source: str) -> list:
    fmt = getattr(lib, target)
    x = lib.arange(float(torch.Size(shape).numel())).reshape(shape)
    if source != "plain":
        x = x.to(memory_format=getattr(lib, "channels_last" if len(shape) == 4 else "channels_last_3d"))
    seen = []
    for make in (lambda: x.to(memory_format=fmt), lambda: x.contiguous(memory_format=fmt),
                 lambda: x.clone(memory_format=fmt), lambda: lib.empty_like(x, memory_format=fmt),
                 lambda: lib.empty(shape, memory_format=fmt), lambda: x.double().to(memory_format=fmt)):
        try:
            y = make()
        except RuntimeError:
            seen.append("raises")
            continue
        seen.append((y.stride(), y.to(memory_format=fmt) is y,
                     [y.is_contiguous(memory_format=getattr(lib, m)) for m in FORMATS[:3]]))
    return seen


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("source", ["plain", "channels_last"])
def test_memory_format_strides_like_torch(shape, source):
    for target in FORMATS:
        assert _observe(ember, shape, target, source) == _observe(torch, shape, target, source), target
