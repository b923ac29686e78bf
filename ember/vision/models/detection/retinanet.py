"""RetinaNet (torchvision's ``models.detection.retinanet``): a one-stage detector. An FPN (P3-P7) feeds two conv
towers that predict, for every anchor, sigmoid class scores (focal loss) and box deltas (L1, or GIoU in v2).

Example:
    >>> import ember
    >>> from ember.vision.models.detection import retinanet_resnet50_fpn
    >>> model = retinanet_resnet50_fpn(weights=None, weights_backbone=None, num_classes=3, min_size=64,
    ...                                max_size=64, detections_per_img=5).eval()
    >>> model([ember.rand(3, 48, 64)])[0]["boxes"].shape[1]
    4
"""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Callable

import ember
from ember import nn
from ember.tensor import Tensor
from ember.vision.models._api import handle_legacy_interface, make_weights_enum, register_model
from ember.vision.models.detection import _utils as det_utils
from ember.vision.models.detection._utils import _box_loss, overwrite_eps
from ember.vision.models.detection.anchor_utils import AnchorGenerator
from ember.vision.models.detection.backbone_utils import _resnet_fpn_extractor
from ember.vision.models.detection.faster_rcnn import detection_setup
from ember.vision.models.detection.generalized_rcnn import single_stage_inputs
from ember.vision.models.detection.rpn import permute_and_flatten
from ember.vision.models.detection.transform import GeneralizedRCNNTransform
from ember.vision.models.resnet import ResNet50_Weights, resnet50
from ember.vision.ops import FrozenBatchNorm2d, sigmoid_focal_loss
from ember.vision.ops import boxes as box_ops
from ember.vision.ops.feature_pyramid_network import LastLevelP6P7
from ember.vision.ops.misc import Conv2dNormActivation

__all__ = ["RetinaNet", "RetinaNet_ResNet50_FPN_Weights", "RetinaNet_ResNet50_FPN_V2_Weights",
           "retinanet_resnet50_fpn", "retinanet_resnet50_fpn_v2", "RetinaNetHead", "RetinaNetClassificationHead",
           "RetinaNetRegressionHead"]

RetinaNet_ResNet50_FPN_Weights = make_weights_enum("RetinaNet_ResNet50_FPN_Weights", __name__)
RetinaNet_ResNet50_FPN_V2_Weights = make_weights_enum("RetinaNet_ResNet50_FPN_V2_Weights", __name__)


def _sum(x: list[Tensor]) -> Tensor:
    total = x[0]
    for item in x[1:]:
        total = total + item
    return total


def _v1_to_v2_weights(state_dict: dict, prefix: str) -> None:
    """Version-1 towers were plain ``conv.0, conv.2, ...`` (conv, ReLU pairs); now ``conv.i.0``."""
    for i in range(4):
        for kind in ("weight", "bias"):
            old = f"{prefix}conv.{2 * i}.{kind}"
            if old in state_dict:
                state_dict[f"{prefix}conv.{i}.0.{kind}"] = state_dict.pop(old)


def _default_anchorgen() -> AnchorGenerator:
    sizes = tuple((x, int(x * 2 ** (1.0 / 3)), int(x * 2 ** (2.0 / 3))) for x in [32, 64, 128, 256, 512])
    return AnchorGenerator(sizes, ((0.5, 1.0, 2.0),) * len(sizes))


def _tower(in_channels: int, norm_layer: Callable[..., nn.Module] | None) -> nn.Sequential:
    """Four 3x3 conv(-norm)-ReLU layers, N(0, 0.01) weights, zero biases."""
    tower = nn.Sequential(*[Conv2dNormActivation(in_channels, in_channels, norm_layer=norm_layer) for _ in range(4)])
    for layer in tower.modules():
        if isinstance(layer, nn.Conv2d):
            nn.init.normal_(layer.weight, std=0.01)
            if layer.bias is not None:
                nn.init.constant_(layer.bias, 0)
    return tower


