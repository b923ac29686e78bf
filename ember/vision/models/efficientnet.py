"""EfficientNet B0-B7 and EfficientNetV2 S/M/L (torchvision's ``models.efficientnet_*``: same arguments,
module names and keys). B1-B7 scale B0's stages in width and depth; V2 starts with fused blocks (one full
conv in place of expand + depthwise).

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

__all__ = ["EfficientNet", "MBConv", "MBConvConfig", "FusedMBConv", "FusedMBConvConfig", "EfficientNet_B0_Weights",
           "EfficientNet_B1_Weights", "EfficientNet_B2_Weights", "EfficientNet_B3_Weights", "EfficientNet_B4_Weights",
           "EfficientNet_B5_Weights", "EfficientNet_B6_Weights", "EfficientNet_B7_Weights", "EfficientNet_V2_S_Weights",
           "EfficientNet_V2_M_Weights", "EfficientNet_V2_L_Weights", "efficientnet_b0", "efficientnet_b1",
           "efficientnet_b2", "efficientnet_b3", "efficientnet_b4", "efficientnet_b5", "efficientnet_b6",
           "efficientnet_b7", "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l"]

EfficientNet_B0_Weights = make_weights_enum("EfficientNet_B0_Weights", __name__)
EfficientNet_B1_Weights = make_weights_enum("EfficientNet_B1_Weights", __name__)
EfficientNet_B2_Weights = make_weights_enum("EfficientNet_B2_Weights", __name__)
EfficientNet_B3_Weights = make_weights_enum("EfficientNet_B3_Weights", __name__)
EfficientNet_B4_Weights = make_weights_enum("EfficientNet_B4_Weights", __name__)
EfficientNet_B5_Weights = make_weights_enum("EfficientNet_B5_Weights", __name__)
EfficientNet_B6_Weights = make_weights_enum("EfficientNet_B6_Weights", __name__)
EfficientNet_B7_Weights = make_weights_enum("EfficientNet_B7_Weights", __name__)
EfficientNet_V2_S_Weights = make_weights_enum("EfficientNet_V2_S_Weights", __name__)
EfficientNet_V2_M_Weights = make_weights_enum("EfficientNet_V2_M_Weights", __name__)
EfficientNet_V2_L_Weights = make_weights_enum("EfficientNet_V2_L_Weights", __name__)


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


class FusedMBConvConfig(MBConvConfig):
    """An EfficientNetV2 early stage: channels as given (no width or depth multiplier), fused blocks."""

    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int, out_channels: int,
                 num_layers: int, block: Callable[..., nn.Module] | None = None) -> None:
        super().__init__(expand_ratio, kernel, stride, input_channels, out_channels, num_layers,
                         block=block or FusedMBConv)


class FusedMBConv(nn.Module):
    """EfficientNetV2's fused block: one full kxk conv in place of expand + depthwise (then a 1x1 projection
    when it expands); no squeeze-excite; stochastic depth on the residual branch."""

    def __init__(self, cnf: FusedMBConvConfig, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module]) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        expanded = cnf.adjust_channels(cnf.input_channels, cnf.expand_ratio)
        if expanded != cnf.input_channels:
            layers = [Conv2dNormActivation(cnf.input_channels, expanded, kernel_size=cnf.kernel, stride=cnf.stride,
                                           norm_layer=norm_layer, activation_layer=nn.SiLU),
                      Conv2dNormActivation(expanded, cnf.out_channels, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=None)]
        else:
            layers = [Conv2dNormActivation(cnf.input_channels, cnf.out_channels, kernel_size=cnf.kernel,
                                           stride=cnf.stride, norm_layer=norm_layer, activation_layer=nn.SiLU)]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")
        self.out_channels = cnf.out_channels

    forward = MBConv.forward  # the same residual with stochastic depth


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


def _v2_setting(variant: str) -> list[MBConvConfig]:
    """EfficientNetV2's stages (expand, kernel, stride, in, out, repeats): fused early, MBConv late."""
    fused, mb = FusedMBConvConfig, MBConvConfig
    table = {
        "s": [fused(1, 3, 1, 24, 24, 2), fused(4, 3, 2, 24, 48, 4), fused(4, 3, 2, 48, 64, 4), mb(4, 3, 2, 64, 128, 6),
              mb(6, 3, 1, 128, 160, 9), mb(6, 3, 2, 160, 256, 15)],
        "m": [fused(1, 3, 1, 24, 24, 3), fused(4, 3, 2, 24, 48, 5), fused(4, 3, 2, 48, 80, 5), mb(4, 3, 2, 80, 160, 7),
              mb(6, 3, 1, 160, 176, 14), mb(6, 3, 2, 176, 304, 18), mb(6, 3, 1, 304, 512, 5)],
        "l": [fused(1, 3, 1, 32, 32, 4), fused(4, 3, 2, 32, 64, 7), fused(4, 3, 2, 64, 96, 7), mb(4, 3, 2, 96, 192, 10),
              mb(6, 3, 1, 192, 224, 19), mb(6, 3, 2, 224, 384, 25), mb(6, 3, 1, 384, 640, 7)],
    }
    return table[variant]


