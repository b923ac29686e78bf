"""Backbones for the detectors (torchvision's ``models.detection.backbone_utils``): a classification network's
intermediate stages with a feature pyramid on top (``BackboneWithFPN``), built from ResNets and MobileNets,
with the early layers frozen as torchvision freezes them.

Example:
    >>> import ember
    >>> from ember.vision.models.detection.backbone_utils import resnet_fpn_backbone
    >>> backbone = resnet_fpn_backbone(backbone_name="resnet18", weights=None, trainable_layers=3)
    >>> [(k, tuple(v.shape)) for k, v in backbone(ember.zeros(1, 3, 64, 64)).items()][:2]
    [('0', (1, 256, 16, 16)), ('1', (1, 256, 8, 8))]
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ember import nn
from ember.tensor import Tensor
from ember.vision.models import mobilenetv2, mobilenetv3, resnet
from ember.vision.models._api import WeightsEnum, get_model_weights
from ember.vision.models._utils import IntermediateLayerGetter
from ember.vision.ops import FrozenBatchNorm2d
from ember.vision.ops.feature_pyramid_network import ExtraFPNBlock, FeaturePyramidNetwork, LastLevelMaxPool

__all__ = ["BackboneWithFPN", "resnet_fpn_backbone", "mobilenet_backbone"]


class BackboneWithFPN(nn.Module):
    """``body`` (the named stages of ``backbone``) then ``fpn``; every output level has ``out_channels``."""

    def __init__(self, backbone: nn.Module, return_layers: dict[str, str], in_channels_list: list[int],
                 out_channels: int, extra_blocks: ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.body = IntermediateLayerGetter(backbone, return_layers=return_layers)
        self.fpn = FeaturePyramidNetwork(in_channels_list=in_channels_list, out_channels=out_channels,
                                         extra_blocks=extra_blocks if extra_blocks is not None else LastLevelMaxPool(),
                                         norm_layer=norm_layer)
        self.out_channels = out_channels

    def forward(self, x: Tensor) -> dict[str, Tensor]:
        return self.fpn(self.body(x))


def _legacy_pretrained(name: str, kwargs: dict[str, Any], weights: Any) -> Any:
    """torchvision's deprecated ``pretrained=True``: the backbone builder's IMAGENET1K_V1 weights."""
    if "pretrained" not in kwargs:
        return weights
    warnings.warn("The parameter 'pretrained' is deprecated since 0.13 and may be removed in the future, please use "
                  "'weights' instead.", UserWarning, stacklevel=3)
    return get_model_weights(name).IMAGENET1K_V1 if kwargs.pop("pretrained") else None


def resnet_fpn_backbone(*, backbone_name: str, weights: WeightsEnum | None = None,
                        norm_layer: Callable[..., nn.Module] = FrozenBatchNorm2d, trainable_layers: int = 3,
                        returned_layers: list[int] | None = None, extra_blocks: ExtraFPNBlock | None = None,
                        **kwargs: Any) -> BackboneWithFPN:
    """A ResNet (``resnet18`` ... ``wide_resnet101_2``) with an FPN on ``returned_layers`` (default 1-4)."""
    weights = _legacy_pretrained(backbone_name, kwargs, weights)
    backbone = getattr(resnet, backbone_name)(weights=weights, norm_layer=norm_layer)
    return _resnet_fpn_extractor(backbone, trainable_layers, returned_layers, extra_blocks)


def _resnet_fpn_extractor(backbone: Any, trainable_layers: int, returned_layers: list[int] | None = None,
                          extra_blocks: ExtraFPNBlock | None = None,
                          norm_layer: Callable[..., nn.Module] | None = None) -> BackboneWithFPN:
    if trainable_layers < 0 or trainable_layers > 5:
        raise ValueError(f"Trainable layers should be in the range [0,5], got {trainable_layers}")
    trained = ["layer4", "layer3", "layer2", "layer1", "conv1"][:trainable_layers]
    if trainable_layers == 5:
        trained.append("bn1")
    for name, parameter in backbone.named_parameters():
        if not any(name.startswith(layer) for layer in trained):
            parameter.requires_grad_(False)
    returned_layers = returned_layers if returned_layers is not None else [1, 2, 3, 4]
    if min(returned_layers) <= 0 or max(returned_layers) >= 5:
        raise ValueError(f"Each returned layer should be in the range [1,4]. Got {returned_layers}")
    return_layers = {f"layer{k}": str(v) for v, k in enumerate(returned_layers)}
    stage2 = backbone.inplanes // 8
    in_channels = [stage2 * 2 ** (i - 1) for i in returned_layers]
    return BackboneWithFPN(backbone, return_layers, in_channels, 256,
                           extra_blocks=extra_blocks if extra_blocks is not None else LastLevelMaxPool(),
                           norm_layer=norm_layer)


def _validate_trainable_layers(is_trained: bool, trainable_backbone_layers: int | None, max_value: int,
                               default_value: int) -> int:
    if not is_trained:
        if trainable_backbone_layers is not None:
            warnings.warn("Changing trainable_backbone_layers has no effect if neither pretrained nor "
                          "pretrained_backbone have been set to True, falling back to "
                          f"trainable_backbone_layers={max_value} so that all layers are trainable")
        trainable_backbone_layers = max_value
    if trainable_backbone_layers is None:
        trainable_backbone_layers = default_value
    if trainable_backbone_layers < 0 or trainable_backbone_layers > max_value:
        raise ValueError(f"Trainable backbone layers should be in the range [0,{max_value}], "
                         f"got {trainable_backbone_layers} ")
    return trainable_backbone_layers


def mobilenet_backbone(*, backbone_name: str, weights: WeightsEnum | None = None, fpn: bool = True,
                       norm_layer: Callable[..., nn.Module] = FrozenBatchNorm2d, trainable_layers: int = 2,
                       returned_layers: list[int] | None = None, extra_blocks: ExtraFPNBlock | None = None,
                       **kwargs: Any) -> nn.Module:
    """A MobileNet (``mobilenet_v2``, ``mobilenet_v3_small/large``) feature extractor, with an FPN on its last
    two stages when ``fpn`` else a 1x1 conv to 256 channels."""
    module = mobilenetv2 if backbone_name == "mobilenet_v2" else mobilenetv3
    weights = _legacy_pretrained(backbone_name, kwargs, weights)
    backbone = getattr(module, backbone_name)(weights=weights, norm_layer=norm_layer)
    return _mobilenet_extractor(backbone, fpn, trainable_layers, returned_layers, extra_blocks)


def _mobilenet_extractor(backbone: Any, fpn: bool, trainable_layers: int, returned_layers: list[int] | None = None,
                         extra_blocks: ExtraFPNBlock | None = None,
                         norm_layer: Callable[..., nn.Module] | None = None) -> nn.Module:
    features = backbone.features
    # stage boundaries: the stem, every strided block (`_is_cn`), the last layer
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [len(features) - 1]
    num_stages = len(stages)
    if trainable_layers < 0 or trainable_layers > num_stages:
        raise ValueError(f"Trainable layers should be in the range [0,{num_stages}], got {trainable_layers} ")
    freeze_before = len(features) if trainable_layers == 0 else stages[num_stages - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    out_channels = 256
    if fpn:
        returned_layers = returned_layers if returned_layers is not None else [num_stages - 2, num_stages - 1]
        if min(returned_layers) < 0 or max(returned_layers) >= num_stages:
            raise ValueError(f"Each returned layer should be in the range [0,{num_stages - 1}], "
                             f"got {returned_layers} ")
        return_layers = {f"{stages[k]}": str(v) for v, k in enumerate(returned_layers)}
        in_channels = [features[stages[i]].out_channels for i in returned_layers]
        return BackboneWithFPN(features, return_layers, in_channels, out_channels,
                               extra_blocks=extra_blocks if extra_blocks is not None else LastLevelMaxPool(),
                               norm_layer=norm_layer)
    model = nn.Sequential(features, nn.Conv2d(features[-1].out_channels, out_channels, 1))
    model.out_channels = out_channels
    return model
