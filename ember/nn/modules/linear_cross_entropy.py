"""``LinearCrossEntropyLoss``: a classifier head and its cross entropy in one module (PyTorch's name).

The head is a plain ``Linear(in_features, num_classes * prod(out_features))`` stored flat (so checkpoints
match PyTorch's ``linear.weight``/``linear.bias``) and reshaped in ``forward``; pass
``options=LinearCrossEntropyOptions()`` to compute the loss in row chunks without the full logits.

Example:
    >>> import ember
    >>> head = ember.nn.LinearCrossEntropyLoss(8, 100, options=ember.nn.LinearCrossEntropyOptions())
    >>> head(ember.randn(4, 8), ember.tensor([0, 5, 99, 7])).shape
    ember.Size([])
"""
from __future__ import annotations

import math
from typing import Any

from ember.nn._linear_cross_entropy import LinearCrossEntropyOptions, linear_cross_entropy
from ember.nn.modules.linear import Linear
from ember.nn.modules.loss import _WeightedLoss


class LinearCrossEntropyLoss(_WeightedLoss):
    """``cross_entropy(self.linear(input), target)`` with PyTorch's arguments (see
    :func:`ember.nn.functional.linear_cross_entropy`)."""

    def __init__(self, in_features: int, num_classes: int, *, out_features: tuple = (), bias: bool = False,
                 device: Any = None, dtype: Any = None, reduction: str = "mean", weight: Any = None,
                 ignore_index: int | None = None, label_smoothing: float = 0.0,
                 options: LinearCrossEntropyOptions | None = None) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"LinearCrossEntropyLoss: expected weight shape to be {(num_classes,)}, got "
                               f"{tuple(weight.shape)}")
        if not 0.0 <= label_smoothing <= 1.0:
            raise RuntimeError(f"LinearCrossEntropyLoss: expected label_smoothing to be in range [0, 1], got "
                               f"{label_smoothing}")
        super().__init__(weight=weight, reduction=reduction)
        self.num_classes = num_classes
        self.out_features = tuple(out_features)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing
        self.linear = Linear(in_features, math.prod(self.out_features, start=num_classes), bias=bias, device=device,
                             dtype=dtype)
        self.options = options

    def extra_repr(self) -> str:
        return (f"in_features={self.linear.in_features}, num_classes={self.num_classes}, "
                f"out_features={self.out_features}, bias={self.linear.bias is not None}, reduction={self.reduction}, "
                f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, options={self.options}")

    def forward(self, input: Any, target: Any) -> Any:
        weight = self.linear.weight.reshape(self.num_classes, *self.out_features, self.linear.in_features)
        bias = None if self.linear.bias is None else self.linear.bias.reshape(self.num_classes, *self.out_features)
        return linear_cross_entropy(input, weight, target, linear_bias=bias, weight=self.weight,
                                    reduction=self.reduction, ignore_index=self.ignore_index,
                                    label_smoothing=self.label_smoothing, options=self.options)
