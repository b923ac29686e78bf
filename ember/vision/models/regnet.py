"""RegNetX and RegNetY (torchvision's ``models.regnet_x_*`` / ``regnet_y_*``: same arguments, names and keys).

A RegNet is a ResNeXt-like stack whose per-stage widths and depths come from four numbers (initial width
``w_0``, slope ``w_a``, log-step ``w_m``, depth): widths grow linearly, are snapped to a geometric grid and
quantized to multiples of 8, and equal neighbours form a stage. RegNetY adds squeeze-excitation.

Example:
    >>> import ember
    >>> from ember.vision.models import regnet_y_400mf
    >>> regnet_y_400mf(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

import math
from collections import OrderedDict
from functools import partial
from typing import Any, Callable

import numpy as np

from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_divisible, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation

_VARIANTS = {  # name -> (depth, w_0, w_a, w_m, group width, squeeze-excitation ratio)
    "regnet_y_400mf": (16, 48, 27.89, 2.09, 8, 0.25),
    "regnet_y_800mf": (14, 56, 38.84, 2.4, 16, 0.25),
    "regnet_y_1_6gf": (27, 48, 20.71, 2.65, 24, 0.25),
    "regnet_y_3_2gf": (21, 80, 42.63, 2.66, 24, 0.25),
    "regnet_y_8gf": (17, 192, 76.82, 2.19, 56, 0.25),
    "regnet_y_16gf": (18, 200, 106.23, 2.48, 112, 0.25),
    "regnet_y_32gf": (20, 232, 115.89, 2.53, 232, 0.25),
    "regnet_y_128gf": (27, 456, 160.83, 2.52, 264, 0.25),
    "regnet_x_400mf": (22, 24, 24.48, 2.54, 16, None),
    "regnet_x_800mf": (16, 56, 35.73, 2.28, 16, None),
    "regnet_x_1_6gf": (18, 80, 34.01, 2.25, 24, None),
    "regnet_x_3_2gf": (25, 88, 26.31, 2.25, 48, None),
    "regnet_x_8gf": (23, 80, 49.56, 2.88, 120, None),
    "regnet_x_16gf": (22, 216, 55.59, 2.1, 128, None),
    "regnet_x_32gf": (23, 320, 69.86, 2.0, 168, None),
}


def _enum_name(name: str) -> str:
    """``regnet_y_1_6gf`` -> ``RegNet_Y_1_6GF_Weights``."""
    return "RegNet_" + name[len("regnet_"):].upper() + "_Weights"


_WEIGHTS = {name: make_weights_enum(_enum_name(name), __name__) for name in _VARIANTS}
globals().update({_enum_name(name): enum for name, enum in _WEIGHTS.items()})

__all__ = ["RegNet", "BlockParams", *(_enum_name(n) for n in _VARIANTS), *_VARIANTS]


class SimpleStemIN(Conv2dNormActivation):
    """The ImageNet stem: 3x3 stride-2 conv, norm, activation."""

    def __init__(self, width_in: int, width_out: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module]) -> None:
        super().__init__(width_in, width_out, kernel_size=3, stride=2, norm_layer=norm_layer,
                         activation_layer=activation_layer)


class BottleneckTransform(nn.Sequential):
    """1x1 (``a``), grouped 3x3 (``b``), optional squeeze-excitation (``se``), 1x1 without activation (``c``)."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int, bottleneck_multiplier: float,
                 se_ratio: float | None) -> None:
        layers: OrderedDict[str, nn.Module] = OrderedDict()
        w_b = int(round(width_out * bottleneck_multiplier))
        layers["a"] = Conv2dNormActivation(width_in, w_b, kernel_size=1, stride=1, norm_layer=norm_layer,
                                           activation_layer=activation_layer)
        layers["b"] = Conv2dNormActivation(w_b, w_b, kernel_size=3, stride=stride, groups=w_b // group_width,
                                           norm_layer=norm_layer, activation_layer=activation_layer)
        if se_ratio:
            layers["se"] = SqueezeExcitation(input_channels=w_b, squeeze_channels=int(round(se_ratio * width_in)),
                                             activation=activation_layer)
        layers["c"] = Conv2dNormActivation(w_b, width_out, kernel_size=1, stride=1, norm_layer=norm_layer,
                                           activation_layer=None)
        super().__init__(layers)


class ResBottleneckBlock(nn.Module):
    """``act(x + f(x))``, with a 1x1 projection of ``x`` when the width or resolution changes."""

    def __init__(self, width_in: int, width_out: int, stride: int, norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int = 1,
                 bottleneck_multiplier: float = 1.0, se_ratio: float | None = None) -> None:
        super().__init__()
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = Conv2dNormActivation(width_in, width_out, kernel_size=1, stride=stride,
                                             norm_layer=norm_layer, activation_layer=None)
        self.f = BottleneckTransform(width_in, width_out, stride, norm_layer, activation_layer, group_width,
                                     bottleneck_multiplier, se_ratio)
        self.activation = activation_layer(inplace=True)

    def forward(self, x: Any) -> Any:
        shortcut = self.proj(x) if self.proj is not None else x
        return self.activation(shortcut + self.f(x))


class AnyStage(nn.Sequential):
    """``depth`` blocks named ``block{stage}-{i}``; only the first changes width and resolution."""

    def __init__(self, width_in: int, width_out: int, stride: int, depth: int,
                 block_constructor: Callable[..., nn.Module], norm_layer: Callable[..., nn.Module],
                 activation_layer: Callable[..., nn.Module], group_width: int, bottleneck_multiplier: float,
                 se_ratio: float | None = None, stage_index: int = 0) -> None:
        super().__init__()
        for i in range(depth):
            self.add_module(f"block{stage_index}-{i}", block_constructor(
                width_in if i == 0 else width_out, width_out, stride if i == 0 else 1, norm_layer, activation_layer,
                group_width, bottleneck_multiplier, se_ratio))


