"""torchvision's ``models._utils``: ``IntermediateLayerGetter`` (the backbone wrapper of detection and segmentation
programs, DETR's among them) and the small helpers model code imports from there.

Example:
    >>> import ember
    >>> from ember.vision.models import resnet18
    >>> from ember.vision.models._utils import IntermediateLayerGetter
    >>> body = IntermediateLayerGetter(resnet18(), return_layers={"layer1": "feat1", "layer3": "feat3"})
    >>> [(k, tuple(v.shape)) for k, v in body(ember.randn(1, 3, 64, 64)).items()]
    [('feat1', (1, 64, 16, 16)), ('feat3', (1, 256, 4, 4))]
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ember import nn
from ember.vision.models._api import make_divisible as _make_divisible  # noqa: F401 - torchvision's name

__all__ = ["IntermediateLayerGetter"]


def _ovewrite_named_param(kwargs: dict[str, Any], param: str, new_value: Any) -> None:
    """torchvision's: weights fix some arguments; a conflicting explicit value raises."""
    if param in kwargs and kwargs[param] != new_value:
        raise ValueError(f"The parameter '{param}' expected value {new_value} but got {kwargs[param]} instead.")
    kwargs[param] = new_value


def _ovewrite_value_param(param: str, actual: Any, expected: Any) -> Any:
    """torchvision's check that a value fixed by pretrained weights was not given otherwise."""
    if actual is not None and actual != expected:
        raise ValueError(f"The parameter '{param}' expected value {expected} but got {actual} instead.")
    return expected


class IntermediateLayerGetter(nn.ModuleDict):
    """The model's direct children up to the last one named in ``return_layers``; ``forward`` runs them in order
    and returns an ordered dict ``{return_layers[name]: output of child name}``. Only children registered in the
    order they are used in ``forward`` give meaningful results (as in torchvision)."""

    _version = 2

    def __init__(self, model: nn.Module, return_layers: dict[str, str]) -> None:
        children = [name for name, _ in model.named_children()]
        if not set(return_layers).issubset(children):
            raise ValueError("return_layers are not present in model")
        original = return_layers
        pending = {str(k): str(v) for k, v in return_layers.items()}
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        for name, module in model.named_children():
            layers[name] = module
            pending.pop(name, None)
            if not pending:
                break
        super().__init__(layers)
        self.return_layers = original

    def forward(self, x: Any) -> OrderedDict:
        out: OrderedDict[str, Any] = OrderedDict()
        for name, module in self.items():
            x = module(x)
            if name in self.return_layers:
                out[self.return_layers[name]] = x
        return out
