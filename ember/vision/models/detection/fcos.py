"""FCOS (torchvision's ``models.detection.fcos``): an anchor-free one-stage detector. Every feature-map cell
predicts class scores, the distances to the four sides of a box (``BoxLinearCoder``) and a centre-ness logit;
training matches cells to boxes by centre sampling and per-level size ranges, with focal, GIoU and centre-ness
losses.

Example:
    >>> import ember
    >>> from ember.vision.models.detection import fcos_resnet50_fpn
    >>> model = fcos_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3, min_size=64, max_size=64,
    ...                           score_thresh=0.0, detections_per_img=5).eval()
    >>> model([ember.rand(3, 48, 64)])[0]["scores"].shape
    ember.Size([5])
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection import _utils as det_utils
from ember.vision.models.detection.anchor_utils import AnchorGenerator
from ember.vision.models.detection.backbone_utils import _resnet_fpn_extractor
from ember.vision.models.detection.faster_rcnn import detection_setup
from ember.vision.models.detection.generalized_rcnn import single_stage_inputs
from ember.vision.models.detection.retinanet import split_per_level
from ember.vision.models.detection.rpn import permute_and_flatten
from ember.vision.models.detection.transform import GeneralizedRCNNTransform
from ember.vision.models.resnet import ResNet50_Weights, resnet50
from ember.vision.ops import FrozenBatchNorm2d, generalized_box_iou_loss, sigmoid_focal_loss
from ember.vision.ops import boxes as box_ops
from ember.vision.ops.feature_pyramid_network import LastLevelP6P7

__all__ = ["FCOS", "FCOS_ResNet50_FPN_Weights", "fcos_resnet50_fpn", "FCOSHead", "FCOSClassificationHead",
           "FCOSRegressionHead"]

FCOS_ResNet50_FPN_Weights = make_weights_enum("FCOS_ResNet50_FPN_Weights", __name__)


def _tower(in_channels: int, num_convs: int, norm_layer: Callable[..., nn.Module] | None) -> nn.Sequential:
    """``num_convs`` x (3x3 conv, norm (GroupNorm(32) by default), ReLU); N(0, 0.01) weights, zero biases."""
    norm_layer = norm_layer if norm_layer is not None else partial(nn.GroupNorm, 32)
    layers: list[nn.Module] = []
    for _ in range(num_convs):
        layers += [nn.Conv2d(in_channels, in_channels, kernel_size=3, stride=1, padding=1), norm_layer(in_channels),
                   nn.ReLU()]
    tower = nn.Sequential(*layers)
    for layer in tower.children():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, 0)
    return tower


class FCOSClassificationHead(nn.Module):
    """Per-cell class logits ``[N, HW, num_classes]``."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, num_convs: int = 4,
                 prior_probability: float = 0.01, norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.conv = _tower(in_channels, num_convs, norm_layer)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3, stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias, -math.log((1 - prior_probability) / prior_probability))

    def forward(self, x: list[Tensor]) -> Tensor:
        outs = []
        for features in x:
            logits = self.cls_logits(self.conv(features))
            n, _, h, w = logits.shape
            outs.append(permute_and_flatten(logits, n, -1, self.num_classes, h, w))
        return ember.cat(outs, dim=1)


class FCOSRegressionHead(nn.Module):
    """Per-cell side distances (ReLU, ``[N, HW, 4]``) and centre-ness logits (``[N, HW, 1]``)."""

    def __init__(self, in_channels: int, num_anchors: int, num_convs: int = 4,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.conv = _tower(in_channels, num_convs, norm_layer)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1, padding=1)
        self.bbox_ctrness = nn.Conv2d(in_channels, num_anchors * 1, kernel_size=3, stride=1, padding=1)
        for layer in (self.bbox_reg, self.bbox_ctrness):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.zeros_(layer.bias)

    def forward(self, x: list[Tensor]) -> tuple[Tensor, Tensor]:
        boxes, centres = [], []
        for features in x:
            t = self.conv(features)
            deltas = F.relu(self.bbox_reg(t))
            n, _, h, w = deltas.shape
            boxes.append(permute_and_flatten(deltas, n, -1, 4, h, w))
            centres.append(permute_and_flatten(self.bbox_ctrness(t), n, -1, 1, h, w))
        return ember.cat(boxes, dim=1), ember.cat(centres, dim=1)


