"""Dynamically quantized modules (``torch.ao.nn.quantized.dynamic``): float in, float out; qint8 weights, and
the input quantized per call from its own range (fbgemm's ``linear_dynamic``, see kernels.py).

Example:
    >>> import ember
    >>> from ember.ao.nn.quantized.dynamic import Linear
    >>> Linear(4, 2)(ember.ones(3, 4)).shape
    ember.Size([3, 2])
"""
from __future__ import annotations

from typing import Any

from ember import creation
from ember.ao.nn.quantized import kernels, modules as nnq
from ember.ao.nn.quantized.functional import quantize_weight
from ember.ao.qdtypes import qint8
from ember.tensor import Tensor


class Linear(nnq.Linear):
    """Dynamic quantized Linear: ``reduce_range`` (True for fbgemm/x86, PyTorch's default) halves the input's range."""

    _NAME = "DynamicQuantizedLinear"

    def __init__(self, in_features: int, out_features: int, bias_: bool = True, dtype: Any = qint8) -> None:
        super().__init__(in_features, out_features, bias_, dtype)
        self.version = 4

    def forward(self, x: Tensor) -> Tensor:
        if x.is_quantized:
            raise TypeError("dynamic quantized Linear takes a float tensor (it quantizes the input itself)")
        weight = self.weight()
        bias = self.bias()
        out = kernels.linear_dynamic(x.detach().float().numpy(), weight.ints(), kernels.weight_scales(weight),
                                     kernels.weight_zero_points(weight),
                                     None if bias is None else bias.numpy(), reduce_range=True)
        return creation.tensor(out).to(x.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, dtype={self._packed_params.dtype}, "
                f"qscheme={self.weight().qscheme()!r}")

    @classmethod
    def from_float(cls, mod: Any, use_precomputed_fake_quant: bool = False) -> "Linear":
        linear = mod[0] if getattr(mod, "_is_fused", False) else mod
        qconfig = getattr(mod, "qconfig", None)
        if qconfig is None:
            raise AssertionError("dynamic quantized Linear.from_float: the float module must have qconfig defined "
                                 "(quantize_dynamic sets it)")
        weight_observer = qconfig.weight()
        if weight_observer.dtype is not qint8:
            raise NotImplementedError(f"dynamic quantized Linear: weight dtype {weight_observer.dtype!r} is not "
                                      "supported by ember (qint8; float16 weights are not)")
        weight_observer(linear.weight)
        out = cls(linear.in_features, linear.out_features, linear.bias is not None, dtype=qint8)
        out.set_weight_bias(quantize_weight(linear.weight.float(), weight_observer), linear.bias)
        return out


__all__ = ["Linear"]
