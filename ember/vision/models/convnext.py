"""ConvNeXt (torchvision's ``models.convnext_tiny/small/base/large``: same arguments, module names and keys).

A ResNet modernized toward the Vision Transformer: a 4x4 stride-4 "patchify" stem, blocks of a 7x7
depthwise conv, LayerNorm and an inverted MLP (4x, GELU) with a learned per-channel scale and stochastic
depth, and LayerNorm + 2x2 stride-2 convs between stages.

Example:
    >>> import ember
    >>> from ember.vision.models import convnext_tiny
    >>> convnext_tiny(num_classes=3).eval()(ember.randn(1, 3, 32, 32)).shape
    ember.Size([1, 3])
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import (
    handle_legacy_interface, load_weights, make_weights_enum, override_num_classes, register_model,
)
from ember.vision.ops.misc import Conv2dNormActivation, Permute
from ember.vision.ops.stochastic_depth import StochasticDepth

__all__ = ["ConvNeXt", "ConvNeXt_Tiny_Weights", "ConvNeXt_Small_Weights", "ConvNeXt_Base_Weights",
           "ConvNeXt_Large_Weights", "convnext_tiny", "convnext_small", "convnext_base", "convnext_large"]

ConvNeXt_Tiny_Weights = make_weights_enum("ConvNeXt_Tiny_Weights", __name__)
ConvNeXt_Small_Weights = make_weights_enum("ConvNeXt_Small_Weights", __name__)
ConvNeXt_Base_Weights = make_weights_enum("ConvNeXt_Base_Weights", __name__)
ConvNeXt_Large_Weights = make_weights_enum("ConvNeXt_Large_Weights", __name__)


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an (N, C, H, W) tensor."""

    def forward(self, x: Any) -> Any:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """7x7 depthwise conv, LayerNorm, Linear 4x, GELU, Linear back; scaled, dropped per sample, added."""

    def __init__(self, dim: int, layer_scale: float, stochastic_depth_prob: float,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        norm_layer = norm_layer or partial(nn.LayerNorm, eps=1e-6)
        self.block = nn.Sequential(
            nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, bias=True), Permute([0, 2, 3, 1]),
            norm_layer(dim), nn.Linear(dim, 4 * dim, bias=True), nn.GELU(), nn.Linear(4 * dim, dim, bias=True),
            Permute([0, 3, 1, 2]),
        )
        self.layer_scale = nn.Parameter(ember.ones(dim, 1, 1) * layer_scale)
        self.stochastic_depth = StochasticDepth(stochastic_depth_prob, "row")

    def forward(self, input: Any) -> Any:
        result = self.stochastic_depth(self.layer_scale * self.block(input))
        return result + input


@dataclass
class CNBlockConfig:
    """One stage: its channels, the next stage's (None for the last: no downsampling), its number of blocks."""

    input_channels: int
    out_channels: int | None
    num_layers: int


class ConvNeXt(nn.Module):
    """The stem, the stages of :class:`CNBlock` (stochastic depth rising linearly over all blocks), a
    LayerNorm-Flatten-Linear head after global average pooling."""

    def __init__(self, block_setting: Sequence[CNBlockConfig], stochastic_depth_prob: float = 0.0,
                 layer_scale: float = 1e-6, num_classes: int = 1000, block: Callable[..., nn.Module] | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None, **kwargs: Any) -> None:
        super().__init__()
        if not block_setting:
            raise ValueError("The block_setting should not be empty")
        if not all(isinstance(s, CNBlockConfig) for s in block_setting):
            raise TypeError("The block_setting should be List[CNBlockConfig]")
        block = block or CNBlock
        norm_layer = norm_layer or partial(LayerNorm2d, eps=1e-6)
        layers: list[nn.Module] = [Conv2dNormActivation(3, block_setting[0].input_channels, kernel_size=4, stride=4,
                                                        padding=0, norm_layer=norm_layer, activation_layer=None,
                                                        bias=True)]
        total_blocks = sum(s.num_layers for s in block_setting)
        block_id = 0
        for setting in block_setting:
            stage = []
            for _ in range(setting.num_layers):
                sd_prob = stochastic_depth_prob * block_id / (total_blocks - 1.0)
                stage.append(block(setting.input_channels, layer_scale, sd_prob))
                block_id += 1
            layers.append(nn.Sequential(*stage))
            if setting.out_channels is not None:
                layers.append(nn.Sequential(norm_layer(setting.input_channels),
                                            nn.Conv2d(setting.input_channels, setting.out_channels, kernel_size=2,
                                                      stride=2)))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        last = block_setting[-1]
        last_channels = last.out_channels if last.out_channels is not None else last.input_channels
        self.classifier = nn.Sequential(norm_layer(last_channels), nn.Flatten(1), nn.Linear(last_channels, num_classes))
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def forward(self, x: Any) -> Any:
        return self.classifier(self.avgpool(self.features(x)))


def _convnext(settings: list[tuple], stochastic_depth_prob: float, weights: Any, progress: bool,
              **kwargs: Any) -> ConvNeXt:
    override_num_classes(kwargs, weights)
    kwargs.setdefault("stochastic_depth_prob", stochastic_depth_prob)
    model = ConvNeXt([CNBlockConfig(*s) for s in settings], **kwargs)
    return load_weights(model, weights, progress)


@register_model("convnext_tiny", ConvNeXt_Tiny_Weights)
@handle_legacy_interface(lambda: ConvNeXt_Tiny_Weights.IMAGENET1K_V1)
def convnext_tiny(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-T (96-192-384-768 channels, 3-3-9-3 blocks)."""
    return _convnext([(96, 192, 3), (192, 384, 3), (384, 768, 9), (768, None, 3)], 0.1,
                     ConvNeXt_Tiny_Weights.verify(weights), progress, **kwargs)


@register_model("convnext_small", ConvNeXt_Small_Weights)
@handle_legacy_interface(lambda: ConvNeXt_Small_Weights.IMAGENET1K_V1)
def convnext_small(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-S (96-192-384-768 channels, 3-3-27-3 blocks)."""
    return _convnext([(96, 192, 3), (192, 384, 3), (384, 768, 27), (768, None, 3)], 0.4,
                     ConvNeXt_Small_Weights.verify(weights), progress, **kwargs)


@register_model("convnext_base", ConvNeXt_Base_Weights)
@handle_legacy_interface(lambda: ConvNeXt_Base_Weights.IMAGENET1K_V1)
def convnext_base(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-B (128-256-512-1024 channels, 3-3-27-3 blocks)."""
    return _convnext([(128, 256, 3), (256, 512, 3), (512, 1024, 27), (1024, None, 3)], 0.5,
                     ConvNeXt_Base_Weights.verify(weights), progress, **kwargs)


@register_model("convnext_large", ConvNeXt_Large_Weights)
@handle_legacy_interface(lambda: ConvNeXt_Large_Weights.IMAGENET1K_V1)
def convnext_large(*, weights: Any = None, progress: bool = True, **kwargs: Any) -> ConvNeXt:
    """ConvNeXt-L (192-384-768-1536 channels, 3-3-27-3 blocks)."""
    return _convnext([(192, 384, 3), (384, 768, 3), (768, 1536, 27), (1536, None, 3)], 0.5,
                     ConvNeXt_Large_Weights.verify(weights), progress, **kwargs)
