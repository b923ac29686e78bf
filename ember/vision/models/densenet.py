"""DenseNet (torchvision's ``models.densenet121/161/169/201``: same arguments, module names and keys).

Each dense layer sees the concatenation of every earlier feature map of its block (a 1x1 bottleneck to
``bn_size * growth_rate`` channels, then a 3x3 conv to ``growth_rate``); transitions halve the channels and
the resolution. torchvision's published checkpoints use an older key spelling (``norm.1`` for ``norm1``),
which loading renames, as torchvision does.

Example:
    >>> import ember
    >>> from ember.vision.models import densenet121
    >>> densenet121(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Sequence

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, override_num_classes, register_model

__all__ = ["DenseNet", "DenseNet121_Weights", "DenseNet161_Weights", "DenseNet169_Weights", "DenseNet201_Weights",
           "densenet121", "densenet161", "densenet169", "densenet201"]

DenseNet121_Weights = make_weights_enum("DenseNet121_Weights", __name__)
DenseNet161_Weights = make_weights_enum("DenseNet161_Weights", __name__)
DenseNet169_Weights = make_weights_enum("DenseNet169_Weights", __name__)
DenseNet201_Weights = make_weights_enum("DenseNet201_Weights", __name__)


class _DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (the bottleneck), BN-ReLU-3x3 conv, on the concatenation of the block's features."""

    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int, drop_rate: float,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, kernel_size=1, stride=1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, kernel_size=3, stride=1, padding=1, bias=False)
        self.drop_rate = float(drop_rate)
        self.memory_efficient = memory_efficient  # torchvision recomputes the bottleneck; ember keeps it

    def forward(self, input: Any) -> Any:
        features = [input] if isinstance(input, ember.Tensor) else list(input)
        bottleneck = self.conv1(self.relu1(self.norm1(ember.cat(features, 1))))
        new_features = self.conv2(self.relu2(self.norm2(bottleneck)))
        if self.drop_rate > 0:
            new_features = F.dropout(new_features, p=self.drop_rate, training=self.training)
        return new_features


class _DenseBlock(nn.ModuleDict):
    """``num_layers`` dense layers (``denselayer1``...); returns all their features concatenated."""

    def __init__(self, num_layers: int, num_input_features: int, bn_size: int, growth_rate: int, drop_rate: float,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}", _DenseLayer(num_input_features + i * growth_rate, growth_rate,
                                                              bn_size, drop_rate, memory_efficient))

    def forward(self, init_features: Any) -> Any:
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return ember.cat(features, 1)


class _Transition(nn.Sequential):
    """BN-ReLU-1x1 conv to fewer channels, then a 2x2 average pool."""

    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, kernel_size=1, stride=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    """A stem (7x7 conv, max-pool), dense blocks joined by transitions, a final BN, global pooling, a linear."""

    def __init__(self, growth_rate: int = 32, block_config: Sequence[int] = (6, 12, 24, 16),
                 num_init_features: int = 64, bn_size: int = 4, drop_rate: float = 0, num_classes: int = 1000,
                 memory_efficient: bool = False) -> None:
        super().__init__()
        self.features = nn.Sequential(OrderedDict([
            ("conv0", nn.Conv2d(3, num_init_features, kernel_size=7, stride=2, padding=3, bias=False)),
            ("norm0", nn.BatchNorm2d(num_init_features)),
            ("relu0", nn.ReLU(inplace=True)),
            ("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1)),
        ]))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}", _DenseBlock(num_layers, num_features, bn_size,
                                                                       growth_rate, drop_rate, memory_efficient))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}", _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.constant_(m.bias, 0)

    def forward(self, x: Any) -> Any:
        out = F.relu(self.features(x), inplace=True)
        out = ember.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


# torchvision's checkpoints name ``denselayerN.norm1`` as ``denselayerN.norm.1`` (and conv/relu alike)
_OLD_KEY = re.compile(r"^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$")


def _renamed(state_dict: dict) -> dict:
    """The checkpoint's keys in the module's spelling (``norm.1.weight`` -> ``norm1.weight``)."""
    out = {}
    for key, value in state_dict.items():
        match = _OLD_KEY.match(key)
        out[match.group(1) + match.group(2) if match else key] = value
    return out


def _densenet(growth_rate: int, block_config: Sequence[int], num_init_features: int, weights: Any, progress: bool,
              **kwargs: Any) -> DenseNet:
    override_num_classes(kwargs, weights)
    model = DenseNet(growth_rate, tuple(block_config), num_init_features, **kwargs)
    if weights is not None:
        model.load_state_dict(_renamed(weights.get_state_dict(progress=progress, check_hash=True)))
    return model


@register_model("densenet121", DenseNet121_Weights)
@handle_legacy_interface(lambda: DenseNet121_Weights.IMAGENET1K_V1)
def densenet121(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-121 (growth 32, blocks 6-12-24-16)."""
    return _densenet(32, (6, 12, 24, 16), 64, DenseNet121_Weights.verify(weights), progress, **kwargs)


@register_model("densenet161", DenseNet161_Weights)
@handle_legacy_interface(lambda: DenseNet161_Weights.IMAGENET1K_V1)
def densenet161(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-161 (growth 48, blocks 6-12-36-24, 96 initial features)."""
    return _densenet(48, (6, 12, 36, 24), 96, DenseNet161_Weights.verify(weights), progress, **kwargs)


@register_model("densenet169", DenseNet169_Weights)
@handle_legacy_interface(lambda: DenseNet169_Weights.IMAGENET1K_V1)
def densenet169(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-169 (growth 32, blocks 6-12-32-32)."""
    return _densenet(32, (6, 12, 32, 32), 64, DenseNet169_Weights.verify(weights), progress, **kwargs)


@register_model("densenet201", DenseNet201_Weights)
@handle_legacy_interface(lambda: DenseNet201_Weights.IMAGENET1K_V1)
def densenet201(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> DenseNet:
    """DenseNet-201 (growth 32, blocks 6-12-48-32)."""
    return _densenet(32, (6, 12, 48, 32), 64, DenseNet201_Weights.verify(weights), progress, **kwargs)
