"""Helpers the model builders share (torchvision's ``models._utils``): ``IntermediateLayerGetter``.

Example:
    >>> import ember
    >>> from ember.vision.models import resnet18
    >>> from ember.vision.models._utils import IntermediateLayerGetter
    >>> getter = IntermediateLayerGetter(resnet18(), {"layer1": "feat1", "layer3": "feat2"})
    >>> [(k, tuple(v.shape)) for k, v in getter(ember.randn(1, 3, 64, 64)).items()]
    [('feat1', (1, 64, 16, 16)), ('feat2', (1, 256, 4, 4))]
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ember import nn

__all__ = ["IntermediateLayerGetter"]


class IntermediateLayerGetter(nn.ModuleDict):
    """A model's children up to the last one named in ``return_layers``, run in order; returns the outputs of
    the named children under their new names. Children must be used in the order they were registered and
    only once (what torchvision assumes too); the model's own ``forward`` is not called."""

    _version = 2

    def __init__(self, model: nn.Module, return_layers: dict[str, str]) -> None:
        if not set(return_layers).issubset(name for name, _ in model.named_children()):
            raise ValueError("return_layers are not present in model")
        wanted = {str(k): str(v) for k, v in return_layers.items()}
        remaining = dict(wanted)
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            remaining.pop(name, None)
            if not remaining:
                break
        super().__init__(layers)
        self.return_layers = wanted

    def forward(self, x: Any) -> "OrderedDict[str, Any]":
        out: OrderedDict[str, Any] = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out
