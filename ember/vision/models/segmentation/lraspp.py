"""Lite R-ASPP (torchvision's ``models.segmentation.lraspp_mobilenet_v3_large``: same arguments, names, keys).

MobileNetV3-Large's output-stride-16 features, gated by their own global average (a sigmoid scale), upsampled
to the stride-8 features and added to a 1x1 classifier of those.

Example:
    >>> import ember
    >>> from ember.vision.models.segmentation import lraspp_mobilenet_v3_large
    >>> model = lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> model(ember.randn(1, 3, 32, 32))["out"].shape
    ember.Size([1, 3, 32, 32])
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ember import nn
from ember.nn import functional as F
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models._utils import IntermediateLayerGetter
from ember.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from ember.vision.models.segmentation._utils import overwrite_value
from ember.vision.models.segmentation.deeplabv3 import mobilenetv3_stage_positions

__all__ = ["LRASPP", "LRASPP_MobileNet_V3_Large_Weights", "lraspp_mobilenet_v3_large"]

LRASPP_MobileNet_V3_Large_Weights = make_weights_enum("LRASPP_MobileNet_V3_Large_Weights", __name__)


class LRASPP(nn.Module):
    """A backbone returning ``{"low": ..., "high": ...}`` and :class:`LRASPPHead`; ``{"out": ...}`` at input size."""

    def __init__(self, backbone: nn.Module, low_channels: int, high_channels: int, num_classes: int,
                 inter_channels: int = 128) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = LRASPPHead(low_channels, high_channels, num_classes, inter_channels)

    def forward(self, input: Any) -> "OrderedDict[str, Any]":
        out = self.classifier(self.backbone(input))
        result: OrderedDict[str, Any] = OrderedDict()
        result["out"] = F.interpolate(out, size=tuple(input.shape[-2:]), mode="bilinear", align_corners=False)
        return result


class LRASPPHead(nn.Module):
    """``low_classifier(low) + high_classifier(upsample(cbr(high) * scale(high)))``."""

    def __init__(self, low_channels: int, high_channels: int, num_classes: int, inter_channels: int) -> None:
        super().__init__()
        self.cbr = nn.Sequential(nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                 nn.BatchNorm2d(inter_channels), nn.ReLU(inplace=True))
        self.scale = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(high_channels, inter_channels, 1, bias=False),
                                   nn.Sigmoid())
        self.low_classifier = nn.Conv2d(low_channels, num_classes, 1)
        self.high_classifier = nn.Conv2d(inter_channels, num_classes, 1)

    def forward(self, input: dict[str, Any]) -> Any:
        low, high = input["low"], input["high"]
        x = self.cbr(high) * self.scale(high)
        x = F.interpolate(x, size=tuple(low.shape[-2:]), mode="bilinear", align_corners=False)
        return self.low_classifier(low) + self.high_classifier(x)


@register_model("lraspp_mobilenet_v3_large", LRASPP_MobileNet_V3_Large_Weights)
@handle_legacy_interface(lambda: LRASPP_MobileNet_V3_Large_Weights.COCO_WITH_VOC_LABELS_V1,
                         lambda: MobileNet_V3_Large_Weights.IMAGENET1K_V1)
def lraspp_mobilenet_v3_large(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                              weights_backbone: Any = MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                              **kwargs: Any) -> LRASPP:
    """Lite R-ASPP on a dilated MobileNetV3-Large (no auxiliary loss: ``aux_loss=True`` is refused)."""
    if kwargs.pop("aux_loss", False):
        raise NotImplementedError("This model does not use auxiliary loss")
    weights = LRASPP_MobileNet_V3_Large_Weights.verify(weights)
    weights_backbone = MobileNet_V3_Large_Weights.verify(weights_backbone)
    if weights is not None:
        weights_backbone = None
        num_classes = overwrite_value("num_classes", num_classes, len(weights.meta["categories"]))
    elif num_classes is None:
        num_classes = 21
    features = mobilenet_v3_large(weights=weights_backbone, dilated=True).features
    stages = mobilenetv3_stage_positions(features)
    low_pos, high_pos = stages[-4], stages[-1]
    getter = IntermediateLayerGetter(features, return_layers={str(low_pos): "low", str(high_pos): "high"})
    model = LRASPP(getter, features[low_pos].out_channels, features[high_pos].out_channels, num_classes)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
