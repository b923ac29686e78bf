"""Quantization-aware training modules (``torch.ao.nn.qat``): float Linear/Conv2d whose weight passes through a
fake quantize (``weight_fake_quant``) on every forward, so training sees the rounding it will get.

Example:
    >>> import ember.nn as nn
    >>> from ember.ao.nn.qat import Linear
    >>> from ember.ao.quantization import get_default_qat_qconfig
    >>> Linear(3, 2, qconfig=get_default_qat_qconfig("x86")).weight.shape
    ember.Size([2, 3])
"""
from __future__ import annotations

from typing import Any

from ember.nn import functional as F
from ember.nn.modules.conv import Conv2d as _FloatConv2d
from ember.nn.modules.linear import Linear as _FloatLinear


class Linear(_FloatLinear):
    """``F.linear(x, weight_fake_quant(weight), bias)``."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, qconfig: Any = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def forward(self, input: Any) -> Any:
        return F.linear(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> "Linear":
        """A QAT module sharing the float module's parameters (``prepare_qat`` swaps it in)."""
        linear = mod[0] if getattr(mod, "_is_fused", False) else mod
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, qconfig=mod.qconfig)
        out.weight, out.bias = linear.weight, linear.bias
        return out

    def to_float(self) -> _FloatLinear:
        out = _FloatLinear(self.in_features, self.out_features, self.bias is not None)
        out.weight, out.bias = self.weight, self.bias
        return out


class Conv2d(_FloatConv2d):
    """``conv2d(x, weight_fake_quant(weight), bias)``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 qconfig: Any = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride=stride, padding=padding, dilation=dilation,
                         groups=groups, bias=bias, padding_mode=padding_mode)
        if qconfig is None:
            raise AssertionError("qconfig must be provided for QAT module")
        self.qconfig = qconfig
        self.weight_fake_quant = qconfig.weight()

    def _conv_forward(self, input: Any, weight: Any, bias: Any) -> Any:
        x, padding = self._padded(input)
        return F.conv2d(x, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input: Any) -> Any:
        return self._conv_forward(input, self.weight_fake_quant(self.weight), self.bias)

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> "Conv2d":
        conv = mod[0] if getattr(mod, "_is_fused", False) else mod
        out = cls(conv.in_channels, conv.out_channels, conv.kernel_size, stride=conv.stride, padding=conv.padding,
                  dilation=conv.dilation, groups=conv.groups, bias=conv.bias is not None,
                  padding_mode=conv.padding_mode, qconfig=mod.qconfig)
        out.weight, out.bias = conv.weight, conv.bias
        return out


__all__ = ["Linear", "Conv2d"]
