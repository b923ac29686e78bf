"""SqueezeNet 1.0 and 1.1 (torchvision's ``models.squeezenet1_0/1_1``: same arguments, module names and keys).

Fire modules squeeze the channels with a 1x1 conv, then expand them with parallel 1x1 and 3x3 convs whose
outputs are concatenated; the classifier is a 1x1 conv to the classes, averaged over the image.

Example:
    >>> import ember
    >>> from ember.vision.models import squeezenet1_1
    >>> squeezenet1_1(num_classes=3).eval()(ember.randn(1, 3, 64, 64)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

from typing import Any

import ember
from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["SqueezeNet", "SqueezeNet1_0_Weights", "SqueezeNet1_1_Weights", "squeezenet1_0", "squeezenet1_1"]

SqueezeNet1_0_Weights = make_weights_enum("SqueezeNet1_0_Weights", __name__)
SqueezeNet1_1_Weights = make_weights_enum("SqueezeNet1_1_Weights", __name__)


class Fire(nn.Module):
    """1x1 squeeze (ReLU), then 1x1 and 3x3 expansions (ReLU) concatenated along the channels."""

    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int, expand3x3_planes: int) -> None:
        super().__init__()
        self.inplanes = inplanes
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: Any) -> Any:
        x = self.squeeze_activation(self.squeeze(x))
        return ember.cat([self.expand1x1_activation(self.expand1x1(x)),
                          self.expand3x3_activation(self.expand3x3(x))], 1)


def _pool() -> nn.MaxPool2d:
    return nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)


class SqueezeNet(nn.Module):
    """``version="1_0"`` (the paper's) or ``"1_1"`` (2.4x less computation, the same accuracy)."""

    def __init__(self, version: str = "1_0", num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.num_classes = num_classes
        if version == "1_0":
            self.features = nn.Sequential(
                nn.Conv2d(3, 96, kernel_size=7, stride=2), nn.ReLU(inplace=True), _pool(),
                Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), _pool(),
                Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
                _pool(), Fire(512, 64, 256, 256),
            )
        elif version == "1_1":
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, kernel_size=3, stride=2), nn.ReLU(inplace=True), _pool(),
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), _pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), _pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256),
            )
        else:
            raise ValueError(f"Unsupported SqueezeNet version {version}: 1_0 or 1_1 expected")
        final_conv = nn.Conv2d(512, self.num_classes, kernel_size=1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), final_conv, nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final_conv:
                    nn.init.normal_(m.weight, mean=0.0, std=0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, x: Any) -> Any:
        return ember.flatten(self.classifier(self.features(x)), 1)


@register_model("squeezenet1_0", SqueezeNet1_0_Weights)
@handle_legacy_interface(lambda: SqueezeNet1_0_Weights.IMAGENET1K_V1)
def squeezenet1_0(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.0."""
    weights = SqueezeNet1_0_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    return load_weights(SqueezeNet("1_0", **kwargs), weights, progress)


@register_model("squeezenet1_1", SqueezeNet1_1_Weights)
@handle_legacy_interface(lambda: SqueezeNet1_1_Weights.IMAGENET1K_V1)
def squeezenet1_1(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.1."""
    weights = SqueezeNet1_1_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    return load_weights(SqueezeNet("1_1", **kwargs), weights, progress)
