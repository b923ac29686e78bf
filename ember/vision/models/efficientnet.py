"""EfficientNet-B0 (torchvision's ``models.efficientnet_b0``: same arguments, module names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import efficientnet_b0
    >>> efficientnet_b0(num_classes=4).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 4])
"""
from __future__ import annotations

import copy
import functools
import math
from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_divisible, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation
from ember.vision.ops.stochastic_depth import StochasticDepth

__all__ = ["EfficientNet", "MBConv", "MBConvConfig", "EfficientNet_B0_Weights", "efficientnet_b0"]

EfficientNet_B0_Weights = make_weights_enum("EfficientNet_B0_Weights", __name__)


class MBConvConfig:
    """One stage: expansion, kernel, first stride, channels in/out, repeats (scaled by width/depth)."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, width_mult: float = 1.0, depth_mult: float = 1.0,
                 block: Callable[..., nn.Module] | None = None) -> None:
        self.expand_ratio = expand_ratio
        self.kernel = kernel
        self.stride = stride
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.num_layers = int(math.ceil(num_layers * depth_mult))
        self.block = block or MBConv

    @staticmethod
    def adjust_channels(channels: float, width_mult: float, min_value: int | None = None) -> int:
        return make_divisible(channels * width_mult, 8, min_value)


class MBConv(nn.Module):
    """Expand (1x1, SiLU), depthwise (SiLU), squeeze-excite (SiLU, sigmoid), project; stochastic depth on the
    residual branch."""

    def __init__(self, cnf: MBConvConfig, stochastic_depth_prob: float, norm_layer: Callable[..., nn.Module],
                 se_layer: Callable[..., nn.Module] = SqueezeExcitation) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        layers: list[nn.Module] = []
        if expanded != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=1, norm_layer=norm_layer,
                                               activation_layer=nn.SiLU))
        layers.append(Conv2dNormActivation(expanded, expanded, kernel_size=cnf.kernel, stride=cnf.stride,
                                           groups=expanded, norm_layer=norm_layer, activation_layer=nn.SiLU))
        layers.append(se_layer(expanded, max(1, cnf.input_channels // 4),
                               activation=functools.partial(nn.SiLU, inplace=True)))
        layers.append(Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    def forward(self, input: Any) -> Any:
        result = self.block(input)
        if self.use_res_connect:
            result = self.stochastic_depth(result) + input
        return result


class EfficientNet(nn.Module):
    def __init__(self, inverted_residual_setting: Sequence[MBConvConfig], dropout: float,
                 stochastic_depth_prob: float = 0.2, num_classes: int = 1000,
                 norm_layer: Callable[..., nn.Module] | None = None, last_channel: int | None = None) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, MBConvConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be List[MBConvConfig]")
        norm_layer = norm_layer or nn.BatchNorm2d
        layers: list[nn.Module] = [Conv2dNormActivation(3, inverted_residual_setting[0].input_channels, kernel_size=3,
                                                        stride=2, norm_layer=norm_layer, activation_layer=nn.SiLU)]
        total_blocks = sum(cnf.num_layers for cnf in inverted_residual_setting)
        block_id = 0
        for cnf in inverted_residual_setting:
            stage: list[nn.Module] = []
            for _ in range(cnf.num_layers):
                block_cnf = copy.copy(cnf)
                if stage:  # later blocks of a stage keep the channels and the resolution
                    block_cnf.input_channels = block_cnf.out_channels
                    block_cnf.stride = 1
                # The drop probability grows linearly with depth.
                stage.append(block_cnf.block(block_cnf, stochastic_depth_prob * block_id / total_blocks, norm_layer))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last_in = inverted_residual_setting[-1].out_channels
        last_out = last_channel if last_channel is not None else 4 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(p=dropout, inplace=True), nn.Linear(last_out, num_classes))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                init_range = 1.0 / math.sqrt(m.out_features)
                nn.init.uniform_(m.weight, -init_range, init_range)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x: Any) -> Any:
        x = self.avgpool(self.features(x))
        return self.classifier(ember.flatten(x, 1))

    def forward(self, x: Any) -> Any:
        return self._forward_impl(x)


def _b0_setting(width_mult: float = 1.0, depth_mult: float = 1.0) -> list[MBConvConfig]:
    """expand, kernel, stride, in, out, repeats: the paper's Table 1."""
    conf = functools.partial(MBConvConfig, width_mult=width_mult, depth_mult=depth_mult)
    return [conf(1, 3, 1, 32, 16, 1), conf(6, 3, 2, 16, 24, 2), conf(6, 5, 2, 24, 40, 2), conf(6, 3, 2, 40, 80, 3),
            conf(6, 5, 1, 80, 112, 3), conf(6, 5, 2, 112, 192, 4), conf(6, 3, 1, 192, 320, 1)]


@register_model("efficientnet_b0", EfficientNet_B0_Weights)
@handle_legacy_interface(lambda: EfficientNet_B0_Weights.IMAGENET1K_V1)
def efficientnet_b0(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> EfficientNet:
    """EfficientNet-B0 (``weights``: :class:`EfficientNet_B0_Weights` or None; keywords go to
    :class:`EfficientNet`, ``dropout`` defaults to 0.2)."""
    weights = EfficientNet_B0_Weights.verify(weights)
    override_num_classes(kwargs, weights)
    dropout = kwargs.pop("dropout", 0.2)
    return load_weights(EfficientNet(_b0_setting(), dropout, **kwargs), weights, progress)
