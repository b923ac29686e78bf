"""Fold an eval-mode BatchNorm into the preceding convolution or linear layer (``torch.nn.utils.fusion``).

Example:
    >>> import ember
    >>> conv, bn = ember.nn.Conv2d(2, 3, 3).eval(), ember.nn.BatchNorm2d(3).eval()
    >>> fused = ember.nn.utils.fuse_conv_bn_eval(conv, bn)
    >>> x = ember.randn(1, 2, 5, 5)
    >>> bool(ember.allclose(fused(x), bn(conv(x)), atol=1e-6))
    True
"""
from __future__ import annotations

import copy
from typing import Any

from ember.creation import ones_like, zeros_like
from ember.ops.elementwise import rsqrt
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def fuse_conv_bn_weights(conv_w: Tensor, conv_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                         bn_w: Tensor | None, bn_b: Tensor | None, transpose: bool = False) -> tuple:
    dtype = conv_w.dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    inv_std = rsqrt(bn_rv + bn_eps)
    shape = [1] * conv_w.ndim
    shape[1 if transpose else 0] = -1
    weight = (conv_w * (bn_w * inv_std).reshape(shape)).to(dtype)
    # PyTorch's order of operations, so the folded bias is the same float32 value (quantized models compare bits)
    bias = ((conv_b - bn_rm) * inv_std * bn_w + bn_b).to(dtype)
    return Parameter(weight.detach(), conv_w.requires_grad), Parameter(bias.detach(), conv_b.requires_grad)


def fuse_conv_bn_eval(conv: Module, bn: Module, transpose: bool = False) -> Module:
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w: Tensor, linear_b: Tensor | None, bn_rm: Tensor, bn_rv: Tensor, bn_eps: float,
                           bn_w: Tensor, bn_b: Tensor) -> tuple:
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * rsqrt(bn_rv + bn_eps)
    weight = linear_w * scale.unsqueeze(-1)
    bias = (linear_b - bn_rm) * scale + bn_b
    return Parameter(weight.detach(), linear_w.requires_grad), Parameter(bias.detach(), linear_b.requires_grad)


def fuse_linear_bn_eval(linear: Module, bn: Module) -> Module:
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Module:
    """Build a module without running its parameter initialization (values are whatever ``empty`` holds)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    original = getattr(module_cls, "reset_parameters", None)
    if original is None:
        return module_cls(*args, **kwargs)
    module_cls.reset_parameters = lambda self: None
    try:
        return module_cls(*args, **kwargs)
    finally:
        module_cls.reset_parameters = original


def convert_conv2d_weight_memory_format(module: Module, memory_format: Any) -> Module:
    """Accepted for channels_last code paths: ember's convolutions use one layout, so nothing changes."""
    return module


convert_conv3d_weight_memory_format = convert_conv2d_weight_memory_format
