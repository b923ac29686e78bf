"""The second stage of the R-CNN family (torchvision's ``models.detection.roi_heads``): pool each proposal's
features, classify it and refine its box (Fast R-CNN), and optionally predict a mask (Mask R-CNN) or keypoint
heatmaps (Keypoint R-CNN); their losses, and the postprocessing that turns predictions into detections.

Example:
    >>> import ember
    >>> from ember.vision.models.detection.roi_heads import paste_masks_in_image
    >>> masks = ember.ones(1, 1, 4, 4)
    >>> pasted = paste_masks_in_image(masks, ember.tensor([[2., 2., 5., 5.]]), (8, 8))
    >>> tuple(pasted.shape), pasted[0, 0, 3, 3].item() > 0.5, pasted[0, 0, 7, 7].item()
    ((1, 1, 8, 8), True, 0.0)
"""
from __future__ import annotations

from typing import Any

import ember
from ember import nn
from ember.nn import functional as F
from ember.tensor import Tensor
from ember.vision.ops import boxes as box_ops
from ember.vision.ops import roi_align
from ember.vision.models.detection import _utils as det_utils

__all__ = ["RoIHeads", "fastrcnn_loss", "maskrcnn_loss", "maskrcnn_inference", "keypointrcnn_loss",
           "keypointrcnn_inference", "paste_masks_in_image", "expand_boxes", "expand_masks"]