class BlockParams:
    """Per-stage depths, widths, group widths, bottleneck multipliers and strides."""

    def __init__(self, depths: list[int], widths: list[int], group_widths: list[int],
                 bottleneck_multipliers: list[float], strides: list[int], se_ratio: float | None = None) -> None:
        self.depths = depths
        self.widths = widths
        self.group_widths = group_widths
        self.bottleneck_multipliers = bottleneck_multipliers
        self.strides = strides
        self.se_ratio = se_ratio

    @classmethod
    def from_init_params(cls, depth: int, w_0: int, w_a: float, w_m: float, group_width: int,
                         bottleneck_multiplier: float = 1.0, se_ratio: float | None = None,
                         **kwargs: Any) -> "BlockParams":
        """The stages of the RegNet design space point (w_0, w_a, w_m, depth); computed in float32 as
        torchvision does, so the rounding lands on the same widths."""
        quant, stride = 8, 2
        if w_a < 0 or w_0 <= 0 or w_m <= 1 or w_0 % 8 != 0:
            raise ValueError("Invalid RegNet settings")
        widths_cont = np.arange(depth, dtype=np.float32) * np.float32(w_a) + np.float32(w_0)
        capacity = np.round(np.log(widths_cont / np.float32(w_0)) / np.float32(math.log(w_m)))
        block_widths = (np.round(np.float32(w_0) * np.power(np.float32(w_m), capacity) / quant) * quant)
        block_widths = [int(w) for w in block_widths.astype(np.int32)]
        num_stages = len(set(block_widths))
        # a stage ends wherever the width changes
        splits = [w != wp for w, wp in zip(block_widths + [0], [0] + block_widths)]
        stage_widths = [w for w, split in zip(block_widths, splits[:-1]) if split]
        stage_depths = [int(d) for d in np.diff([d for d, split in enumerate(splits) if split])]
        multipliers = [bottleneck_multiplier] * num_stages
        widths, group_widths = cls._adjust_widths_groups_compatibilty(stage_widths, multipliers,
                                                                      [group_width] * num_stages)
        return cls(depths=stage_depths, widths=widths, group_widths=group_widths, bottleneck_multipliers=multipliers,
                   strides=[stride] * num_stages, se_ratio=se_ratio)

    def _get_expanded_params(self) -> Any:
        return zip(self.widths, self.strides, self.depths, self.group_widths, self.bottleneck_multipliers)

    @staticmethod
    def _adjust_widths_groups_compatibilty(stage_widths: list[int], bottleneck_ratios: list[float],
                                           group_widths: list[int]) -> tuple[list[int], list[int]]:
        """Make each bottleneck width a multiple of its (possibly reduced) group width."""
        bottlenecks = [int(w * b) for w, b in zip(stage_widths, bottleneck_ratios)]
        groups = [min(g, w) for g, w in zip(group_widths, bottlenecks)]
        bottlenecks = [make_divisible(w, g) for w, g in zip(bottlenecks, groups)]
        return [int(w / b) for w, b in zip(bottlenecks, bottleneck_ratios)], groups


class RegNet(nn.Module):
    """The stem, the stages (``trunk_output.block1`` ...), global average pooling and a linear classifier."""

    def __init__(self, block_params: BlockParams, num_classes: int = 1000, stem_width: int = 32,
                 stem_type: Callable[..., nn.Module] | None = None, block_type: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None,
                 activation: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        stem_type = stem_type or SimpleStemIN
        norm_layer = norm_layer or nn.BatchNorm2d
        block_type = block_type or ResBottleneckBlock
        activation = activation or nn.ReLU
        self.stem = stem_type(3, stem_width, norm_layer, activation)
        current = stem_width
        stages = []
        for i, (width_out, stride, depth, group_width, multiplier) in enumerate(block_params._get_expanded_params()):
            stages.append((f"block{i + 1}", AnyStage(current, width_out, stride, depth, block_type, norm_layer,
                                                     activation, group_width, multiplier, block_params.se_ratio,
                                                     stage_index=i + 1)))
            current = width_out
        self.trunk_output = nn.Sequential(OrderedDict(stages))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(in_features=current, out_features=num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, mean=0.0, std=math.sqrt(2.0 / fan_out))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: Any) -> Any:
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))


def _builder(name: str) -> Callable[..., RegNet]:
    depth, w_0, w_a, w_m, group_width, se_ratio = _VARIANTS[name]
    weights_enum = _WEIGHTS[name]
    has_v1 = "IMAGENET1K_V1" in weights_enum.__members__

    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1 if has_v1 else None)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> RegNet:
        weights = weights_enum.verify(weights)
        override_num_classes(kwargs, weights)
        params = BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m, group_width=group_width,
                                              se_ratio=se_ratio)
        norm_layer = kwargs.pop("norm_layer", partial(nn.BatchNorm2d, eps=1e-05, momentum=0.1))
        return load_weights(RegNet(params, norm_layer=norm_layer, **kwargs), weights, progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name} (depth {depth}, w_0 {w_0}, w_a {w_a}, w_m {w_m}, group width {group_width}; "
                     f"``weights``: :class:`{weights_enum.__name__}` or None).")
    return build


for _name in _VARIANTS:
    globals()[_name] = _builder(_name)
del _name
