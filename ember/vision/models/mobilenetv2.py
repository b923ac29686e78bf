"""MobileNetV2 (torchvision's ``models.mobilenet_v2``: same arguments, module names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import mobilenet_v2
    >>> mobilenet_v2(num_classes=4).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 4])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_divisible, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["MobileNetV2", "InvertedResidual", "MobileNet_V2_Weights", "mobilenet_v2"]

MobileNet_V2_Weights = make_weights_enum("MobileNet_V2_Weights", __name__)


class InvertedResidual(nn.Module):
    """1x1 expand (ReLU6), 3x3 depthwise (ReLU6), 1x1 linear projection; a shortcut when shapes allow."""

    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"stride should be 1 or 2 instead of {stride}")
        norm_layer = norm_layer or nn.BatchNorm2d
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(Conv2dNormActivation(inp, hidden_dim, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.ReLU6))
        layers += [
            Conv2dNormActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim, norm_layer=norm_layer,
                                 activation_layer=nn.ReLU6),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            norm_layer(oup),
        ]
        self.conv = nn.Sequential(*layers)
        self.out_channels = oup
        self._is_cn = stride > 1

    def forward(self, x: Any) -> Any:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


# t (expansion), c (output channels), n (repeats), s (first stride): the paper's Table 2.
DEFAULT_SETTING = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2], [6, 96, 3, 1], [6, 160, 3, 2],
                   [6, 320, 1, 1]]


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0,
                 inverted_residual_setting: Sequence[Sequence[int]] | None = None, round_nearest: int = 8,
                 block: Callable[..., nn.Module] | None = None, norm_layer: Callable[..., nn.Module] | None = None,
                 dropout: float = 0.2) -> None:
        super().__init__()
        block = block or InvertedResidual
        norm_layer = norm_layer or nn.BatchNorm2d
        setting = inverted_residual_setting if inverted_residual_setting is not None else DEFAULT_SETTING
        if len(setting) == 0 or len(setting[0]) != 4:
            raise ValueError(f"inverted_residual_setting should be non-empty or a 4-element list, got {setting}")
        input_channel = make_divisible(32 * width_mult, round_nearest)
        self.last_channel = make_divisible(1280 * max(1.0, width_mult), round_nearest)
        features: list[nn.Module] = [Conv2dNormActivation(3, input_channel, stride=2, norm_layer=norm_layer,
                                                          activation_layer=nn.ReLU6)]
        for t, c, n, s in setting:
            output_channel = make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(block(input_channel, output_channel, s if i == 0 else 1, expand_ratio=t,
                                      norm_layer=norm_layer))
                input_channel = output_channel
        features.append(Conv2dNormActivation(input_channel, self.last_channel, kernel_size=1, norm_layer=norm_layer,
                                             activation_layer=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout), nn.Linear(self.last_channel, num_classes))

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x: Any) -> Any:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(ember.flatten(x, 1))

    def forward(self, x: Any) -> Any:
        return self._forward_impl(x)


@register_model("mobilenet_v2", MobileNet_V2_Weights)
@handle_legacy_interface(lambda: MobileNet_V2_Weights.IMAGENET1K_V1)
def mobilenet_v2(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MobileNetV2:
    """MobileNetV2 (``weights``: :class:`MobileNet_V2_Weights` or None; keywords go to :class:`MobileNetV2`)."""
    weights = MobileNet_V2_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    return load_weights(MobileNetV2(**kwargs), weights, progress)
