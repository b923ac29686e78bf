"""SSDLite (torchvision's ``models.detection.ssdlite``): SSD with depthwise-separable prediction blocks on a
MobileNetV3-Large feature extractor (the C4 expansion output, the last layer, four extra blocks), 320x320 input.

Example:
    >>> import ember
    >>> from ember.vision.models.detection import ssdlite320_mobilenet_v3_large
    >>> model = ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=3).eval()
    >>> model.anchor_generator.num_anchors_per_location()
    [6, 6, 6, 6, 6, 6]
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from functools import partial
from typing import Any, Callable

from ember import nn
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection import _utils as det_utils
from ember.vision.models.detection.anchor_utils import DefaultBoxGenerator
from ember.vision.models.detection.backbone_utils import _validate_trainable_layers
from ember.vision.models.detection.ssd import SSD, SSDScoringHead
from ember.vision.models.mobilenetv3 import MobileNet_V3_Large_Weights, mobilenet_v3_large
from ember.vision.models.segmentation._utils import overwrite_value
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["SSDLite320_MobileNet_V3_Large_Weights", "ssdlite320_mobilenet_v3_large", "SSDLiteHead",
           "SSDLiteClassificationHead", "SSDLiteRegressionHead", "SSDLiteFeatureExtractorMobileNet"]

SSDLite320_MobileNet_V3_Large_Weights = make_weights_enum("SSDLite320_MobileNet_V3_Large_Weights", __name__)


def _prediction_block(in_channels: int, out_channels: int, kernel_size: int,
                      norm_layer: Callable[..., nn.Module]) -> nn.Sequential:
    """Depthwise conv-norm-ReLU6, then a 1x1 conv."""
    return nn.Sequential(Conv2dNormActivation(in_channels, in_channels, kernel_size=kernel_size, groups=in_channels,
                                              norm_layer=norm_layer, activation_layer=nn.ReLU6),
                         nn.Conv2d(in_channels, out_channels, 1))


def _extra_block(in_channels: int, out_channels: int, norm_layer: Callable[..., nn.Module]) -> nn.Sequential:
    """1x1 to half width, stride-2 depthwise 3x3, 1x1 to ``out_channels`` (all with norm and ReLU6)."""
    mid = out_channels // 2
    return nn.Sequential(
        Conv2dNormActivation(in_channels, mid, kernel_size=1, norm_layer=norm_layer, activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, mid, kernel_size=3, stride=2, groups=mid, norm_layer=norm_layer,
                             activation_layer=nn.ReLU6),
        Conv2dNormActivation(mid, out_channels, kernel_size=1, norm_layer=norm_layer, activation_layer=nn.ReLU6))


def _normal_init(conv: nn.Module) -> None:
    for layer in conv.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, mean=0.0, std=0.03)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0.0)


class SSDLiteClassificationHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int,
                 norm_layer: Callable[..., nn.Module]) -> None:
        blocks = nn.ModuleList([_prediction_block(c, num_classes * a, 3, norm_layer)
                                for c, a in zip(in_channels, num_anchors)])
        _normal_init(blocks)
        super().__init__(blocks, num_classes)


class SSDLiteRegressionHead(SSDScoringHead):
    def __init__(self, in_channels: list[int], num_anchors: list[int], norm_layer: Callable[..., nn.Module]) -> None:
        blocks = nn.ModuleList([_prediction_block(c, 4 * a, 3, norm_layer) for c, a in zip(in_channels, num_anchors)])
        _normal_init(blocks)
        super().__init__(blocks, 4)


class SSDLiteHead(nn.Module):
    def __init__(self, in_channels: list[int], num_anchors: list[int], num_classes: int,
                 norm_layer: Callable[..., nn.Module]) -> None:
        super().__init__()
        self.classification_head = SSDLiteClassificationHead(in_channels, num_anchors, num_classes, norm_layer)
        self.regression_head = SSDLiteRegressionHead(in_channels, num_anchors, norm_layer)

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        return {"bbox_regression": self.regression_head(x), "cls_logits": self.classification_head(x)}


class SSDLiteFeatureExtractorMobileNet(nn.Module):
    """MobileNet features split at the C4 block's expansion (two outputs), then four extra blocks."""

    def __init__(self, backbone: nn.Module, c4_pos: int, norm_layer: Callable[..., nn.Module],
                 width_mult: float = 1.0, min_depth: int = 16) -> None:
        super().__init__()
        if backbone[c4_pos].use_res_connect:
            raise ValueError("backbone[c4_pos].use_res_connect should be False")
        self.features = nn.Sequential(nn.Sequential(*backbone[:c4_pos], backbone[c4_pos].block[0]),
                                      nn.Sequential(backbone[c4_pos].block[1:], *backbone[c4_pos + 1:]))

        def depth(d: int) -> int:
            return max(min_depth, int(d * width_mult))

        self.extra = nn.ModuleList([_extra_block(backbone[-1].out_channels, depth(512), norm_layer),
                                    _extra_block(depth(512), depth(256), norm_layer),
                                    _extra_block(depth(256), depth(256), norm_layer),
                                    _extra_block(depth(256), depth(128), norm_layer)])
        _normal_init(self.extra)

    def forward(self, x: Tensor) -> "OrderedDict[str, Tensor]":
        outputs = []
        for block in list(self.features) + list(self.extra):
            x = block(x)
            outputs.append(x)
        return OrderedDict((str(i), v) for i, v in enumerate(outputs))


