"""MobileNetV3 small and large (torchvision's ``models.mobilenet_v3_*``: same arguments, names and keys).

Example:
    >>> import ember
    >>> from ember.vision.models import mobilenet_v3_small
    >>> mobilenet_v3_small(num_classes=4).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 4])
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.vision.models._api import (
    WeightsEnum, handle_legacy_interface, load_weights, make_divisible, make_weights_enum, override_num_classes,
    register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation, SqueezeExcitation

__all__ = ["MobileNetV3", "InvertedResidualConfig", "InvertedResidual", "MobileNet_V3_Large_Weights",
           "MobileNet_V3_Small_Weights", "mobilenet_v3_large", "mobilenet_v3_small"]

MobileNet_V3_Large_Weights = make_weights_enum("MobileNet_V3_Large_Weights", __name__)
MobileNet_V3_Small_Weights = make_weights_enum("MobileNet_V3_Small_Weights", __name__)


class InvertedResidualConfig:
    """One row of the paper's Tables 1/2 (channel counts scaled by ``width_mult``)."""

    def __init__(self, input_channels: int, kernel: int, expanded_channels: int, out_channels: int, use_se: bool,
                 activation: str, stride: int, dilation: int, width_mult: float) -> None:
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels: int, width_mult: float) -> int:
        return make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    """Expand (1x1), depthwise (k x k), squeeze-excite (optional), project (1x1, linear) as ``block``."""

    def __init__(self, cnf: InvertedResidualConfig, norm_layer: Callable[..., nn.Module],
                 se_layer: Callable[..., nn.Module] = functools.partial(SqueezeExcitation,
                                                                        scale_activation=nn.Hardsigmoid)) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError("illegal stride value")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation_layer = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(Conv2dNormActivation(cnf.input_channels, cnf.expanded_channels, kernel_size=1,
                                               norm_layer=norm_layer, activation_layer=activation_layer))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.expanded_channels, kernel_size=cnf.kernel,
                                           stride=1 if cnf.dilation > 1 else cnf.stride, dilation=cnf.dilation,
                                           groups=cnf.expanded_channels, norm_layer=norm_layer,
                                           activation_layer=activation_layer))
        if cnf.use_se:
            layers.append(se_layer(cnf.expanded_channels, make_divisible(cnf.expanded_channels // 4, 8)))
        layers.append(Conv2dNormActivation(cnf.expanded_channels, cnf.out_channels, kernel_size=1,
                                           norm_layer=norm_layer, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input: Any) -> Any:
        result = self.block(input)
        return result + input if self.use_res_connect else result


class MobileNetV3(nn.Module):
    def __init__(self, inverted_residual_setting: Sequence[InvertedResidualConfig], last_channel: int,
                 num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None, dropout: float = 0.2, **kwargs: Any) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be List[InvertedResidualConfig]")
        block = block or InvertedResidual
        norm_layer = norm_layer or functools.partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        first = inverted_residual_setting[0].input_channels
        layers: list[nn.Module] = [Conv2dNormActivation(3, first, kernel_size=3, stride=2, norm_layer=norm_layer,
                                                        activation_layer=nn.Hardswish)]
        layers += [block(cnf, norm_layer) for cnf in inverted_residual_setting]
        last_in = inverted_residual_setting[-1].out_channels
        last_out = 6 * last_in
        layers.append(Conv2dNormActivation(last_in, last_out, kernel_size=1, norm_layer=norm_layer,
                                           activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last_out, last_channel), nn.Hardswish(inplace=True),
                                        nn.Dropout(p=dropout, inplace=True), nn.Linear(last_channel, num_classes))
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
        x = self.avgpool(self.features(x))
        return self.classifier(ember.flatten(x, 1))

    def forward(self, x: Any) -> Any:
        return self._forward_impl(x)


def _mobilenet_v3_conf(arch: str, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False,
                       **kwargs: Any) -> tuple[list[InvertedResidualConfig], int]:
    """The block table of ``arch``: input, kernel, expanded, output, SE, activation, stride, dilation."""
    div = 2 if reduced_tail else 1
    dil = 2 if dilated else 1
    conf = functools.partial(InvertedResidualConfig, width_mult=width_mult)
    if arch == "mobilenet_v3_large":
        rows = [(16, 3, 16, 16, False, "RE", 1, 1), (16, 3, 64, 24, False, "RE", 2, 1),
                (24, 3, 72, 24, False, "RE", 1, 1), (24, 5, 72, 40, True, "RE", 2, 1),
                (40, 5, 120, 40, True, "RE", 1, 1), (40, 5, 120, 40, True, "RE", 1, 1),
                (40, 3, 240, 80, False, "HS", 2, 1), (80, 3, 200, 80, False, "HS", 1, 1),
                (80, 3, 184, 80, False, "HS", 1, 1), (80, 3, 184, 80, False, "HS", 1, 1),
                (80, 3, 480, 112, True, "HS", 1, 1), (112, 3, 672, 112, True, "HS", 1, 1),
                (112, 5, 672, 160 // div, True, "HS", 2, dil),
                (160 // div, 5, 960 // div, 160 // div, True, "HS", 1, dil),
                (160 // div, 5, 960 // div, 160 // div, True, "HS", 1, dil)]
        last = 1280 // div
    elif arch == "mobilenet_v3_small":
        rows = [(16, 3, 16, 16, True, "RE", 2, 1), (16, 3, 72, 24, False, "RE", 2, 1),
                (24, 3, 88, 24, False, "RE", 1, 1), (24, 5, 96, 40, True, "HS", 2, 1),
                (40, 5, 240, 40, True, "HS", 1, 1), (40, 5, 240, 40, True, "HS", 1, 1),
                (40, 5, 120, 48, True, "HS", 1, 1), (48, 5, 144, 48, True, "HS", 1, 1),
                (48, 5, 288, 96 // div, True, "HS", 2, dil),
                (96 // div, 5, 576 // div, 96 // div, True, "HS", 1, dil),
                (96 // div, 5, 576 // div, 96 // div, True, "HS", 1, dil)]
        last = 1024 // div
    else:
        raise ValueError(f"Unsupported model type {arch}")
    return [conf(*row) for row in rows], InvertedResidualConfig.adjust_channels(last, width_mult)


def _builder(name: str, weights_enum: type[WeightsEnum]) -> Callable[..., MobileNetV3]:
    @register_model(name, weights_enum)
    @handle_legacy_interface(lambda: weights_enum.IMAGENET1K_V1)
    def build(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> MobileNetV3:
        weights = weights_enum.verify(weights)
        setting, last_channel = _mobilenet_v3_conf(name, **kwargs)
        for key in ("width_mult", "reduced_tail", "dilated"):
            kwargs.pop(key, None)
        override_num_classes(kwargs, weights)
        return load_weights(MobileNetV3(setting, last_channel, **kwargs), weights, progress)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = (f"{name} (``weights``: :class:`{weights_enum.__name__}` or None; ``width_mult``, "
                     "``reduced_tail``, ``dilated`` shape the table; other keywords go to :class:`MobileNetV3`).")
    return build


mobilenet_v3_large = _builder("mobilenet_v3_large", MobileNet_V3_Large_Weights)
mobilenet_v3_small = _builder("mobilenet_v3_small", MobileNet_V3_Small_Weights)
