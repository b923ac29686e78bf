"""Pieces every torchvision detector shares (torchvision's ``models.detection._utils``): box coders, the IoU
matcher, the balanced positive/negative sampler and the box-regression losses.

Example:
    >>> import ember
    >>> from ember.vision.models.detection._utils import BoxCoder
    >>> coder = BoxCoder((1.0, 1.0, 1.0, 1.0))
    >>> anchors = ember.tensor([[0., 0., 4., 4.]])
    >>> codes = coder.encode_single(ember.tensor([[1., 1., 5., 3.]]), anchors)
    >>> coder.decode_single(codes, anchors).tolist()
    [[1.0, 1.0, 5.0, 3.0]]
"""
from __future__ import annotations

import math
from collections import OrderedDict
from typing import Sequence

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.ops import FrozenBatchNorm2d, complete_box_iou_loss, distance_box_iou_loss, generalized_box_iou_loss

__all__ = ["BalancedPositiveNegativeSampler", "BoxCoder", "BoxLinearCoder", "Matcher", "SSDMatcher", "encode_boxes",
           "overwrite_eps", "retrieve_out_channels"]


class BalancedPositiveNegativeSampler:
    """Pick, per image, at most ``batch_size_per_image`` elements of which at most ``positive_fraction`` are
    positive (label >= 1); the rest are negatives (label 0); label -1 is never picked. Returns two lists of uint8
    masks (positives, negatives). The choice is random (ember's generator) when there are more candidates."""

    def __init__(self, batch_size_per_image: int, positive_fraction: float) -> None:
        self.batch_size_per_image = batch_size_per_image
        self.positive_fraction = positive_fraction

    def __call__(self, matched_idxs: Sequence[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        positives, negatives = [], []
        for labels in matched_idxs:
            pos = ember.where(labels >= 1)[0]
            neg = ember.where(labels == 0)[0]
            n_pos = min(pos.numel(), int(self.batch_size_per_image * self.positive_fraction))
            n_neg = min(neg.numel(), self.batch_size_per_image - n_pos)
            chosen_pos = pos[ember.randperm(pos.numel(), device=pos.device)[:n_pos]]
            chosen_neg = neg[ember.randperm(neg.numel(), device=neg.device)[:n_neg]]
            for chosen, out in ((chosen_pos, positives), (chosen_neg, negatives)):
                mask = ember.zeros_like(labels, dtype=ember.uint8)
                mask[chosen] = 1
                out.append(mask)
        return positives, negatives


def encode_boxes(reference_boxes: Tensor, proposals: Tensor, weights: Tensor) -> Tensor:
    """Regression targets ``(dx, dy, dw, dh)`` of ``reference_boxes`` relative to ``proposals`` (both [N, 4])."""
    def centre_size(b: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        x1, y1, x2, y2 = (b[:, i].unsqueeze(1) for i in range(4))
        w, h = x2 - x1, y2 - y1
        return x1 + 0.5 * w, y1 + 0.5 * h, w, h

    px, py, pw, ph = centre_size(proposals)
    gx, gy, gw, gh = centre_size(reference_boxes)
    return ember.cat((weights[0] * (gx - px) / pw, weights[1] * (gy - py) / ph,
                      weights[2] * ember.log(gw / pw), weights[3] * ember.log(gh / ph)), dim=1)


class BoxCoder:
    """Faster R-CNN's box parametrisation: centre offsets scaled by the reference size and log size ratios, each
    multiplied by ``weights``; decoding clamps the log ratios at ``bbox_xform_clip``."""

    def __init__(self, weights: tuple[float, float, float, float],
                 bbox_xform_clip: float = math.log(1000.0 / 16)) -> None:
        self.weights = weights
        self.bbox_xform_clip = bbox_xform_clip

    def encode(self, reference_boxes: Sequence[Tensor], proposals: Sequence[Tensor]) -> tuple[Tensor, ...]:
        counts = [len(b) for b in reference_boxes]
        codes = self.encode_single(ember.cat(list(reference_boxes), dim=0), ember.cat(list(proposals), dim=0))
        return codes.split(counts, 0)

    def encode_single(self, reference_boxes: Tensor, proposals: Tensor) -> Tensor:
        weights = ember.as_tensor(self.weights, dtype=reference_boxes.dtype, device=reference_boxes.device)
        return encode_boxes(reference_boxes, proposals, weights)

    def decode(self, rel_codes: Tensor, boxes: Sequence[Tensor]) -> Tensor:
        if not isinstance(boxes, (list, tuple)):
            raise TypeError("BoxCoder.decode expects boxes as a list or tuple of [N_i, 4] tensors.")
        total = sum(b.shape[0] for b in boxes)
        if total > 0:
            rel_codes = rel_codes.reshape(total, -1)
        decoded = self.decode_single(rel_codes, ember.cat(list(boxes), dim=0))
        return decoded.reshape(total, -1, 4) if total > 0 else decoded

    def decode_single(self, rel_codes: Tensor, boxes: Tensor) -> Tensor:
        """Boxes ``[N, 4k]`` from codes ``[N, 4k]`` relative to ``boxes`` ``[N, 4]``."""
        boxes = boxes.to(rel_codes.dtype)
        widths = boxes[:, 2] - boxes[:, 0]
        heights = boxes[:, 3] - boxes[:, 1]
        cx = (boxes[:, 0] + 0.5 * widths)[:, None]
        cy = (boxes[:, 1] + 0.5 * heights)[:, None]
        wx, wy, ww, wh = self.weights
        dw = ember.clamp(rel_codes[:, 2::4] / ww, max=self.bbox_xform_clip)
        dh = ember.clamp(rel_codes[:, 3::4] / wh, max=self.bbox_xform_clip)
        centre_x = rel_codes[:, 0::4] / wx * widths[:, None] + cx
        centre_y = rel_codes[:, 1::4] / wy * heights[:, None] + cy
        half_w = 0.5 * (ember.exp(dw) * widths[:, None])
        half_h = 0.5 * (ember.exp(dh) * heights[:, None])
        return ember.stack((centre_x - half_w, centre_y - half_h, centre_x + half_w, centre_y + half_h),
                           dim=2).flatten(1)


class BoxLinearCoder:
    """FCOS's parametrisation: distances from the reference box's centre to the four sides of the target,
    divided by the reference box's size when ``normalize_by_size``."""

    def __init__(self, normalize_by_size: bool = True) -> None:
        self.normalize_by_size = normalize_by_size

    def _sizes(self, boxes: Tensor) -> Tensor:
        w = boxes[..., 2] - boxes[..., 0]
        h = boxes[..., 3] - boxes[..., 1]
        return ember.stack((w, h, w, h), dim=-1)

    def encode(self, reference_boxes: Tensor, proposals: Tensor) -> Tensor:
        cx = 0.5 * (reference_boxes[..., 0] + reference_boxes[..., 2])
        cy = 0.5 * (reference_boxes[..., 1] + reference_boxes[..., 3])
        targets = ember.stack((cx - proposals[..., 0], cy - proposals[..., 1], proposals[..., 2] - cx,
                               proposals[..., 3] - cy), dim=-1)
        return targets / self._sizes(reference_boxes) if self.normalize_by_size else targets

    def decode(self, rel_codes: Tensor, boxes: Tensor) -> Tensor:
        boxes = boxes.to(dtype=rel_codes.dtype)
        cx = 0.5 * (boxes[..., 0] + boxes[..., 2])
        cy = 0.5 * (boxes[..., 1] + boxes[..., 3])
        if self.normalize_by_size:
            rel_codes = rel_codes * self._sizes(boxes)
        return ember.stack((cx - rel_codes[..., 0], cy - rel_codes[..., 1], cx + rel_codes[..., 2],
                            cy + rel_codes[..., 3]), dim=-1)


class Matcher:
    """Match each prediction (column of an M x N quality matrix) to its best ground truth (row): the gt index
    when the quality is >= ``high_threshold``, ``BETWEEN_THRESHOLDS`` (-2) in [low, high), ``BELOW_LOW_THRESHOLD``
    (-1) below ``low_threshold``. With ``allow_low_quality_matches``, every prediction that is some gt's best
    match keeps its match whatever its quality."""

    BELOW_LOW_THRESHOLD = -1
    BETWEEN_THRESHOLDS = -2

    def __init__(self, high_threshold: float, low_threshold: float, allow_low_quality_matches: bool = False) -> None:
        if low_threshold > high_threshold:
            raise AssertionError("low_threshold should be <= high_threshold")
        self.high_threshold = high_threshold
        self.low_threshold = low_threshold
        self.allow_low_quality_matches = allow_low_quality_matches

    def __call__(self, match_quality_matrix: Tensor) -> Tensor:
        if match_quality_matrix.numel() == 0:
            if match_quality_matrix.shape[0] == 0:
                raise ValueError("No ground-truth boxes available for one of the images during training")
            raise ValueError("No proposal boxes available for one of the images during training")
        best, matches = match_quality_matrix.max(dim=0)
        original = matches.clone() if self.allow_low_quality_matches else None
        matches[best < self.low_threshold] = self.BELOW_LOW_THRESHOLD
        matches[(best >= self.low_threshold) & (best < self.high_threshold)] = self.BETWEEN_THRESHOLDS
        if original is not None:
            self.set_low_quality_matches_(matches, original, match_quality_matrix)
        return matches

    def set_low_quality_matches_(self, matches: Tensor, all_matches: Tensor, match_quality_matrix: Tensor) -> None:
        """Restore the match of every prediction that ties for some gt's highest quality."""
        best_per_gt = match_quality_matrix.max(dim=1)[0]
        preds = ember.where(match_quality_matrix == best_per_gt[:, None])[1]
        matches[preds] = all_matches[preds]


class SSDMatcher(Matcher):
    """One threshold; additionally each gt claims its best prediction (SSD's matching)."""

    def __init__(self, threshold: float) -> None:
        super().__init__(threshold, threshold, allow_low_quality_matches=False)

    def __call__(self, match_quality_matrix: Tensor) -> Tensor:
        matches = super().__call__(match_quality_matrix)
        best_pred = match_quality_matrix.max(dim=1)[1]
        matches[best_pred] = ember.arange(best_pred.shape[0], dtype=ember.int64, device=best_pred.device)
        return matches


def overwrite_eps(model: nn.Module, eps: float) -> None:
    """Set ``eps`` of every FrozenBatchNorm2d (the first COCO checkpoints were trained with eps 0)."""
    for module in model.modules():
        if isinstance(module, FrozenBatchNorm2d):
            module.eps = eps


def retrieve_out_channels(model: nn.Module, size: tuple[int, int]) -> list[int]:
    """The channel counts of ``model``'s outputs for a zero image of ``size`` (width, height)."""
    was_training = model.training
    model.eval()
    with ember.no_grad():
        device = next(model.parameters()).device
        features = model(ember.zeros((1, 3, size[1], size[0]), device=device))
        if isinstance(features, Tensor):
            features = OrderedDict([("0", features)])
        channels = [f.shape[1] for f in features.values()]
    if was_training:
        model.train()
    return channels


def _topk_min(input: Tensor, orig_kval: int, axis: int) -> int:
    return min(orig_kval, input.shape[axis])


def _box_loss(type: str, box_coder: BoxCoder, anchors_per_image: Tensor, matched_gt_boxes_per_image: Tensor,
              bbox_regression_per_image: Tensor, cnf: dict[str, float] | None = None) -> Tensor:
    """The summed box loss of one image: ``l1``/``smooth_l1`` on the codes, or a ``giou``/``diou``/``ciou`` loss
    on the decoded boxes."""
    cnf = cnf or {}
    if type in ("l1", "smooth_l1"):
        target = box_coder.encode_single(matched_gt_boxes_per_image, anchors_per_image)
        if type == "l1":
            return F.l1_loss(bbox_regression_per_image, target, reduction="sum")
        return F.smooth_l1_loss(bbox_regression_per_image, target, reduction="sum", beta=cnf.get("beta", 1.0))
    losses = {"ciou": complete_box_iou_loss, "diou": distance_box_iou_loss, "giou": generalized_box_iou_loss}
    if type not in losses:
        raise AssertionError(f"Unsupported loss: {type}")
    boxes = box_coder.decode_single(bbox_regression_per_image, anchors_per_image)
    return losses[type](boxes, matched_gt_boxes_per_image, reduction="sum", eps=cnf.get("eps", 1e-7))
