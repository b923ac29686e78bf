"""Fused float modules (``torch.ao.nn.intrinsic``): what ``fuse_modules`` puts in place of Conv+BN+ReLU runs,
so quantization treats them as one op. Each is a ``Sequential`` of the modules it fuses.

Example:
    >>> import ember.nn as nn
    >>> from ember.ao.nn.intrinsic import LinearReLU
    >>> LinearReLU(nn.Linear(2, 3), nn.ReLU())[0].out_features
    3
"""
from __future__ import annotations

from typing import Any

from ember.nn.modules.container import Sequential


class _FusedModule(Sequential):
    _is_fused = True

    def __init__(self, *modules: Any) -> None:
        super().__init__(*modules)


class LinearReLU(_FusedModule):
    """Linear then ReLU."""


class ConvReLU2d(_FusedModule):
    """Conv2d then ReLU."""


class ConvBn2d(_FusedModule):
    """Conv2d then BatchNorm2d (kept apart for quantization-aware training)."""


class ConvBnReLU2d(_FusedModule):
    """Conv2d, BatchNorm2d, ReLU (kept apart for quantization-aware training)."""


class BNReLU2d(_FusedModule):
    """BatchNorm2d then ReLU."""


class LinearBn1d(_FusedModule):
    """Linear then BatchNorm1d (kept apart for quantization-aware training)."""


__all__ = ["LinearReLU", "ConvReLU2d", "ConvBn2d", "ConvBnReLU2d", "BNReLU2d", "LinearBn1d"]
