"""Fused quantization-aware training modules (``torch.ao.nn.intrinsic.qat``): LinearReLU, ConvReLU2d, and the
Conv+BatchNorm(+ReLU) modules that train with the BatchNorm folded into the fake-quantized weight.

ConvBn2d follows PyTorch's ``_forward_approximate``: the weight is scaled by ``bn.weight / sqrt(running_var + eps)``
and fake-quantized, the convolution's output divided back by that factor, the conv bias added, then the
BatchNorm applied (batch statistics in training). ``freeze_bn_stats`` / ``update_bn_stats`` switch its BatchNorm
to and from its running statistics.

Example:
    >>> import ember.nn as nn
    >>> from ember.ao.nn.intrinsic.qat import ConvBnReLU2d
    >>> from ember.ao.quantization import get_default_qat_qconfig
    >>> ConvBnReLU2d(3, 4, 3, qconfig=get_default_qat_qconfig("x86")).bn.num_features
    4
"""
from __future__ import annotations

from typing import Any

from ember import creation
from ember.ao.nn import qat as nnqat
from ember.autograd import grad_mode
from ember.nn import functional as F
from ember.nn.modules.normalization import BatchNorm2d
from ember.nn.parameter import Parameter
from ember.nn.utils.fusion import fuse_conv_bn_weights


class LinearReLU(nnqat.Linear):
    """QAT Linear then ReLU."""

    def forward(self, input: Any) -> Any:
        return F.relu(super().forward(input))


class ConvReLU2d(nnqat.Conv2d):
    """QAT Conv2d then ReLU."""

    def forward(self, input: Any) -> Any:
        return F.relu(super().forward(input))


class ConvBn2d(nnqat.Conv2d):
    """QAT Conv2d with its BatchNorm2d folded into the fake-quantized weight (PyTorch's approximate form)."""

    _with_relu = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 dilation: Any = 1, groups: int = 1, bias: bool | None = None, padding_mode: str = "zeros",
                 eps: float = 1e-05, momentum: float = 0.1, freeze_bn: bool = False, qconfig: Any = None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bool(bias),
                         padding_mode, qconfig=qconfig)
        self.bn = BatchNorm2d(out_channels, eps, momentum, True, True)
        self._modules.move_to_end("bn", last=False)  # PyTorch's order: bn, then weight_fake_quant
        self.freeze_bn = freeze_bn if self.training else True

    def reset_running_stats(self) -> None:
        self.bn.reset_running_stats()

    def update_bn_stats(self) -> "ConvBn2d":
        self.freeze_bn = False
        self.bn.training = True
        return self

    def freeze_bn_stats(self) -> "ConvBn2d":
        self.freeze_bn = True
        self.bn.training = False
        return self

    def train(self, mode: bool = True) -> "ConvBn2d":
        self.training = mode
        if not self.freeze_bn:
            for module in self.children():
                module.train(mode)
        return self

    def _forward_approximate(self, input: Any) -> Any:
        running_std = (self.bn.running_var + self.bn.eps).sqrt()
        scale_factor = self.bn.weight / running_std
        scaled_weight = self.weight_fake_quant(self.weight * scale_factor.reshape(-1, 1, 1, 1))
        zero_bias = creation.zeros(self.out_channels, dtype=input.dtype)
        conv = self._conv_forward(input, scaled_weight, zero_bias)
        conv_orig = conv / scale_factor.reshape(1, -1, 1, 1)
        if self.bias is not None:
            conv_orig = conv_orig + self.bias.reshape(1, -1, 1, 1)
        return self.bn(conv_orig)

    def forward(self, input: Any) -> Any:
        out = self._forward_approximate(input)
        return F.relu(out) if self._with_relu else out

    def fold_bn(self) -> None:
        """Fold the running statistics into weight and bias (``convert`` does this, as PyTorch's from_float)."""
        with grad_mode.no_grad():
            weight, bias = fuse_conv_bn_weights(self.weight, self.bias, self.bn.running_mean, self.bn.running_var,
                                                self.bn.eps, self.bn.weight, self.bn.bias)
        self.weight, self.bias = Parameter(weight.detach()), Parameter(bias.detach())

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> "ConvBn2d":
        conv, bn = mod[0], mod[1]
        out = cls(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation,
                  conv.groups, conv.bias is not None, conv.padding_mode, bn.eps, bn.momentum, False, mod.qconfig)
        out.weight, out.bias = conv.weight, conv.bias
        out.bn.weight, out.bn.bias = bn.weight, bn.bias
        out.bn.running_mean, out.bn.running_var = bn.running_mean, bn.running_var
        out.bn.num_batches_tracked = bn.num_batches_tracked
        return out


class ConvBnReLU2d(ConvBn2d):
    """QAT Conv2d + folded BatchNorm2d, then ReLU."""

    _with_relu = True


def freeze_bn_stats(mod: Any) -> None:
    """``model.apply(freeze_bn_stats)``: BatchNorms of QAT Conv+BN modules use their running statistics."""
    if isinstance(mod, ConvBn2d):
        mod.freeze_bn_stats()


def update_bn_stats(mod: Any) -> None:
    if isinstance(mod, ConvBn2d):
        mod.update_bn_stats()


__all__ = ["LinearReLU", "ConvReLU2d", "ConvBn2d", "ConvBnReLU2d", "freeze_bn_stats", "update_bn_stats"]