def _mobilenet_extractor(backbone: Any, trainable_layers: int,
                         norm_layer: Callable[..., nn.Module]) -> SSDLiteFeatureExtractorMobileNet:
    features = backbone.features
    stages = [0] + [i for i, b in enumerate(features) if getattr(b, "_is_cn", False)] + [len(features) - 1]
    if not 0 <= trainable_layers <= len(stages):
        raise ValueError(f"trainable_layers should be in the range [0, {len(stages)}], instead got "
                         f"{trainable_layers}")
    freeze_before = len(features) if trainable_layers == 0 else stages[len(stages) - trainable_layers]
    for block in features[:freeze_before]:
        for parameter in block.parameters():
            parameter.requires_grad_(False)
    return SSDLiteFeatureExtractorMobileNet(features, stages[-2], norm_layer)


@register_model("ssdlite320_mobilenet_v3_large", SSDLite320_MobileNet_V3_Large_Weights)
@handle_legacy_interface(lambda: SSDLite320_MobileNet_V3_Large_Weights.COCO_V1,
                         lambda: MobileNet_V3_Large_Weights.IMAGENET1K_V1)
def ssdlite320_mobilenet_v3_large(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                                  weights_backbone: Any = MobileNet_V3_Large_Weights.IMAGENET1K_V1,
                                  trainable_backbone_layers: int | None = None,
                                  norm_layer: Callable[..., nn.Module] | None = None, **kwargs: Any) -> SSD:
    """SSDLite at 320x320 on MobileNetV3-Large (reduced tail when trained from scratch), 91 COCO classes."""
    weights = SSDLite320_MobileNet_V3_Large_Weights.verify(weights)
    weights_backbone = MobileNet_V3_Large_Weights.verify(weights_backbone)
    if "size" in kwargs:
        warnings.warn("The size of the model is already fixed; ignoring the parameter.")
        kwargs.pop("size")
    if weights is not None:
        weights_backbone = None
        num_classes = overwrite_value("num_classes", num_classes, len(weights.meta["categories"]))
    elif num_classes is None:
        num_classes = 91
    layers = _validate_trainable_layers(weights is not None or weights_backbone is not None,
                                        trainable_backbone_layers, 6, 6)
    if norm_layer is None:
        norm_layer = partial(nn.BatchNorm2d, eps=0.001, momentum=0.03)
    backbone = mobilenet_v3_large(weights=weights_backbone, progress=progress, norm_layer=norm_layer,
                                  reduced_tail=weights_backbone is None, **kwargs)
    if weights_backbone is None:
        _normal_init(backbone)
    backbone = _mobilenet_extractor(backbone, layers, norm_layer)
    size = (320, 320)
    anchors = DefaultBoxGenerator([[2, 3] for _ in range(6)], min_ratio=0.2, max_ratio=0.95)
    channels = det_utils.retrieve_out_channels(backbone, size)
    if len(channels) != len(anchors.aspect_ratios):
        raise ValueError(f"The length of the output channels from the backbone {len(channels)} do not match the "
                         f"length of the anchor generator aspect ratios {len(anchors.aspect_ratios)}")
    defaults = {"score_thresh": 0.001, "nms_thresh": 0.55, "detections_per_img": 300, "topk_candidates": 300,
                "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}
    model = SSD(backbone, anchors, size, num_classes,
                head=SSDLiteHead(channels, anchors.num_anchors_per_location(), num_classes, norm_layer),
                **{**defaults, **kwargs})
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
