"""Quantized fused modules (``torch.ao.nn.intrinsic.quantized``): Linear+ReLU and Conv2d+ReLU, the ReLU applied
in the requantization (the output is clamped at its zero point), as fbgemm does.

Example:
    >>> from ember.ao.nn.intrinsic.quantized import LinearReLU
    >>> LinearReLU(4, 2).scale
    1.0
"""
from __future__ import annotations

from typing import Any

from ember.ao.nn.quantized import modules as nnq
from ember.ao.qdtypes import qint8


class LinearReLU(nnq.Linear):
    _NAME = "QuantizedLinearReLU"
    _relu = True

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: Any = qint8) -> None:
        super().__init__(in_features, out_features, bias, dtype)


class ConvReLU2d(nnq.Conv2d):
    _NAME = "QuantizedConvReLU2d"
    _relu = True


__all__ = ["LinearReLU", "ConvReLU2d"]
