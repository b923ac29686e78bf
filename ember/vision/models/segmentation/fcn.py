"""FCN (torchvision's ``models.segmentation.fcn_resnet50/101``: same arguments, module names and keys).

A ResNet with its last two stages dilated instead of strided (output stride 8), a 3x3 conv head to the classes,
and an optional auxiliary head on ``layer3``; outputs are upsampled to the input size.

Example:
    >>> import ember
    >>> from ember.vision.models.segmentation import fcn_resnet50
    >>> model = fcn_resnet50(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> model(ember.randn(1, 3, 32, 32))["out"].shape
    ember.Size([1, 3, 32, 32])
"""
from __future__ import annotations

from typing import Any

from ember import nn
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models._utils import IntermediateLayerGetter
from ember.vision.models.resnet import ResNet, ResNet50_Weights, ResNet101_Weights, resnet50, resnet101
from ember.vision.models.segmentation._utils import _SimpleSegmentationModel, build

__all__ = ["FCN", "FCNHead", "FCN_ResNet50_Weights", "FCN_ResNet101_Weights", "fcn_resnet50", "fcn_resnet101"]

FCN_ResNet50_Weights = make_weights_enum("FCN_ResNet50_Weights", __name__)
FCN_ResNet101_Weights = make_weights_enum("FCN_ResNet101_Weights", __name__)


class FCN(_SimpleSegmentationModel):
    """Fully Convolutional Network: backbone features -> :class:`FCNHead`."""


class FCNHead(nn.Sequential):
    """3x3 conv to a quarter of the channels, BN, ReLU, dropout 0.1, 1x1 conv to the classes."""

    def __init__(self, in_channels: int, channels: int) -> None:
        inter_channels = in_channels // 4
        super().__init__(nn.Conv2d(in_channels, inter_channels, 3, padding=1, bias=False),
                         nn.BatchNorm2d(inter_channels), nn.ReLU(), nn.Dropout(0.1),
                         nn.Conv2d(inter_channels, channels, 1))


def _fcn_resnet(backbone: ResNet, num_classes: int, aux: bool | None) -> FCN:
    return_layers = {"layer4": "out"}
    if aux:
        return_layers["layer3"] = "aux"
    getter = IntermediateLayerGetter(backbone, return_layers=return_layers)
    return FCN(getter, FCNHead(2048, num_classes), FCNHead(1024, num_classes) if aux else None)


def _dilated(backbone_builder: Any) -> Any:
    """``make`` for :func:`build`: the ResNet with its last two stages dilated, under an FCN head."""
    def make(weights_backbone: Any, num_classes: int, aux: bool | None) -> FCN:
        backbone = backbone_builder(weights=weights_backbone, replace_stride_with_dilation=[False, True, True])
        return _fcn_resnet(backbone, num_classes, aux)

    return make


@register_model("fcn_resnet50", FCN_ResNet50_Weights)
@handle_legacy_interface(lambda: FCN_ResNet50_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: ResNet50_Weights.IMAGENET1K_V1)
def fcn_resnet50(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                 aux_loss: bool | None = None, weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                 **kwargs: Any) -> FCN:
    """FCN on a dilated ResNet-50 (21 VOC classes by default; the backbone's ImageNet weights by default, as
    torchvision: pass ``weights_backbone=None`` to start from random weights without a download)."""
    return build(FCN_ResNet50_Weights, ResNet50_Weights, _dilated(resnet50), weights, progress, num_classes, aux_loss,
                 weights_backbone)


@register_model("fcn_resnet101", FCN_ResNet101_Weights)
@handle_legacy_interface(lambda: FCN_ResNet101_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: ResNet101_Weights.IMAGENET1K_V1)
def fcn_resnet101(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                  aux_loss: bool | None = None, weights_backbone: Any = ResNet101_Weights.IMAGENET1K_V1,
                  **kwargs: Any) -> FCN:
    """FCN on a dilated ResNet-101."""
    return build(FCN_ResNet101_Weights, ResNet101_Weights, _dilated(resnet101), weights, progress, num_classes,
                 aux_loss, weights_backbone)