class FCOSHead(nn.Module):
    """The classification and regression towers, and FCOS's losses."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, num_convs: int | None = 4) -> None:
        super().__init__()
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        self.classification_head = FCOSClassificationHead(in_channels, num_anchors, num_classes, num_convs)
        self.regression_head = FCOSRegressionHead(in_channels, num_anchors, num_convs)

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        """Focal loss on all cells; GIoU and centre-ness BCE on the matched ones; each over the match count."""
        classes, boxes = [], []
        for target, matched in zip(targets, matched_idxs):
            if len(target["labels"]) == 0:
                cls = target["labels"].new_zeros((len(matched),))
                box = target["boxes"].new_zeros((len(matched), 4))
            else:
                cls = target["labels"][matched.clip(min=0)]
                box = target["boxes"][matched.clip(min=0)]
            cls[matched < 0] = -1  # background
            classes.append(cls)
            boxes.append(box)
        gt_boxes, gt_classes, anchors_all = ember.stack(boxes), ember.stack(classes), ember.stack(anchors)
        fg = gt_classes >= 0
        num_fg = max(1, int(fg.sum().item()))
        one_hot = ember.zeros_like(head_outputs["cls_logits"])
        img_idx, cell_idx = ember.where(fg)
        one_hot[img_idx, cell_idx, gt_classes[img_idx, cell_idx]] = 1.0
        loss_cls = sigmoid_focal_loss(head_outputs["cls_logits"], one_hot, reduction="sum")
        pred_boxes = self.box_coder.decode(head_outputs["bbox_regression"], anchors_all)
        loss_reg = generalized_box_iou_loss(pred_boxes[fg], gt_boxes[fg], reduction="sum")
        codes = self.box_coder.encode(anchors_all, gt_boxes)
        if len(codes) == 0:
            ctrness = codes.new_zeros(codes.shape[:-1])
        else:
            lr, tb = codes[:, :, [0, 2]], codes[:, :, [1, 3]]
            ctrness = ember.sqrt((lr.min(dim=-1)[0] / lr.max(dim=-1)[0]) * (tb.min(dim=-1)[0] / tb.max(dim=-1)[0]))
        loss_ctr = F.binary_cross_entropy_with_logits(head_outputs["bbox_ctrness"].squeeze(dim=2)[fg], ctrness[fg],
                                                      reduction="sum")
        return {"classification": loss_cls / num_fg, "bbox_regression": loss_reg / num_fg,
                "bbox_ctrness": loss_ctr / num_fg}

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        boxes, centres = self.regression_head(x)
        return {"cls_logits": self.classification_head(x), "bbox_regression": boxes, "bbox_ctrness": centres}


class FCOS(nn.Module):
    """FCOS on any ``backbone`` with ``out_channels``; torchvision's arguments (one anchor per cell whose size is
    the level's stride, ``center_sampling_radius``, score/NMS thresholds, ``topk_candidates``, ...)."""

    def __init__(self, backbone: nn.Module, num_classes: int, min_size: int = 800, max_size: int = 1333,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 anchor_generator: AnchorGenerator | None = None, head: nn.Module | None = None,
                 center_sampling_radius: float = 1.5, score_thresh: float = 0.2, nms_thresh: float = 0.6,
                 detections_per_img: int = 100, topk_candidates: int = 1000, **kwargs: Any) -> None:
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        self.backbone = backbone
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"anchor_generator should be of type AnchorGenerator or None, instead  got "
                            f"{type(anchor_generator)}")
        if anchor_generator is None:
            sizes = ((8,), (16,), (32,), (64,), (128,))  # the levels' strides
            anchor_generator = AnchorGenerator(sizes, ((1.0,),) * len(sizes))
        self.anchor_generator = anchor_generator
        if anchor_generator.num_anchors_per_location()[0] != 1:
            raise ValueError(f"anchor_generator.num_anchors_per_location()[0] should be 1 instead of "
                             f"{anchor_generator.num_anchors_per_location()[0]}")
        self.head = head if head is not None else FCOSHead(backbone.out_channels, 1, num_classes)
        self.box_coder = det_utils.BoxLinearCoder(normalize_by_size=True)
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean or [0.485, 0.456, 0.406],
                                                  image_std or [0.229, 0.224, 0.225], **kwargs)
        self.center_sampling_radius = center_sampling_radius
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates
        self._has_warned = False

    def eager_outputs(self, losses: dict[str, Tensor], detections: list[dict[str, Tensor]]) -> Any:
        return losses if self.training else detections

    def _match(self, anchors: Tensor, gt_boxes: Tensor, num_anchors_per_level: list[int]) -> Tensor:
        """Each cell's gt index (-1: none): the cell's centre lies within ``radius`` strides of the gt's centre and
        inside the gt, the gt's largest side distance fits the level's range; ties go to the smallest gt."""
        gt_centres = (gt_boxes[:, :2] + gt_boxes[:, 2:]) / 2
        centres = (anchors[:, :2] + anchors[:, 2:]) / 2
        sizes = anchors[:, 2] - anchors[:, 0]
        match = (centres[:, None, :] - gt_centres[None, :, :]).abs().max(dim=2)[0] < \
            self.center_sampling_radius * sizes[:, None]
        x, y = centres.unsqueeze(dim=2).unbind(dim=1)
        x0, y0, x1, y1 = gt_boxes.unsqueeze(dim=0).unbind(dim=2)
        distances = ember.stack([x - x0, y - y0, x1 - x, y1 - y], dim=2)
        match = match & (distances.min(dim=2)[0] > 0)
        lower = sizes * 4
        lower[: num_anchors_per_level[0]] = 0
        upper = sizes * 8
        upper[-num_anchors_per_level[-1]:] = float("inf")
        largest = distances.max(dim=2)[0]
        match = match & (largest > lower[:, None]) & (largest < upper[:, None])
        areas = (gt_boxes[:, 2] - gt_boxes[:, 0]) * (gt_boxes[:, 3] - gt_boxes[:, 1])
        best, idx = (match.to(ember.float32) * (1e8 - areas[None, :])).max(dim=1)
        idx[best < 1e-5] = -1
        return idx

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     num_anchors_per_level: list[int]) -> dict[str, Tensor]:
        matched_idxs = []
        for anchors_i, target in zip(anchors, targets):
            if target["boxes"].numel() == 0:
                matched_idxs.append(ember.full((anchors_i.shape[0],), -1, dtype=ember.int64, device=anchors_i.device))
            else:
                matched_idxs.append(self._match(anchors_i, target["boxes"], num_anchors_per_level))
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs: dict[str, list[Tensor]], anchors: list[list[Tensor]],
                               image_shapes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Score = sqrt(sigmoid(class) * sigmoid(centre-ness)); per level the best ``topk_candidates`` above
        ``score_thresh``; per-class NMS over the levels; the best ``detections_per_img``."""
        detections = []
        for index, shape in enumerate(image_shapes):
            boxes_all, scores_all, labels_all = [], [], []
            for deltas, logits, ctr, anchors_l in zip([b[index] for b in head_outputs["bbox_regression"]],
                                                      [c[index] for c in head_outputs["cls_logits"]],
                                                      [c[index] for c in head_outputs["bbox_ctrness"]],
                                                      anchors[index]):
                num_classes = logits.shape[-1]
                scores = ember.sqrt(ember.sigmoid(logits) * ember.sigmoid(ctr)).flatten()
                keep = scores > self.score_thresh
                scores = scores[keep]
                candidates = ember.where(keep)[0]
                scores, order = scores.topk(det_utils._topk_min(candidates, self.topk_candidates, 0))
                candidates = candidates[order]
                anchor_idx = ember.div(candidates, num_classes, rounding_mode="floor")
                boxes = self.box_coder.decode(deltas[anchor_idx], anchors_l[anchor_idx])
                boxes_all.append(box_ops.clip_boxes_to_image(boxes, shape))
                scores_all.append(scores)
                labels_all.append(candidates % num_classes)
            boxes, scores = ember.cat(boxes_all, dim=0), ember.cat(scores_all, dim=0)
            labels = ember.cat(labels_all, dim=0)
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            detections.append({"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]})
        return detections

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None) -> Any:
        sizes, image_list, targets, features, head_outputs, anchors = single_stage_inputs(self, images, targets)
        losses: dict[str, Tensor] = {}
        detections: list[dict[str, Tensor]] = []
        if self.training:
            losses = self.compute_loss(targets, head_outputs, anchors, [f.shape[2] * f.shape[3] for f in features])
        else:
            split_outputs, split_anchors = split_per_level(head_outputs, anchors, features)
            detections = self.postprocess_detections(split_outputs, split_anchors, image_list.image_sizes)
            detections = self.transform.postprocess(detections, image_list.image_sizes, sizes)
        return self.eager_outputs(losses, detections)


@register_model("fcos_resnet50_fpn", FCOS_ResNet50_FPN_Weights)
@handle_legacy_interface(lambda: FCOS_ResNet50_FPN_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def fcos_resnet50_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                      weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1, trainable_backbone_layers: int | None = None,
                      **kwargs: Any) -> FCOS:
    """FCOS, ResNet-50 FPN (P3-P7), 91 COCO classes."""
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        FCOS_ResNet50_FPN_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _resnet_fpn_extractor(backbone, layers, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
    model = FCOS(backbone, num_classes, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
