"""AlexNet (torchvision's ``models.alexnet``: the one-GPU variant, same module names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import alexnet
    >>> alexnet(num_classes=5).eval()(ember.randn(1, 3, 64, 64)).shape
    ember.Size([1, 5])
"""
from __future__ import annotations

from typing import Any

import ember
from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["AlexNet", "AlexNet_Weights", "alexnet"]

AlexNet_Weights = make_weights_enum("AlexNet_Weights", __name__)


class AlexNet(nn.Module):
    """Five convs with max-pools, an adaptive pool to 6x6, three linear layers with dropout."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(p=dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: Any) -> Any:
        x = self.avgpool(self.features(x))
        return self.classifier(ember.flatten(x, 1))


@register_model("alexnet", AlexNet_Weights)
@handle_legacy_interface(lambda: AlexNet_Weights.IMAGENET1K_V1)
def alexnet(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> AlexNet:
    """AlexNet (``weights``: :class:`AlexNet_Weights` or None; keywords go to :class:`AlexNet`)."""
    weights = AlexNet_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    return load_weights(AlexNet(**kwargs), weights, progress)
