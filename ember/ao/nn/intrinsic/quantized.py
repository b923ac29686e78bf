"""Quantized fused modules (``torch.ao.nn.intrinsic.quantized``): Linear+ReLU and Conv2d+ReLU, the ReLU applied
in the requantization (the output is clamped at its zero point), as fbgemm does.

Example:
    >>> from ember.ao.nn.intrinsic.quantized import LinearReLU
    >>> LinearReLU(4, 2).scale
    1.0
"""
from __future__ import annotations

from ember.ao.nn.quantized import modules as nnq


class LinearReLU(nnq.Linear):
    _NAME = "QuantizedLinearReLU"
    _relu = True


class ConvReLU2d(nnq.Conv2d):
    _NAME = "QuantizedConvReLU2d"
    _relu = True


__all__ = ["LinearReLU", "ConvReLU2d"]
