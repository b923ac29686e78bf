"""The shape every torchvision segmentation model shares: backbone features, a classifier head, an optional
auxiliary head, both upsampled to the input size."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ember import nn
from ember.nn import functional as F


class _SimpleSegmentationModel(nn.Module):
    """``forward`` returns ``{"out": ..., "aux": ...}`` (``aux`` only with an auxiliary classifier), each
    (N, classes, H, W) at the input's size (bilinear, corners not aligned)."""

    def __init__(self, backbone: nn.Module, classifier: nn.Module, aux_classifier: nn.Module | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.aux_classifier = aux_classifier

    def forward(self, x: Any) -> "OrderedDict[str, Any]":
        size = tuple(x.shape[-2:])
        features = self.backbone(x)
        result: OrderedDict[str, Any] = OrderedDict()
        result["out"] = F.interpolate(self.classifier(features["out"]), size=size, mode="bilinear",
                                      align_corners=False)
        if self.aux_classifier is not None:
            result["aux"] = F.interpolate(self.aux_classifier(features["aux"]), size=size, mode="bilinear",
                                          align_corners=False)
        return result


def overwrite_value(param: str, actual: Any, expected: Any) -> Any:
    """``expected``, refusing a different explicit ``actual`` (torchvision's ``_ovewrite_value_param``)."""
    if actual is not None and actual != expected:
        raise ValueError(f"The parameter '{param}' expected value {expected} but got {actual} instead.")
    return expected


def build(weights_enum: Any, backbone_enum: Any, make: Any, weights: Any, progress: bool, num_classes: int | None,
          aux_loss: bool | None, weights_backbone: Any) -> Any:
    """torchvision's segmentation builder logic: published weights fix the classes (21 VOC) and the auxiliary
    head and replace the backbone's weights; otherwise 21 classes by default. ``make(weights_backbone,
    num_classes, aux_loss)`` builds the model."""
    weights = weights_enum.verify(weights)
    weights_backbone = backbone_enum.verify(weights_backbone)
    if weights is not None:
        weights_backbone = None
        num_classes = overwrite_value("num_classes", num_classes, len(weights.meta["categories"]))
        aux_loss = overwrite_value("aux_loss", aux_loss, True)
    elif num_classes is None:
        num_classes = 21
    model = make(weights_backbone, num_classes, aux_loss)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