# name -> (weights enum, width multiplier, depth multiplier, default dropout, batch norm eps and momentum)
_B_VARIANTS = {
    "efficientnet_b0": (EfficientNet_B0_Weights, 1.0, 1.0, 0.2, None),
    "efficientnet_b1": (EfficientNet_B1_Weights, 1.0, 1.1, 0.2, None),
    "efficientnet_b2": (EfficientNet_B2_Weights, 1.1, 1.2, 0.3, None),
    "efficientnet_b3": (EfficientNet_B3_Weights, 1.2, 1.4, 0.3, None),
    "efficientnet_b4": (EfficientNet_B4_Weights, 1.4, 1.8, 0.4, None),
    "efficientnet_b5": (EfficientNet_B5_Weights, 1.6, 2.2, 0.4, (0.001, 0.01)),
    "efficientnet_b6": (EfficientNet_B6_Weights, 1.8, 2.6, 0.5, (0.001, 0.01)),
    "efficientnet_b7": (EfficientNet_B7_Weights, 2.0, 3.1, 0.5, (0.001, 0.01)),
}
_V2_VARIANTS = {
    "efficientnet_v2_s": (EfficientNet_V2_S_Weights, "s", 0.2),
    "efficientnet_v2_m": (EfficientNet_V2_M_Weights, "m", 0.3),
    "efficientnet_v2_l": (EfficientNet_V2_L_Weights, "l", 0.4),
}


def _b_builder(name: str) -> Callable[..., EfficientNet]:
    weights_enum, width, depth, default_dropout, bn = _B_VARIANTS[name]

    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> EfficientNet:
        weights = weights_enum.verify(weights)
        override_num_classes(kwargs, weights)
        dropout = kwargs.pop("dropout", default_dropout)
        if bn is not None:
            kwargs.setdefault("norm_layer", functools.partial(nn.BatchNorm2d, eps=bn[0], momentum=bn[1]))
        return load_weights(EfficientNet(_b0_setting(width, depth), dropout, **kwargs), weights, progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name} (width x{width}, depth x{depth}; ``weights``: :class:`{weights_enum.__name__}` or None; "
                     f"keywords go to :class:`EfficientNet`, ``dropout`` defaults to {default_dropout}).")
    return build


def _v2_builder(name: str) -> Callable[..., EfficientNet]:
    weights_enum, variant, default_dropout = _V2_VARIANTS[name]

    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> EfficientNet:
        weights = weights_enum.verify(weights)
        override_num_classes(kwargs, weights)
        dropout = kwargs.pop("dropout", default_dropout)
        kwargs.setdefault("norm_layer", functools.partial(nn.BatchNorm2d, eps=1e-03))
        return load_weights(EfficientNet(_v2_setting(variant), dropout, last_channel=1280, **kwargs), weights,
                            progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name} (EfficientNetV2; ``weights``: :class:`{weights_enum.__name__}` or None; keywords go to "
                     f":class:`EfficientNet`, ``dropout`` defaults to {default_dropout}).")
    return build


efficientnet_b0 = _b_builder("efficientnet_b0")
efficientnet_b1 = _b_builder("efficientnet_b1")
efficientnet_b2 = _b_builder("efficientnet_b2")
efficientnet_b3 = _b_builder("efficientnet_b3")
efficientnet_b4 = _b_builder("efficientnet_b4")
efficientnet_b5 = _b_builder("efficientnet_b5")
efficientnet_b6 = _b_builder("efficientnet_b6")
efficientnet_b7 = _b_builder("efficientnet_b7")
efficientnet_v2_s = _v2_builder("efficientnet_v2_s")
efficientnet_v2_m = _v2_builder("efficientnet_v2_m")
efficientnet_v2_l = _v2_builder("efficientnet_v2_l")
