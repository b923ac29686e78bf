"""QuantStub / DeQuantStub / QuantWrapper: where a float model enters and leaves the quantized region.

Before ``convert`` they pass tensors through (``prepare`` gives QuantStub an observer); ``convert`` turns them
into ``nnq.Quantize`` and ``nnq.DeQuantize``.

Example:
    >>> import ember
    >>> from ember.ao.quantization import QuantStub
    >>> QuantStub()(ember.ones(2))
    tensor([1., 1.])
"""
from __future__ import annotations

from typing import Any

from ember.nn.modules.module import Module


class QuantStub(Module):
    """Marks the start of the quantized region (an observer is attached by ``prepare``)."""

    def __init__(self, qconfig: Any = None) -> None:
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x: Any) -> Any:
        return x


class DeQuantStub(Module):
    """Marks the end of the quantized region."""

    def __init__(self, qconfig: Any = None) -> None:
        super().__init__()
        if qconfig:
            self.qconfig = qconfig

    def forward(self, x: Any) -> Any:
        return x


class QuantWrapper(Module):
    """``QuantStub -> module -> DeQuantStub`` around a float module."""

    def __init__(self, module: Module) -> None:
        super().__init__()
        qconfig = getattr(module, "qconfig", None)
        self.add_module("quant", QuantStub(qconfig))
        self.add_module("dequant", DeQuantStub(qconfig))
        self.add_module("module", module)
        self.train(module.training)

    def forward(self, X: Any) -> Any:
        return self.dequant(self.module(self.quant(X)))
