"""DeepLabV3 (torchvision's ``models.segmentation.deeplabv3_resnet50/resnet101/mobilenet_v3_large``: same
arguments, module names and keys).

A dilated backbone (ResNet: output stride 8; MobileNetV3: 16) and an ASPP head: parallel 1x1 and dilated 3x3
convs (rates 12, 24, 36) plus image-level pooling, concatenated and projected; an optional FCN auxiliary head.

Example:
    >>> import ember
    >>> from ember.vision.models.segmentation import deeplabv3_mobilenet_v3_large
    >>> model = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> model(ember.randn(1, 3, 32, 32))["out"].shape
    ember.Size([1, 3, 32, 32])
"""
from __future__ import annotations

from typing import Any, Sequence

import ember
from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models._utils import IntermediateLayerGetter
from ember.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, MobileNetV3, mobilenet_v3_large
from ember.vision.models.resnet import ResNet, ResNet50_Weights, ResNet101_Weights, resnet50, resnet101
from ember.vision.models.segmentation._utils import _SimpleSegmentationModel, build
from ember.vision.models.segmentation.fcn import FCNHead

__all__ = ["DeepLabV3", "DeepLabHead", "ASPP", "DeepLabV3_ResNet50_Weights", "DeepLabV3_ResNet101_Weights",
           "DeepLabV3_MobileNet_V3_Large_Weights", "deeplabv3_mobilenet_v3_large", "deeplabv3_resnet50",
           "deeplabv3_resnet101"]

DeepLabV3_ResNet50_Weights = make_weights_enum("DeepLabV3_ResNet50_Weights", __name__)
DeepLabV3_ResNet101_Weights = make_weights_enum("DeepLabV3_ResNet101_Weights", __name__)
DeepLabV3_MobileNet_V3_Large_Weights = make_weights_enum("DeepLabV3_MobileNet_V3_Large_Weights", __name__)


class DeepLabV3(_SimpleSegmentationModel):
    """DeepLabV3: backbone features -> :class:`DeepLabHead`."""


class DeepLabHead(nn.Sequential):
    """ASPP, then a 3x3 conv, BN, ReLU and a 1x1 conv to the classes."""

    def __init__(self, in_channels: int, num_classes: int, atrous_rates: Sequence[int] = (12, 24, 36)) -> None:
        super().__init__(ASPP(in_channels, atrous_rates), nn.Conv2d(256, 256, 3, padding=1, bias=False),
                         nn.BatchNorm2d(256), nn.ReLU(), nn.Conv2d(256, num_classes, 1))


class ASPPConv(nn.Sequential):
    """A dilated 3x3 conv branch (padding = dilation keeps the size), BN, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, dilation: int) -> None:
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, padding=dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class ASPPPooling(nn.Sequential):
    """The image-level branch: global average, 1x1 conv, BN, ReLU, upsampled back to the feature size."""

    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x: Any) -> Any:
        size = tuple(x.shape[-2:])
        for module in self:
            x = module(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: the branches concatenated, projected by a 1x1 conv, dropout 0.5."""

    def __init__(self, in_channels: int, atrous_rates: Sequence[int], out_channels: int = 256) -> None:
        super().__init__()
        branches: list[nn.Module] = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                                   nn.BatchNorm2d(out_channels), nn.ReLU())]
        branches += [ASPPConv(in_channels, out_channels, rate) for rate in tuple(atrous_rates)]
        branches.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(branches)
        self.project = nn.Sequential(nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x: Any) -> Any:
        return self.project(ember.cat([conv(x) for conv in self.convs], dim=1))


def _deeplabv3_resnet(backbone: ResNet, num_classes: int, aux: bool | None) -> DeepLabV3:
    return_layers = {"layer4": "out"}
    if aux:
        return_layers["layer3"] = "aux"
    getter = IntermediateLayerGetter(backbone, return_layers=return_layers)
    return DeepLabV3(getter, DeepLabHead(2048, num_classes), FCNHead(1024, num_classes) if aux else None)


def mobilenetv3_stage_positions(features: nn.Module) -> list[int]:
    """Indices of MobileNetV3's stage outputs C0..C5: the stem, each strided block, the last layer."""
    return [0] + [i for i, block in enumerate(features) if getattr(block, "_is_cn", False)] + [len(features) - 1]


def _deeplabv3_mobilenetv3(backbone: MobileNetV3, num_classes: int, aux: bool | None) -> DeepLabV3:
    features = backbone.features
    stages = mobilenetv3_stage_positions(features)
    out_pos, aux_pos = stages[-1], stages[-4]  # C5 (output stride 16) and C2 (output stride 8)
    return_layers = {str(out_pos): "out"}
    if aux:
        return_layers[str(aux_pos)] = "aux"
    getter = IntermediateLayerGetter(features, return_layers=return_layers)
    aux_classifier = FCNHead(features[aux_pos].out_channels, num_classes) if aux else None
    return DeepLabV3(getter, DeepLabHead(features[out_pos].out_channels, num_classes), aux_classifier)


@register_model("deeplabv3_resnet50", DeepLabV3_ResNet50_Weights)
@handle_legacy_interface(lambda: DeepLabV3_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: ResNet50_Weights.IMAGENET1K_V1)
def deeplabv3_resnet50(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                       aux_loss: bool | None = None, weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                       **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated ResNet-50 (the backbone's ImageNet weights by default, as torchvision)."""
    def make(wb: Any, classes: int, aux: Any) -> DeepLabV3:
        return _deeplabv3_resnet(resnet50(weights=wb, replace_stride_with_dilation=[False, True, True]), classes, aux)

    return build(DeepLabV3_ResNet50_Weights, ResNet50_Weights, make, weights, progress, num_classes, aux_loss,
                  weights_backbone)


@register_model("deeplabv3_resnet101", DeepLabV3_ResNet101_Weights)
@handle_legacy_interface(lambda: DeepLabV3_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: ResNet101_Weights.IMAGENET1K_V1)
def deeplabv3_resnet101(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                        aux_loss: bool | None = None, weights_backbone: Any = ResNet101_Weights.IMAGENET1K_V1,
                        **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated ResNet-101."""
    def make(wb: Any, classes: int, aux: Any) -> DeepLabV3:
        return _deeplabv3_resnet(resnet101(weights=wb, replace_stride_with_dilation=[False, True, True]), classes,
                                 aux)

    return build(DeepLabV3_ResNet101_Weights, ResNet101_Weights, make, weights, progress, num_classes, aux_loss,
                  weights_backbone)


@register_model("deeplabv3_mobilenet_v3_large", DeepLabV3_MobileNet_V3_Large_Weights)
@handle_legacy_interface(lambda: DeepLabV3_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: MobileNet_V3_Large_Weights.IMAGENET1K_V1)
def deeplabv3_mobilenet_v3_large(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                                 aux_loss: bool | None = None,
                                 weights_backbone: Any = MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                 **kwargs: Any) -> DeepLabV3:
    """DeepLabV3 on a dilated MobileNetV3-Large."""
    def make(wb: Any, classes: int, aux: Any) -> DeepLabV3:
        return _deeplabv3_mobilenetv3(mobilenet_v3_large(weights=wb, dilated=True), classes, aux)

    return build(DeepLabV3_MobileNet_V3_Large_Weights, MobileNet_V3_Large_Weights, make, weights, progress,
                  num_classes, aux_loss, weights_backbone)
