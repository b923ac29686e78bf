"""``Linear``, ``Bilinear`` and ``Identity``.

Example:
    >>> import ember
    >>> ember.nn.Linear(4, 2)(ember.randn(3, 4)).shape
    ember.Size([3, 2])
"""
from __future__ import annotations

import math
from typing import Any

from ember import creation
from ember.nn import functional as F, init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor
from ember.ops.linalg import einsum


def _factory(device: Any, dtype: Any) -> dict:
    return {"device": device, "dtype": dtype}


class Identity(Module):
    """Returns its input unchanged (accepts and ignores any constructor arguments)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape (out_features, in_features).

    Initialized as PyTorch: weight ~ kaiming_uniform_(a=sqrt(5)) i.e. U(-1/sqrt(in), 1/sqrt(in)), bias the same.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in_features, **_factory(device, dtype)))
        if bias:
            self.bias = Parameter(creation.empty(out_features, **_factory(device, dtype)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y[..., k] = x1 @ weight[k] @ x2 + bias[k]`` with weight (out, in1, in2)."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features, **_factory(device, dtype)))
        if bias:
            self.bias = Parameter(creation.empty(out_features, **_factory(device, dtype)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        out = einsum("...i,kij,...j->...k", input1, self.weight, input2)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
