"""The region proposal network of Faster/Mask/Keypoint R-CNN (torchvision's ``models.detection.rpn``).

A small conv head scores every anchor ("object or not") and regresses a box from it; the best
``pre_nms_top_n`` per level are decoded, clipped, filtered and reduced by per-level NMS to at most
``post_nms_top_n`` proposals per image. In training, anchors are matched to the targets (IoU >= 0.7 positive,
< 0.3 negative) and a balanced sample gives the objectness and box losses.

Example:
    >>> import ember
    >>> from ember.vision.models.detection.rpn import RPNHead
    >>> logits, deltas = RPNHead(8, 3)([ember.zeros(1, 8, 4, 4)])
    >>> tuple(logits[0].shape), tuple(deltas[0].shape)
    ((1, 3, 4, 4), (1, 12, 4, 4))
"""
from __future__ import annotations

from typing import Any

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.ops import Conv2dNormActivation
from ember.vision.ops import boxes as box_ops
from ember.vision.models.detection import _utils as det_utils
from ember.vision.models.detection.anchor_utils import AnchorGenerator
from ember.vision.models.detection.image_list import ImageList

__all__ = ["AnchorGenerator", "RPNHead", "RegionProposalNetwork", "concat_box_prediction_layers"]


class RPNHead(nn.Module):
    """``conv_depth`` 3x3 conv + ReLU layers, then 1x1 convs to ``num_anchors`` objectness logits and
    ``4 * num_anchors`` box deltas, applied to each feature level."""

    _version = 2

    def __init__(self, in_channels: int, num_anchors: int, conv_depth: int = 1) -> None:
        super().__init__()
        self.conv = nn.Sequential(*[Conv2dNormActivation(in_channels, in_channels, kernel_size=3, norm_layer=None)
                                    for _ in range(conv_depth)])
        self.cls_logits = nn.Conv2d(in_channels, num_anchors, kernel_size=1, stride=1)
        self.bbox_pred = nn.Conv2d(in_channels, num_anchors * 4, kernel_size=1, stride=1)
        for layer in self.modules():
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, std=0.01)
                if layer.bias is not None:
                    nn.init.constant_(layer.bias, 0)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict, strict: bool,
                              missing_keys: list, unexpected_keys: list, error_msgs: list) -> None:
        # checkpoints of version < 2 hold the single conv as `conv.weight`; it now sits in `conv.0.0`
        if (local_metadata.get("version") or 0) < 2:
            for kind in ("weight", "bias"):
                if f"{prefix}conv.{kind}" in state_dict:
                    state_dict[f"{prefix}conv.0.0.{kind}"] = state_dict.pop(f"{prefix}conv.{kind}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        logits, deltas = [], []
        for feature in x:
            t = self.conv(feature)
            logits.append(self.cls_logits(t))
            deltas.append(self.bbox_pred(t))
        return logits, deltas


def permute_and_flatten(layer: Tensor, N: int, A: int, C: int, H: int, W: int) -> Tensor:
    """[N, A*C, H, W] -> [N, H*W*A, C] (anchor-major within each cell, as the anchors are laid out)."""
    return layer.view(N, -1, C, H, W).permute(0, 3, 4, 1, 2).reshape(N, -1, C)


def concat_box_prediction_layers(box_cls: list[Tensor], box_regression: list[Tensor]) -> tuple[Tensor, Tensor]:
    """All levels' predictions as ``[N * anchors, C]`` scores and ``[N * anchors, 4]`` deltas."""
    scores, deltas = [], []
    for cls_level, reg_level in zip(box_cls, box_regression):
        n, axc, h, w = cls_level.shape
        a = reg_level.shape[1] // 4
        scores.append(permute_and_flatten(cls_level, n, a, axc // a, h, w))
        deltas.append(permute_and_flatten(reg_level, n, a, 4, h, w))
    return ember.cat(scores, dim=1).flatten(0, -2), ember.cat(deltas, dim=1).reshape(-1, 4)


class RegionProposalNetwork(nn.Module):
    """Proposals (and, in training, the RPN losses) from features; see the module docstring."""

    def __init__(self, anchor_generator: AnchorGenerator, head: nn.Module, fg_iou_thresh: float,
                 bg_iou_thresh: float, batch_size_per_image: int, positive_fraction: float,
                 pre_nms_top_n: dict[str, int], post_nms_top_n: dict[str, int], nms_thresh: float,
                 score_thresh: float = 0.0) -> None:
        super().__init__()
        self.anchor_generator = anchor_generator
        self.head = head
        self.box_coder = det_utils.BoxCoder(weights=(1.0, 1.0, 1.0, 1.0))
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=True)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self._pre_nms_top_n = pre_nms_top_n
        self._post_nms_top_n = post_nms_top_n
        self.nms_thresh = nms_thresh
        self.score_thresh = score_thresh
        self.min_size = 1e-3

    def pre_nms_top_n(self) -> int:
        return self._pre_nms_top_n["training" if self.training else "testing"]

    def post_nms_top_n(self) -> int:
        return self._post_nms_top_n["training" if self.training else "testing"]

    def assign_targets_to_anchors(self, anchors: list[Tensor], targets: list[dict[str, Tensor]]
                                  ) -> tuple[list[Tensor], list[Tensor]]:
        """Per image: labels (1 object, 0 background, -1 ignored) and the matched gt box of every anchor."""
        labels, matched_boxes = [], []
        for anchors_i, target in zip(anchors, targets):
            gt = target["boxes"]
            if gt.numel() == 0:
                matched_boxes.append(ember.zeros(anchors_i.shape, dtype=ember.float32, device=anchors_i.device))
                labels.append(ember.zeros((anchors_i.shape[0],), dtype=ember.float32, device=anchors_i.device))
                continue
            matched = self.proposal_matcher(self.box_similarity(gt, anchors_i))
            matched_boxes.append(gt[matched.clamp(min=0)])
            label = (matched >= 0).to(dtype=ember.float32)
            label[matched == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0.0
            label[matched == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1.0
            labels.append(label)
        return labels, matched_boxes

    def _get_top_n_idx(self, objectness: Tensor, num_anchors_per_level: list[int]) -> Tensor:
        chosen, offset = [], 0
        for level in objectness.split(num_anchors_per_level, 1):
            k = det_utils._topk_min(level, self.pre_nms_top_n(), 1)
            chosen.append(level.topk(k, dim=1)[1] + offset)
            offset += level.shape[1]
        return ember.cat(chosen, dim=1)

    def filter_proposals(self, proposals: Tensor, objectness: Tensor, image_shapes: list[tuple[int, int]],
                         num_anchors_per_level: list[int]) -> tuple[list[Tensor], list[Tensor]]:
        num_images = proposals.shape[0]
        device = proposals.device
        objectness = objectness.detach().reshape(num_images, -1)
        levels = ember.cat([ember.full((n,), i, dtype=ember.int64, device=device)
                            for i, n in enumerate(num_anchors_per_level)], 0).reshape(1, -1).expand_as(objectness)
        top = self._get_top_n_idx(objectness, num_anchors_per_level)
        rows = ember.arange(num_images, device=device)[:, None]
        objectness, levels, proposals = objectness[rows, top], levels[rows, top], proposals[rows, top]
        probs = ember.sigmoid(objectness)
        final_boxes, final_scores = [], []
        for boxes, scores, lvl, shape in zip(proposals, probs, levels, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            keep = box_ops.remove_small_boxes(boxes, self.min_size)
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = ember.where(scores >= self.score_thresh)[0]
            boxes, scores, lvl = boxes[keep], scores[keep], lvl[keep]
            keep = box_ops.batched_nms(boxes, scores, lvl, self.nms_thresh)[: self.post_nms_top_n()]
            final_boxes.append(boxes[keep])
            final_scores.append(scores[keep])
        return final_boxes, final_scores

    def compute_loss(self, objectness: Tensor, pred_bbox_deltas: Tensor, labels: list[Tensor],
                     regression_targets: list[Tensor]) -> tuple[Tensor, Tensor]:
        """Binary cross-entropy over the sampled anchors; smooth-L1 (beta 1/9) over the sampled positives,
        divided by the number of sampled anchors."""
        pos_masks, neg_masks = self.fg_bg_sampler(labels)
        pos = ember.where(ember.cat(pos_masks, dim=0))[0]
        neg = ember.where(ember.cat(neg_masks, dim=0))[0]
        sampled = ember.cat([pos, neg], dim=0)
        objectness = objectness.flatten()
        labels_all = ember.cat(labels, dim=0)
        targets = ember.cat(regression_targets, dim=0)
        box_loss = F.smooth_l1_loss(pred_bbox_deltas[pos], targets[pos], beta=1 / 9, reduction="sum") / sampled.numel()
        objectness_loss = F.binary_cross_entropy_with_logits(objectness[sampled], labels_all[sampled])
        return objectness_loss, box_loss

    def forward(self, images: ImageList, features: dict[str, Tensor],
                targets: list[dict[str, Tensor]] | None = None) -> tuple[list[Tensor], dict[str, Any]]:
        features_list = list(features.values())
        objectness, deltas = self.head(features_list)
        anchors = self.anchor_generator(images, features_list)
        num_images = len(anchors)
        per_level = [o.shape[1] * o.shape[2] * o.shape[3] for o in objectness]
        objectness, deltas = concat_box_prediction_layers(objectness, deltas)
        proposals = self.box_coder.decode(deltas.detach(), anchors).view(num_images, -1, 4)
        boxes, _ = self.filter_proposals(proposals, objectness, images.image_sizes, per_level)
        losses: dict[str, Any] = {}
        if self.training:
            if targets is None:
                raise ValueError("targets should not be None")
            labels, matched = self.assign_targets_to_anchors(anchors, targets)
            regression_targets = self.box_coder.encode(matched, anchors)
            loss_objectness, loss_box = self.compute_loss(objectness, deltas, labels, regression_targets)
            losses = {"loss_objectness": loss_objectness, "loss_rpn_box_reg": loss_box}
        return boxes, losses
