"""``GeneralizedRCNN``: transform -> backbone -> RPN -> RoI heads -> postprocess, the skeleton of Faster, Mask
and Keypoint R-CNN (torchvision's ``models.detection.generalized_rcnn``).

In training it takes images and targets (``boxes`` [N, 4] float, ``labels`` [N] int64, plus ``masks`` or
``keypoints``) and returns the dict of losses; in eval it takes images and returns one dict of detections per
image (``boxes``, ``labels``, ``scores``, ...), in the original image coordinates.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any

from ember import nn
from ember.tensor import Tensor

__all__ = ["GeneralizedRCNN"]


def check_training_targets(targets: Any) -> None:
    """Training needs a list of target dicts with ``boxes`` of shape [N, 4]."""
    if targets is None:
        raise AssertionError("targets should not be none when in training mode")
    for target in targets:
        boxes = target["boxes"]
        if not isinstance(boxes, Tensor):
            raise AssertionError(f"Expected target boxes to be of type Tensor, got {type(boxes)}.")
        if boxes.ndim != 2 or boxes.shape[-1] != 4:
            raise AssertionError(f"Expected target boxes to be a tensor of shape [N, 4], got {list(boxes.shape)}.")


def check_degenerate_boxes(targets: list[dict[str, Tensor]]) -> None:
    for index, target in enumerate(targets):
        boxes = target["boxes"]
        degenerate = (boxes[:, 2:] <= boxes[:, :2]).any(dim=1)
        if bool(degenerate.any()):
            bad = boxes[int(degenerate.nonzero()[0, 0])].tolist()
            raise AssertionError(f"All bounding boxes should have positive height and width. Found invalid box "
                                 f"{bad} for target at index {index}.")


def original_sizes(images: list[Tensor]) -> list[tuple[int, int]]:
    sizes = []
    for img in images:
        if img.ndim < 2:
            raise AssertionError(f"expecting the last two dimensions of the Tensor to be H and W instead got "
                                 f"{list(img.shape[-2:])}")
        sizes.append((int(img.shape[-2]), int(img.shape[-1])))
    return sizes


def single_stage_inputs(model: Any, images: list[Tensor], targets: Any) -> tuple:
    """The shared start of RetinaNet, FCOS and SSD's ``forward``: check the targets, transform the images, run the
    backbone and the head, make the anchors. Returns ``(original_sizes, image_list, targets, features,
    head_outputs, anchors)``."""
    if model.training:
        check_training_targets(targets)
    sizes = original_sizes(images)
    image_list, targets = model.transform(images, targets)
    if targets is not None:
        check_degenerate_boxes(targets)
    features = model.backbone(image_list.tensors)
    if isinstance(features, Tensor):
        features = OrderedDict([("0", features)])
    features = list(features.values())
    head_outputs = model.head(features)
    anchors = model.anchor_generator(image_list, features)
    return sizes, image_list, targets, features, head_outputs, anchors


class GeneralizedRCNN(nn.Module):
    """``transform``, ``backbone``, ``rpn`` and ``roi_heads`` run in that order; see the module docstring."""

    def __init__(self, backbone: nn.Module, rpn: nn.Module, roi_heads: nn.Module, transform: nn.Module) -> None:
        super().__init__()
        self.transform = transform
        self.backbone = backbone
        self.rpn = rpn
        self.roi_heads = roi_heads
        self._has_warned = False

    def eager_outputs(self, losses: dict[str, Tensor], detections: list[dict[str, Tensor]]) -> Any:
        return losses if self.training else detections

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None) -> Any:
        if self.training:
            check_training_targets(targets)
        sizes = original_sizes(images)
        image_list, targets = self.transform(images, targets)
        if targets is not None:
            check_degenerate_boxes(targets)
        features = self.backbone(image_list.tensors)
        if isinstance(features, Tensor):
            features = OrderedDict([("0", features)])
        proposals, proposal_losses = self.rpn(image_list, features, targets)
        detections, detector_losses = self.roi_heads(features, proposals, image_list.image_sizes, targets)
        detections = self.transform.postprocess(detections, image_list.image_sizes, sizes)
        losses = {**detector_losses, **proposal_losses}
        return self.eager_outputs(losses, detections)