def fastrcnn_loss(class_logits: Tensor, box_regression: Tensor, labels: list[Tensor],
                  regression_targets: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Cross-entropy over the sampled proposals; smooth-L1 (beta 1/9) of the positives' deltas for their gt
    class, summed and divided by the number of sampled proposals."""
    labels_all = ember.cat(labels, dim=0)
    targets = ember.cat(regression_targets, dim=0)
    classification_loss = F.cross_entropy(class_logits, labels_all)
    pos = ember.where(labels_all > 0)[0]
    n = class_logits.shape[0]
    deltas = box_regression.reshape(n, box_regression.shape[-1] // 4, 4)
    box_loss = F.smooth_l1_loss(deltas[pos, labels_all[pos]], targets[pos], beta=1 / 9, reduction="sum")
    return classification_loss, box_loss / labels_all.numel()


def maskrcnn_inference(x: Tensor, labels: list[Tensor]) -> tuple[Tensor, ...]:
    """Per image, the sigmoid mask of each detection's predicted class, ``[n_i, 1, M, M]``."""
    counts = [lbl.shape[0] for lbl in labels]
    labels_all = ember.cat(labels)
    probs = x.sigmoid()[ember.arange(x.shape[0], device=labels_all.device), labels_all][:, None]
    return probs.split(counts, dim=0)


def project_masks_on_boxes(gt_masks: Tensor, boxes: Tensor, matched_idxs: Tensor, M: int) -> Tensor:
    """Each proposal's matched gt mask cropped to the proposal and resampled to ``M x M`` (RoIAlign)."""
    rois = ember.cat([matched_idxs.to(boxes)[:, None], boxes], dim=1)
    return roi_align(gt_masks[:, None].to(rois), rois, (M, M), 1.0)[:, 0]


def maskrcnn_loss(mask_logits: Tensor, proposals: list[Tensor], gt_masks: list[Tensor], gt_labels: list[Tensor],
                  mask_matched_idxs: list[Tensor]) -> Tensor:
    """Per-pixel binary cross-entropy of each positive proposal's gt-class mask against its projected gt mask."""
    size = mask_logits.shape[-1]
    labels = ember.cat([lbl[idx] for lbl, idx in zip(gt_labels, mask_matched_idxs)], dim=0)
    targets = ember.cat([project_masks_on_boxes(m, p, i, size)
                         for m, p, i in zip(gt_masks, proposals, mask_matched_idxs)], dim=0)
    if targets.numel() == 0:
        return mask_logits.sum() * 0
    chosen = mask_logits[ember.arange(labels.shape[0], device=labels.device), labels]
    return F.binary_cross_entropy_with_logits(chosen, targets)


def keypoints_to_heatmap(keypoints: Tensor, rois: Tensor, heatmap_size: int) -> tuple[Tensor, Tensor]:
    """The flat heatmap index of each keypoint inside its roi, and whether it is visible and inside."""
    x0, y0 = rois[:, 0][:, None], rois[:, 1][:, None]
    scale_x = (heatmap_size / (rois[:, 2] - rois[:, 0]))[:, None]
    scale_y = (heatmap_size / (rois[:, 3] - rois[:, 1]))[:, None]
    x, y = keypoints[..., 0], keypoints[..., 1]
    on_right = x == rois[:, 2][:, None]
    on_bottom = y == rois[:, 3][:, None]
    x = ((x - x0) * scale_x).floor().long()
    y = ((y - y0) * scale_y).floor().long()
    x[on_right] = heatmap_size - 1  # a keypoint on the far edge belongs to the last cell
    y[on_bottom] = heatmap_size - 1
    inside = (x >= 0) & (y >= 0) & (x < heatmap_size) & (y < heatmap_size)
    valid = (inside & (keypoints[..., 2] > 0)).long()
    return (y * heatmap_size + x) * valid, valid


def heatmaps_to_keypoints(maps: Tensor, rois: Tensor) -> tuple[Tensor, Tensor]:
    """Keypoints ``[R, K, 3]`` (x, y, 1) and their scores ``[R, K]`` (float32) from heatmaps ``[R, K, S, S]``:
    each heatmap is resized bicubically to its roi's (ceiled) size and its argmax cell centre is taken."""
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    widths_ceil, heights_ceil = widths.ceil(), heights.ceil()
    num_keypoints = maps.shape[1]
    xy = ember.zeros((len(rois), 3, num_keypoints), dtype=ember.float32, device=maps.device)
    scores = ember.zeros((len(rois), num_keypoints), dtype=ember.float32, device=maps.device)
    for i in range(len(rois)):
        w_i, h_i = int(widths_ceil[i].item()), int(heights_ceil[i].item())
        roi_map = F.interpolate(maps[i][:, None], size=(h_i, w_i), mode="bicubic", align_corners=False)[:, 0]
        pos = roi_map.reshape(num_keypoints, -1).argmax(dim=1)
        x_int = pos % w_i
        y_int = ember.div(pos - x_int, w_i, rounding_mode="floor")
        xy[i, 0, :] = (x_int.float() + 0.5) * (widths[i] / w_i) + rois[i, 0]
        xy[i, 1, :] = (y_int.float() + 0.5) * (heights[i] / h_i) + rois[i, 1]
        xy[i, 2, :] = 1
        scores[i, :] = roi_map[ember.arange(num_keypoints, device=roi_map.device), y_int, x_int]
    return xy.permute(0, 2, 1), scores


def keypointrcnn_loss(keypoint_logits: Tensor, proposals: list[Tensor], gt_keypoints: list[Tensor],
                      keypoint_matched_idxs: list[Tensor]) -> Tensor:
    """Cross-entropy over heatmap cells for every visible gt keypoint inside its positive proposal."""
    n, k, h, w = keypoint_logits.shape
    if h != w:
        raise ValueError(f"keypoint_logits height and width (last two elements of shape) should be equal. "
                         f"Instead got H = {h} and W = {w}")
    heatmaps, valid = [], []
    for props, gt, idx in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        hm, v = keypoints_to_heatmap(gt[idx], props, h)
        heatmaps.append(hm.view(-1))
        valid.append(v.view(-1))
    targets = ember.cat(heatmaps, dim=0)
    chosen = ember.where(ember.cat(valid, dim=0).to(dtype=ember.uint8))[0]
    if targets.numel() == 0 or len(chosen) == 0:
        return keypoint_logits.sum() * 0
    return F.cross_entropy(keypoint_logits.view(n * k, h * w)[chosen], targets[chosen])


def keypointrcnn_inference(x: Tensor, boxes: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
    points, scores = [], []
    for maps, rois in zip(x.split([b.shape[0] for b in boxes], dim=0), boxes):
        p, s = heatmaps_to_keypoints(maps, rois)
        points.append(p)
        scores.append(s)
    return points, scores


def expand_boxes(boxes: Tensor, scale: float) -> Tensor:
    """Boxes scaled by ``scale`` about their centres."""
    half_w = (boxes[:, 2] - boxes[:, 0]) * 0.5 * scale
    half_h = (boxes[:, 3] - boxes[:, 1]) * 0.5 * scale
    cx = (boxes[:, 2] + boxes[:, 0]) * 0.5
    cy = (boxes[:, 3] + boxes[:, 1]) * 0.5
    return ember.stack((cx - half_w, cy - half_h, cx + half_w, cy + half_h), dim=1)


def expand_masks(mask: Tensor, padding: int) -> tuple[Tensor, float]:
    """Masks zero-padded by ``padding`` on each side, and the factor by which that grew them."""
    m = mask.shape[-1]
    return F.pad(mask, (padding,) * 4), float(m + 2 * padding) / m


def paste_mask_in_image(mask: Tensor, box: list[int], im_h: int, im_w: int) -> Tensor:
    """One ``M x M`` mask resized (bilinear) to its integer box and placed in an ``im_h x im_w`` zero image."""
    x0, y0, x1, y1 = box
    w, h = max(x1 - x0 + 1, 1), max(y1 - y0 + 1, 1)
    resized = F.interpolate(mask.expand((1, 1, -1, -1)), size=(h, w), mode="bilinear", align_corners=False)[0][0]
    cx0, cx1 = max(x0, 0), min(x1 + 1, im_w)
    cy0, cy1 = max(y0, 0), min(y1 + 1, im_h)
    image = ember.zeros((im_h, im_w), dtype=resized.dtype, device=resized.device)
    if cx1 > cx0 and cy1 > cy0:
        image[cy0:cy1, cx0:cx1] = resized[cy0 - y0:cy1 - y0, cx0 - x0:cx1 - x0]
    return image


def paste_masks_in_image(masks: Tensor, boxes: Tensor, img_shape: tuple[int, int], padding: int = 1) -> Tensor:
    """``[R, 1, M, M]`` mask probabilities -> ``[R, 1, H, W]`` image-sized masks (each pasted into its box, with
    a one-pixel border so the edges interpolate towards 0)."""
    masks, scale = expand_masks(masks, padding=padding)
    int_boxes = expand_boxes(boxes, scale).to(dtype=ember.int64).tolist()
    im_h, im_w = img_shape
    pasted = [paste_mask_in_image(m[0], b, im_h, im_w) for m, b in zip(masks, int_boxes)]
    if pasted:
        return ember.stack(pasted, dim=0)[:, None]
    return masks.new_empty((0, 1, im_h, im_w))


class RoIHeads(nn.Module):
    """Box head (always), mask head and keypoint head (when all three of their parts are given)."""

    def __init__(self, box_roi_pool: nn.Module, box_head: nn.Module, box_predictor: nn.Module,
                 fg_iou_thresh: float, bg_iou_thresh: float, batch_size_per_image: int, positive_fraction: float,
                 bbox_reg_weights: tuple[float, float, float, float] | None, score_thresh: float, nms_thresh: float,
                 detections_per_img: int, mask_roi_pool: nn.Module | None = None, mask_head: nn.Module | None = None,
                 mask_predictor: nn.Module | None = None, keypoint_roi_pool: nn.Module | None = None,
                 keypoint_head: nn.Module | None = None, keypoint_predictor: nn.Module | None = None) -> None:
        super().__init__()
        self.box_similarity = box_ops.box_iou
        self.proposal_matcher = det_utils.Matcher(fg_iou_thresh, bg_iou_thresh, allow_low_quality_matches=False)
        self.fg_bg_sampler = det_utils.BalancedPositiveNegativeSampler(batch_size_per_image, positive_fraction)
        self.box_coder = det_utils.BoxCoder(bbox_reg_weights if bbox_reg_weights is not None else (10.0, 10.0, 5.0, 5.0))
        self.box_roi_pool = box_roi_pool
        self.box_head = box_head
        self.box_predictor = box_predictor
        self.score_thresh = score_thresh
        self.nms_thresh = nms_thresh
        self.detections_per_img = detections_per_img
        self.mask_roi_pool = mask_roi_pool
        self.mask_head = mask_head
        self.mask_predictor = mask_predictor
        self.keypoint_roi_pool = keypoint_roi_pool
        self.keypoint_head = keypoint_head
        self.keypoint_predictor = keypoint_predictor

    def has_mask(self) -> bool:
        return None not in (self.mask_roi_pool, self.mask_head, self.mask_predictor)

    def has_keypoint(self) -> bool:
        return None not in (self.keypoint_roi_pool, self.keypoint_head, self.keypoint_predictor)

    def assign_targets_to_proposals(self, proposals: list[Tensor], gt_boxes: list[Tensor],
                                    gt_labels: list[Tensor]) -> tuple[list[Tensor], list[Tensor]]:
        matched_idxs, labels = [], []
        for props, boxes, classes in zip(proposals, gt_boxes, gt_labels):
            if boxes.numel() == 0:
                matched_idxs.append(ember.zeros((props.shape[0],), dtype=ember.int64, device=props.device))
                labels.append(ember.zeros((props.shape[0],), dtype=ember.int64, device=props.device))
                continue
            matched = self.proposal_matcher(box_ops.box_iou(boxes, props))
            clamped = matched.clamp(min=0)
            label = classes[clamped].to(dtype=ember.int64)
            label[matched == self.proposal_matcher.BELOW_LOW_THRESHOLD] = 0
            label[matched == self.proposal_matcher.BETWEEN_THRESHOLDS] = -1  # ignored by the sampler
            matched_idxs.append(clamped)
            labels.append(label)
        return matched_idxs, labels

    def subsample(self, labels: list[Tensor]) -> list[Tensor]:
        pos, neg = self.fg_bg_sampler(labels)
        return [ember.where(p | n)[0] for p, n in zip(pos, neg)]

    def add_gt_proposals(self, proposals: list[Tensor], gt_boxes: list[Tensor]) -> list[Tensor]:
        return [ember.cat((p, g)) for p, g in zip(proposals, gt_boxes)]

    def check_targets(self, targets: list[dict[str, Tensor]] | None) -> None:
        if targets is None:
            raise ValueError("targets should not be None")
        for key in ("boxes", "labels") + (("masks",) if self.has_mask() else ()):
            if not all(key in t for t in targets):
                raise ValueError(f"Every element of targets should have a {key} key")

    def select_training_samples(self, proposals: list[Tensor], targets: list[dict[str, Tensor]] | None
                                ) -> tuple[list[Tensor], list[Tensor], list[Tensor], tuple[Tensor, ...]]:
        """The gt boxes join the proposals; each is matched, labelled and sampled; regression targets follow."""
        self.check_targets(targets)
        dtype, device = proposals[0].dtype, proposals[0].device
        gt_boxes = [t["boxes"].to(dtype) for t in targets]
        gt_labels = [t["labels"] for t in targets]
        proposals = self.add_gt_proposals(proposals, gt_boxes)
        matched_idxs, labels = self.assign_targets_to_proposals(proposals, gt_boxes, gt_labels)
        sampled = self.subsample(labels)
        matched_gt = []
        for i, keep in enumerate(sampled):
            proposals[i], labels[i], matched_idxs[i] = proposals[i][keep], labels[i][keep], matched_idxs[i][keep]
            boxes = gt_boxes[i] if gt_boxes[i].numel() else ember.zeros((1, 4), dtype=dtype, device=device)
            matched_gt.append(boxes[matched_idxs[i]])
        return proposals, matched_idxs, labels, self.box_coder.encode(matched_gt, proposals)

    def postprocess_detections(self, class_logits: Tensor, box_regression: Tensor, proposals: list[Tensor],
                               image_shapes: list[tuple[int, int]]) -> tuple[list[Tensor], list[Tensor], list[Tensor]]:
        """Per image and class (background dropped): boxes with score > ``score_thresh``, not tiny, after
        per-class NMS; at most ``detections_per_img``, best first."""
        device = class_logits.device
        num_classes = class_logits.shape[-1]
        counts = [p.shape[0] for p in proposals]
        all_boxes = self.box_coder.decode(box_regression, proposals).split(counts, 0)
        all_scores = F.softmax(class_logits, -1).split(counts, 0)
        out_boxes, out_scores, out_labels = [], [], []
        for boxes, scores, shape in zip(all_boxes, all_scores, image_shapes):
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            labels = ember.arange(num_classes, device=device).view(1, -1).expand_as(scores)
            boxes = boxes[:, 1:].reshape(-1, 4)
            scores = scores[:, 1:].reshape(-1)
            labels = labels[:, 1:].reshape(-1)
            keep = ember.where(scores > self.score_thresh)[0]
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.remove_small_boxes(boxes, min_size=1e-2)
            boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
            keep = box_ops.batched_nms(boxes, scores, labels, self.nms_thresh)[: self.detections_per_img]
            out_boxes.append(boxes[keep])
            out_scores.append(scores[keep])
            out_labels.append(labels[keep])
        return out_boxes, out_scores, out_labels

    def _check_target_types(self, targets: list[dict[str, Tensor]]) -> None:
        for t in targets:
            if t["boxes"].dtype not in (ember.float32, ember.float64, ember.float16):
                raise TypeError(f"target boxes must of float type, instead got {t['boxes'].dtype}")
            if t["labels"].dtype != ember.int64:
                raise TypeError(f"target labels must of int64 type, instead got {t['labels'].dtype}")
            if self.has_keypoint() and t["keypoints"].dtype != ember.float32:
                raise TypeError(f"target keypoints must of float type, instead got {t['keypoints'].dtype}")

    def _positives(self, proposals: list[Tensor], labels: list[Tensor], matched_idxs: list[Tensor]
                   ) -> tuple[list[Tensor], list[Tensor]]:
        boxes, idxs = [], []
        for props, label, matched in zip(proposals, labels, matched_idxs):
            pos = ember.where(label > 0)[0]
            boxes.append(props[pos])
            idxs.append(matched[pos])
        return boxes, idxs

    def forward(self, features: dict[str, Tensor], proposals: list[Tensor], image_shapes: list[tuple[int, int]],
                targets: list[dict[str, Tensor]] | None = None) -> tuple[list[dict[str, Tensor]], dict[str, Any]]:
        if targets is not None:
            self._check_target_types(targets)
        labels = regression_targets = matched_idxs = None
        if self.training:
            proposals, matched_idxs, labels, regression_targets = self.select_training_samples(proposals, targets)
        box_features = self.box_head(self.box_roi_pool(features, proposals, image_shapes))
        class_logits, box_regression = self.box_predictor(box_features)
        result: list[dict[str, Tensor]] = []
        losses: dict[str, Any] = {}
        if self.training:
            loss_classifier, loss_box_reg = fastrcnn_loss(class_logits, box_regression, labels, regression_targets)
            losses = {"loss_classifier": loss_classifier, "loss_box_reg": loss_box_reg}
        else:
            boxes, scores, classes = self.postprocess_detections(class_logits, box_regression, proposals,
                                                                 image_shapes)
            result = [{"boxes": b, "labels": c, "scores": s} for b, s, c in zip(boxes, scores, classes)]

        if self.has_mask():
            if self.training:
                mask_proposals, pos_matched = self._positives(proposals, labels, matched_idxs)
            else:
                mask_proposals, pos_matched = [r["boxes"] for r in result], None
            mask_logits = self.mask_predictor(self.mask_head(self.mask_roi_pool(features, mask_proposals,
                                                                                 image_shapes)))
            if self.training:
                losses["loss_mask"] = maskrcnn_loss(mask_logits, mask_proposals, [t["masks"] for t in targets],
                                                    [t["labels"] for t in targets], pos_matched)
            else:
                for probs, r in zip(maskrcnn_inference(mask_logits, [r["labels"] for r in result]), result):
                    r["masks"] = probs

        if self.has_keypoint():
            if self.training:
                kp_proposals, pos_matched = self._positives(proposals, labels, matched_idxs)
            else:
                kp_proposals, pos_matched = [r["boxes"] for r in result], None
            kp_logits = self.keypoint_predictor(self.keypoint_head(self.keypoint_roi_pool(features, kp_proposals,
                                                                                          image_shapes)))
            if self.training:
                losses["loss_keypoint"] = keypointrcnn_loss(kp_logits, kp_proposals,
                                                            [t["keypoints"] for t in targets], pos_matched)
            else:
                points, kp_scores = keypointrcnn_inference(kp_logits, kp_proposals)
                for p, s, r in zip(points, kp_scores, result):
                    r["keypoints"] = p
                    r["keypoints_scores"] = s
        return result, losses
