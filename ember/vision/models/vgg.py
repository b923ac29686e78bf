"""VGG 11/13/16/19 with and without batch norm (torchvision's ``models.vgg``: same names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import vgg11
    >>> vgg11(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

from typing import Any, Callable

import ember
from ember import nn
from ember.vision.models._api import (
    WeightsEnum, handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["VGG", "make_layers", "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
           "VGG11_Weights", "VGG11_BN_Weights", "VGG13_Weights", "VGG13_BN_Weights", "VGG16_Weights",
           "VGG16_BN_Weights", "VGG19_Weights", "VGG19_BN_Weights"]

VGG11_Weights = make_weights_enum("VGG11_Weights", __name__)
VGG11_BN_Weights = make_weights_enum("VGG11_BN_Weights", __name__)
VGG13_Weights = make_weights_enum("VGG13_Weights", __name__)
VGG13_BN_Weights = make_weights_enum("VGG13_BN_Weights", __name__)
VGG16_Weights = make_weights_enum("VGG16_Weights", __name__)
VGG16_BN_Weights = make_weights_enum("VGG16_BN_Weights", __name__)
VGG19_Weights = make_weights_enum("VGG19_Weights", __name__)
VGG19_BN_Weights = make_weights_enum("VGG19_BN_Weights", __name__)

# Channel counts of the 3x3 convs per configuration; "M" is a 2x2 max-pool (the paper's A, B, D, E).
CONFIGS: dict[str, list[Any]] = {
    "A": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "B": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "D": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "E": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    """``features`` (convs), an adaptive pool to 7x7, and a three-layer ``classifier``."""

    def __init__(self, features: nn.Module, num_classes: int = 1000, init_weights: bool = True,
                 dropout: float = 0.5) -> None:
        super().__init__()
        self.features = features
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(p=dropout),
            nn.Linear(4096, num_classes),
        )
        if init_weights:
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                    if m.bias is not None:
                        nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)
                elif isinstance(m, nn.Linear):
                    nn.init.normal_(m.weight, 0, 0.01)
                    nn.init.constant_(m.bias, 0)

    def forward(self, x: Any) -> Any:
        x = self.avgpool(self.features(x))
        return self.classifier(ember.flatten(x, 1))


def make_layers(cfg: list[Any], batch_norm: bool = False) -> nn.Sequential:
    """The conv stack of one configuration: conv3x3 (+ BatchNorm) + ReLU per number, MaxPool per "M"."""
    layers: list[nn.Module] = []
    in_channels = 3
    for v in cfg:
        if v == "M":
            layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            continue
        layers.append(nn.Conv2d(in_channels, v, kernel_size=3, padding=1))
        if batch_norm:
            layers.append(nn.BatchNorm2d(v))
        layers.append(nn.ReLU(inplace=True))
        in_channels = v
    return nn.Sequential(*layers)


def _vgg(cfg: str, batch_norm: bool, weights: WeightsEnum | None, progress: bool, **kwargs: Any) -> VGG:
    if weights is not None:
        kwargs["init_weights"] = False
        override_num_classes(kwargs, weights)
    return load_weights(VGG(make_layers(CONFIGS[cfg], batch_norm=batch_norm), **kwargs), weights, progress)


def _builder(name: str, weights_enum: type[WeightsEnum], cfg: str, batch_norm: bool) -> Callable[..., VGG]:
    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> VGG:
        return _vgg(cfg, batch_norm, weights_enum.verify(weights), progress, **kwargs)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"{name} (``weights``: :class:`{weights_enum.__name__}` or None; keywords go to :class:`VGG`)."
    return build


vgg11 = _builder("vgg11", VGG11_Weights, "A", False)
vgg11_bn = _builder("vgg11_bn", VGG11_BN_Weights, "A", True)
vgg13 = _builder("vgg13", VGG13_Weights, "B", False)
vgg13_bn = _builder("vgg13_bn", VGG13_BN_Weights, "B", True)
vgg16 = _builder("vgg16", VGG16_Weights, "D", False)
vgg16_bn = _builder("vgg16_bn", VGG16_BN_Weights, "D", True)
vgg19 = _builder("vgg19", VGG19_Weights, "E", False)
vgg19_bn = _builder("vgg19_bn", VGG19_BN_Weights, "E", True)