class _VersionedHead(nn.Module):
    _version = 2

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        if (local_metadata.get("version") or 0) < 2:
            _v1_to_v2_weights(state_dict, prefix)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class RetinaNetClassificationHead(_VersionedHead):
    """Per-anchor class logits ``[N, HWA, num_classes]``; the bias starts at the prior ``prior_probability``."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int, prior_probability: float = 0.01,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.conv = _tower(in_channels, norm_layer)
        self.cls_logits = nn.Conv2d(in_channels, num_anchors * num_classes, kernel_size=3, stride=1, padding=1)
        nn.init.normal_(self.cls_logits.weight, std=0.01)
        nn.init.constant_(self.cls_logits.bias, -math.log((1 - prior_probability) / prior_probability))
        self.num_classes = num_classes
        self.num_anchors = num_anchors
        self.BETWEEN_THRESHOLDS = det_utils.Matcher.BETWEEN_THRESHOLDS

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor],
                     matched_idxs: list[Tensor]) -> Tensor:
        """Sigmoid focal loss over the anchors that are not ignored, per image divided by its foreground count."""
        losses = []
        for target, logits, matched in zip(targets, head_outputs["cls_logits"], matched_idxs):
            fg = ember.where(matched >= 0)[0]
            one_hot = ember.zeros_like(logits)
            one_hot[fg, target["labels"][matched[fg]]] = 1.0
            valid = matched != self.BETWEEN_THRESHOLDS
            losses.append(sigmoid_focal_loss(logits[valid], one_hot[valid], reduction="sum") / max(1, fg.numel()))
        return _sum(losses) / len(targets)

    def forward(self, x: list[Tensor]) -> Tensor:
        outs = []
        for features in x:
            logits = self.cls_logits(self.conv(features))
            n, _, h, w = logits.shape
            outs.append(permute_and_flatten(logits, n, -1, self.num_classes, h, w))
        return ember.cat(outs, dim=1)


class RetinaNetRegressionHead(_VersionedHead):
    """Per-anchor box deltas ``[N, HWA, 4]``; loss ``_loss_type`` ("l1", "smooth_l1", "giou", ...)."""

    def __init__(self, in_channels: int, num_anchors: int, norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.conv = _tower(in_channels, norm_layer)
        self.bbox_reg = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=3, stride=1, padding=1)
        nn.init.normal_(self.bbox_reg.weight, std=0.01)
        nn.init.zeros_(self.bbox_reg.bias)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self._loss_type = "l1"

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor],
                     anchors: list[Tensor], matched_idxs: list[Tensor]) -> Tensor:
        losses = []
        for target, deltas, anchors_i, matched in zip(targets, head_outputs["bbox_regression"], anchors,
                                                      matched_idxs):
            fg = ember.where(matched >= 0)[0]
            gt = target["boxes"][matched[fg]]
            losses.append(_box_loss(self._loss_type, self.box_coder, anchors_i[fg, :], gt, deltas[fg, :])
                          / max(1, fg.numel()))
        return _sum(losses) / max(1, len(targets))

    def forward(self, x: list[Tensor]) -> Tensor:
        outs = []
        for features in x:
            deltas = self.bbox_reg(self.conv(features))
            n, _, h, w = deltas.shape
            outs.append(permute_and_flatten(deltas, n, -1, 4, h, w))
        return ember.cat(outs, dim=1)


class RetinaNetHead(nn.Module):
    """The classification and regression towers."""

    def __init__(self, in_channels: int, num_anchors: int, num_classes: int,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.classification_head = RetinaNetClassificationHead(in_channels, num_anchors, num_classes,
                                                               norm_layer=norm_layer)
        self.regression_head = RetinaNetRegressionHead(in_channels, num_anchors, norm_layer=norm_layer)

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor], anchors: list[Tensor],
                     matched_idxs: list[Tensor]) -> dict[str, Tensor]:
        return {"classification": self.classification_head.compute_loss(targets, head_outputs, matched_idxs),
                "bbox_regression": self.regression_head.compute_loss(targets, head_outputs, anchors, matched_idxs)}

    def forward(self, x: list[Tensor]) -> dict[str, Tensor]:
        return {"cls_logits": self.classification_head(x), "bbox_regression": self.regression_head(x)}


def split_per_level(head_outputs: dict[str, Tensor], anchors: list[Tensor], features: list[Tensor]
                    ) -> tuple[dict[str, list[Tensor]], list[list[Tensor]]]:
    """Head outputs and anchors cut back into feature levels (each level has H*W*A anchors)."""
    cells = [f.shape[2] * f.shape[3] for f in features]
    per_cell = head_outputs["cls_logits"].shape[1] // sum(cells)
    counts = [c * per_cell for c in cells]
    split = {k: list(v.split(counts, dim=1)) for k, v in head_outputs.items()}
    return split, [list(a.split(counts)) for a in anchors]


class RetinaNet(nn.Module):
    """RetinaNet on any ``backbone`` with ``out_channels``; torchvision's arguments (transform sizes, anchors,
    head, matcher thresholds, score/NMS thresholds, ``topk_candidates`` per level, ``detections_per_img``)."""

    def __init__(self, backbone: nn.Module, num_classes: int, min_size: int = 800, max_size: int = 1333,
                 image_mean: list[float] | None = None, image_std: list[float] | None = None,
                 anchor_generator: AnchorGenerator | None = None, head: nn.Module | None = None,
                 proposal_matcher: det_utils.Matcher | None = None, score_thresh: float = 0.05,
                 nms_thresh: float = 0.5, detections_per_img: int = 300, fg_iou_thresh: float = 0.5,
                 bg_iou_thresh: float = 0.4, topk_candidates: int = 1000, **kwargs: Any) -> None:
        super().__init__()
        if not hasattr(backbone, "out_channels"):
            raise ValueError("backbone should contain an attribute out_channels specifying the number of output "
                             "channels (assumed to be the same for all the levels)")
        self.backbone = backbone
        if not isinstance(anchor_generator, (AnchorGenerator, type(None))):
            raise TypeError(f"anchor_generator should be of type AnchorGenerator or None instead of "
                            f"{type(anchor_generator)}")
        self.anchor_generator = anchor_generator if anchor_generator is not None else _default_anchorgen()
        if head is None:
            head = RetinaNetHead(backbone.out_channels, self.anchor_generator.num_anchors_per_location()[0],
                                 num_classes)
        self.head = head
        self.proposal_matcher = proposal_matcher if proposal_matcher is not None else det_utils.Matcher(
            fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=True)
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self.transform = GeneralizedRCNNTransform(min_size, max_size, image_mean or [0.485, 0.456, 0.406],
                                                  image_std or [0.229, 0.224, 0.225], **kwargs)
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.topk_candidates = topk_candidates
        self._has_warned = False

    def eager_outputs(self, losses: dict[str, Tensor], detections: list[dict[str, Tensor]]) -> Any:
        return losses if self.training else detections

    def compute_loss(self, targets: list[dict[str, Tensor]], head_outputs: dict[str, Tensor],
                     anchors: list[Tensor]) -> dict[str, Tensor]:
        matched_idxs = []
        for anchors_i, target in zip(anchors, targets):
            if target["boxes"].numel() == 0:
                matched_idxs.append(ember.full((anchors_i.shape[0],), -1, dtype=ember.int64, device=anchors_i.device))
            else:
                matched_idxs.append(self.proposal_matcher(box_ops.box_iou(target["boxes"], anchors_i)))
        return self.head.compute_loss(targets, head_outputs, anchors, matched_idxs)

    def postprocess_detections(self, head_outputs: dict[str, list[Tensor]], anchors: list[list[Tensor]],
                               image_shapes: list[tuple[int, int]]) -> list[dict[str, Tensor]]:
        """Per level: scores > ``score_thresh``, the best ``topk_candidates``, decoded and clipped; then per-class
        NMS over all levels and the best ``detections_per_img``."""
        detections = []
        for index, shape in enumerate(image_shapes):
            boxes_all, scores_all, labels_all = [], [], []
            for deltas, logits, anchors_l in zip([d[index] for d in head_outputs["bbox_regression"]],
                                                 [c[index] for c in head_outputs["cls_logits"]], anchors[index]):
                num_classes = logits.shape[-1]
                scores = ember.sigmoid(logits).flatten()
                keep = scores > self.score_thresh
                scores = scores[keep]
                candidates = ember.where(keep)[0]
                scores, order = scores.topk(det_utils._topk_min(candidates, self.topk_candidates, 0))
                candidates = candidates[order]
                anchor_idx = ember.div(candidates, num_classes, rounding_mode="floor")
                boxes = self.box_coder.decode_single(deltas[anchor_idx], anchors_l[anchor_idx])
                boxes_all.append(box_ops.clip_boxes_to_image(boxes, shape))
                scores_all.append(scores)
                labels_all.append(candidates % num_classes)
            boxes, scores, labels = ember.cat(boxes_all, dim=0), ember.cat(scores_all, dim=0), ember.cat(labels_all,
                                                                                                         dim=0)
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            detections.append({"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep]})
        return detections

    def forward(self, images: list[Tensor], targets: list[dict[str, Tensor]] | None = None) -> Any:
        sizes, image_list, targets, features, head_outputs, anchors = single_stage_inputs(self, images, targets)
        losses: dict[str, Tensor] = {}
        detections: list[dict[str, Tensor]] = []
        if self.training:
            losses = self.compute_loss(targets, head_outputs, anchors)
        else:
            split_outputs, split_anchors = split_per_level(head_outputs, anchors, features)
            detections = self.postprocess_detections(split_outputs, split_anchors, image_list.image_sizes)
            detections = self.transform.postprocess(detections, image_list.image_sizes, sizes)
        return self.eager_outputs(losses, detections)


@register_model("retinanet_resnet50_fpn", RetinaNet_ResNet50_FPN_Weights)
@handle_legacy_interface(lambda: RetinaNet_ResNet50_FPN_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def retinanet_resnet50_fpn(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                           weights_backbone: Any = ResNet50_Weights.IMAGENET1K_V1,
                           trainable_backbone_layers: int | None = None, **kwargs: Any) -> RetinaNet:
    """RetinaNet, ResNet-50 FPN (P3-P7, P6/P7 from P5), 91 COCO classes."""
    weights, weights_backbone, num_classes, is_trained, layers = detection_setup(
        RetinaNet_ResNet50_FPN_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    norm_layer = FrozenBatchNorm2d if is_trained else nn.BatchNorm2d
    backbone = resnet50(weights=weights_backbone, progress=progress, norm_layer=norm_layer)
    backbone = _resnet_fpn_extractor(backbone, layers, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256))
    model = RetinaNet(backbone, num_classes, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
        if weights == RetinaNet_ResNet50_FPN_Weights.COCO_V1:
            overwrite_eps(model, 0.0)
    return model


@register_model("retinanet_resnet50_fpn_v2", RetinaNet_ResNet50_FPN_V2_Weights)
@handle_legacy_interface(lambda: RetinaNet_ResNet50_FPN_V2_Weights.COCO_V1, lambda: ResNet50_Weights.IMAGENET1K_V1)
def retinanet_resnet50_fpn_v2(*, weights: Any = None, progress: bool = True, num_classes: int | None = None,
                              weights_backbone: Any = None, trainable_backbone_layers: int | None = None,
                              **kwargs: Any) -> RetinaNet:
    """RetinaNet v2: P6/P7 from C5, group-normed towers, GIoU box loss."""
    weights, weights_backbone, num_classes, _, layers = detection_setup(
        RetinaNet_ResNet50_FPN_V2_Weights, ResNet50_Weights, weights, weights_backbone, num_classes,
        trainable_backbone_layers, 5, 3)
    backbone = _resnet_fpn_extractor(resnet50(weights=weights_backbone, progress=progress), layers,
                                     returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(2048, 256))
    anchors = _default_anchorgen()
    head = RetinaNetHead(backbone.out_channels, anchors.num_anchors_per_location()[0], num_classes,
                         norm_layer=partial(nn.GroupNorm, 32))
    head.regression_head._loss_type = "giou"
    model = RetinaNet(backbone, num_classes, anchor_generator=anchors, head=head, **kwargs)
    if weights is not None:
        model.load_state_dict(weights.get_state_dict(progress=progress, check_hash=True))
    return model
