"""ShuffleNet V2 (torchvision's ``models.shufflenet_v2_x0_5/x1_0/x1_5/x2_0``: same arguments, names and keys).

Each unit splits the channels in two (or, when it downsamples, feeds both branches the whole input), runs
one half through 1x1 - depthwise 3x3 - 1x1 convs, concatenates, and shuffles the channels between the two
halves so information crosses them.

Example:
    >>> import ember
    >>> from ember.vision.models import shufflenet_v2_x0_5
    >>> shufflenet_v2_x0_5(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)

__all__ = ["ShuffleNetV2", "ShuffleNet_V2_X0_5_Weights", "ShuffleNet_V2_X1_0_Weights", "ShuffleNet_V2_X1_5_Weights",
           "ShuffleNet_V2_X2_0_Weights", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5",
           "shufflenet_v2_x2_0"]

ShuffleNet_V2_X0_5_Weights = make_weights_enum("ShuffleNet_V2_X0_5_Weights", __name__)
ShuffleNet_V2_X1_0_Weights = make_weights_enum("ShuffleNet_V2_X1_0_Weights", __name__)
ShuffleNet_V2_X1_5_Weights = make_weights_enum("ShuffleNet_V2_X1_5_Weights", __name__)
ShuffleNet_V2_X2_0_Weights = make_weights_enum("ShuffleNet_V2_X2_0_Weights", __name__)


def channel_shuffle(x: Any, groups: int) -> Any:
    """Interleave the channels of ``groups`` equal groups (N, g*c, H, W) -> (N, c*g, H, W)."""
    batch, channels, height, width = x.size()  # size(), as torchvision (its feature-extraction node is "size")
    x = x.view(batch, groups, channels // groups, height, width)
    return ember.transpose(x, 1, 2).contiguous().view(batch, -1, height, width)


def _depthwise(channels: int, stride: int) -> nn.Conv2d:
    return nn.Conv2d(channels, channels, 3, stride, 1, bias=False, groups=channels)


class InvertedResidual(nn.Module):
    """One ShuffleNet V2 unit (stride 1: split, transform one half; stride 2 or 3: two downsampling branches)."""

    def __init__(self, inp: int, oup: int, stride: int) -> None:
        super().__init__()
        if not 1 <= stride <= 3:
            raise ValueError("illegal stride value")
        self.stride = stride
        branch_features = oup // 2
        if self.stride == 1 and inp != branch_features << 1:
            raise ValueError(f"Invalid combination of stride {stride}, inp {inp} and oup {oup} values. If stride == 1 "
                             "then inp should be equal to oup // 2 << 1.")
        if self.stride > 1:
            self.branch1 = nn.Sequential(
                _depthwise(inp, self.stride), nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if self.stride > 1 else branch_features, branch_features, kernel_size=1, stride=1,
                      padding=0, bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
            _depthwise(branch_features, self.stride), nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(branch_features), nn.ReLU(inplace=True),
        )

    def forward(self, x: Any) -> Any:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = ember.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = ember.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """A 3x3 stem, max-pool, three stages of units, a 1x1 conv, global average, a linear classifier."""

    def __init__(self, stages_repeats: Sequence[int], stages_out_channels: Sequence[int], num_classes: int = 1000,
                 inverted_residual: Callable[..., nn.Module] = InvertedResidual) -> None:
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("expected stages_repeats as list of 3 positive ints")
        if len(stages_out_channels) != 5:
            raise ValueError("expected stages_out_channels as list of 5 positive ints")
        self._stage_out_channels = stages_out_channels
        input_channels = 3
        output_channels = self._stage_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        for name, repeats, output_channels in zip(("stage2", "stage3", "stage4"), stages_repeats,
                                                  self._stage_out_channels[1:]):
            units = [inverted_residual(input_channels, output_channels, 2)]
            units += [inverted_residual(output_channels, output_channels, 1) for _ in range(repeats - 1)]
            setattr(self, name, nn.Sequential(*units))
            input_channels = output_channels
        output_channels = self._stage_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        self.fc = nn.Linear(output_channels, num_classes)

    def forward(self, x: Any) -> Any:
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


def _shufflenetv2(weights: Any, progress: bool, channels: Sequence[int], **kwargs: Any) -> ShuffleNetV2:
    override_num_classes(kwargs, weights)
    return load_weights(ShuffleNetV2([4, 8, 4], list(channels), **kwargs), weights, progress)


@register_model("shufflenet_v2_x0_5", ShuffleNet_V2_X0_5_Weights)
@handle_legacy_interface(lambda: ShuffleNet_V2_X0_5_Weights.IMAGENET1K_V1)
def shufflenet_v2_x0_5(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNet V2 with 0.5x output channels."""
    return _shufflenetv2(ShuffleNet_V2_X0_5_Weights.verify(weights), progress, [24, 48, 96, 192, 1024], **kwargs)


@register_model("shufflenet_v2_x1_0", ShuffleNet_V2_X1_0_Weights)
@handle_legacy_interface(lambda: ShuffleNet_V2_X1_0_Weights.IMAGENET1K_V1)
def shufflenet_v2_x1_0(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNet V2 with 1.0x output channels."""
    return _shufflenetv2(ShuffleNet_V2_X1_0_Weights.verify(weights), progress, [24, 116, 232, 464, 1024], **kwargs)


@register_model("shufflenet_v2_x1_5", ShuffleNet_V2_X1_5_Weights)
@handle_legacy_interface(lambda: ShuffleNet_V2_X1_5_Weights.IMAGENET1K_V1)
def shufflenet_v2_x1_5(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNet V2 with 1.5x output channels."""
    return _shufflenetv2(ShuffleNet_V2_X1_5_Weights.verify(weights), progress, [24, 176, 352, 704, 1024], **kwargs)


@register_model("shufflenet_v2_x2_0", ShuffleNet_V2_X2_0_Weights)
@handle_legacy_interface(lambda: ShuffleNet_V2_X2_0_Weights.IMAGENET1K_V1)
def shufflenet_v2_x2_0(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ShuffleNetV2:
    """ShuffleNet V2 with 2.0x output channels."""
    return _shufflenetv2(ShuffleNet_V2_X2_0_Weights.verify(weights), progress, [24, 244, 488, 976, 2048], **kwargs)
