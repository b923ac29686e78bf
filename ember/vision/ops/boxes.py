"""Box utilities of detection programs (torchvision's ``torchvision.ops.boxes``).

Boxes are ``[N, 4]`` tensors in ``(x1, y1, x2, y2)`` form with ``0 <= x1 < x2`` and ``0 <= y1 < y2`` unless a
function says otherwise. The IoU family is written in ember ops, so it is differentiable as torchvision's;
``nms`` and ``batched_nms`` return indices (no gradient), as torchvision's.

Example:
    >>> import ember
    >>> from ember.vision.ops import box_iou, nms
    >>> boxes = ember.tensor([[0., 0., 2., 2.], [0., 0., 2., 1.], [3., 3., 4., 4.]])
    >>> box_iou(boxes, boxes)[0].tolist()
    [1.0, 0.5, 0.0]
    >>> nms(boxes, ember.tensor([0.9, 0.8, 0.7]), iou_threshold=0.4).tolist()
    [0, 2]
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import ember
from ember.tensor import Tensor

__all__ = ["batched_nms", "box_area", "box_convert", "box_iou", "clip_boxes_to_image", "complete_box_iou",
           "distance_box_iou", "generalized_box_iou", "masks_to_boxes", "nms", "remove_small_boxes"]


def _check_boxes(name: str, boxes: Any) -> None:
    if not isinstance(boxes, Tensor):
        raise TypeError(f"{name}: boxes must be a Tensor of shape [N, 4], got {type(boxes).__name__}")
    if boxes.ndim != 2 or boxes.shape[-1] != 4:
        raise ValueError(f"{name}: boxes must have shape [N, 4] (x1, y1, x2, y2), got {list(boxes.shape)}")


def _upcast(t: Tensor) -> Tensor:
    """Integer boxes are computed in float (their products would overflow), as torchvision's ``_upcast``."""
    if t.is_floating_point():
        return t if t.dtype in (ember.float32, ember.float64) else t.float()
    return t.int() if t.dtype in (ember.int32, ember.int64) else t.float()


def _host(t: Tensor, dtype: Any = np.float64) -> np.ndarray:
    """An explicit device-to-host copy for the sequential parts (NMS), as torchvision's CUDA NMS copies its mask."""
    return np.asarray(t.detach().cpu().numpy(), dtype=dtype)


def box_area(boxes: Tensor) -> Tensor:
    """``(x2 - x1) * (y2 - y1)`` of each box: shape ``[N]``."""
    boxes = _upcast(boxes)
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _inter_union(boxes1: Tensor, boxes2: Tensor) -> tuple[Tensor, Tensor]:
    area1, area2 = box_area(boxes1), box_area(boxes2)
    lt = ember.max(boxes1[:, None, :2], boxes2[None, :, :2])
    rb = ember.min(boxes1[:, None, 2:], boxes2[None, :, 2:])
    wh = _upcast(rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter, area1[:, None] + area2[None, :] - inter


def box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """Intersection over union of every pair: ``[N, M]``."""
    _check_boxes("box_iou", boxes1)
    _check_boxes("box_iou", boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    return inter / union


def generalized_box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    """IoU minus the share of the smallest enclosing box not covered by the union: ``[N, M]`` in ``[-1, 1]``."""
    _check_boxes("generalized_box_iou", boxes1)
    _check_boxes("generalized_box_iou", boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / union
    lti = ember.min(boxes1[:, None, :2], boxes2[None, :, :2])
    rbi = ember.max(boxes1[:, None, 2:], boxes2[None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    areai = whi[..., 0] * whi[..., 1]
    return iou - (areai - union) / areai


def _diou_and_iou(boxes1: Tensor, boxes2: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    iou = box_iou(boxes1, boxes2)
    lti = ember.min(boxes1[:, None, :2], boxes2[None, :, :2])
    rbi = ember.max(boxes1[:, None, 2:], boxes2[None, :, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    diagonal_sq = (whi ** 2).sum(dim=-1) + eps
    cx1, cy1 = (boxes1[:, 0] + boxes1[:, 2]) / 2, (boxes1[:, 1] + boxes1[:, 3]) / 2
    cx2, cy2 = (boxes2[:, 0] + boxes2[:, 2]) / 2, (boxes2[:, 1] + boxes2[:, 3]) / 2
    centers_sq = (cx1[:, None] - cx2[None, :]) ** 2 + (cy1[:, None] - cy2[None, :]) ** 2
    return iou - centers_sq / diagonal_sq, iou


def distance_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """DIoU: IoU minus the squared centre distance over the enclosing box's squared diagonal: ``[N, M]``."""
    _check_boxes("distance_box_iou", boxes1)
    _check_boxes("distance_box_iou", boxes2)
    return _diou_and_iou(boxes1, boxes2, eps)[0]


def complete_box_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7) -> Tensor:
    """CIoU: DIoU minus ``alpha * v`` with ``v`` the aspect-ratio mismatch (``alpha`` is not differentiated)."""
    _check_boxes("complete_box_iou", boxes1)
    _check_boxes("complete_box_iou", boxes2)
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    diou, iou = _diou_and_iou(boxes1, boxes2, eps)
    w_pred, h_pred = boxes1[:, None, 2] - boxes1[:, None, 0], boxes1[:, None, 3] - boxes1[:, None, 1]
    w_gt, h_gt = boxes2[:, 2] - boxes2[:, 0], boxes2[:, 3] - boxes2[:, 1]
    v = (4 / (math.pi ** 2)) * (ember.atan(w_pred / h_pred) - ember.atan(w_gt / h_gt)) ** 2
    with ember.no_grad():
        alpha = v / (1 - iou + v + eps)
    return diou - alpha * v


def box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    """Convert between ``'xyxy'``, ``'xywh'`` (corner, width, height) and ``'cxcywh'`` (centre, width, height)."""
    formats = ("xyxy", "xywh", "cxcywh")
    if in_fmt not in formats or out_fmt not in formats:
        raise ValueError(f"box_convert: unsupported boxes format {in_fmt!r} -> {out_fmt!r}; use one of {formats}")
    if in_fmt == out_fmt:
        return boxes.clone()
    a, b, c, d = boxes.unbind(-1)
    if in_fmt == "xywh":
        a, b, c, d = a, b, a + c, b + d
    elif in_fmt == "cxcywh":
        a, b, c, d = a - 0.5 * c, b - 0.5 * d, a + 0.5 * c, b + 0.5 * d
    if out_fmt == "xywh":
        a, b, c, d = a, b, c - a, d - b
    elif out_fmt == "cxcywh":
        a, b, c, d = (a + c) / 2, (b + d) / 2, c - a, d - b
    return ember.stack((a, b, c, d), dim=-1)


def clip_boxes_to_image(boxes: Tensor, size: tuple[int, int]) -> Tensor:
    """Clamp x to ``[0, width]`` and y to ``[0, height]``; ``size`` is ``(height, width)``."""
    height, width = size
    x = boxes[..., 0::2].clamp(min=0, max=width)
    y = boxes[..., 1::2].clamp(min=0, max=height)
    return ember.stack((x, y), dim=boxes.ndim).reshape(boxes.shape)


def remove_small_boxes(boxes: Tensor, min_size: float) -> Tensor:
    """Indices of the boxes whose width and height are both at least ``min_size``."""
    ws, hs = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    return ember.where((ws >= min_size) & (hs >= min_size))[0]


def masks_to_boxes(masks: Tensor) -> Tensor:
    """The tight ``xyxy`` box around the non-zero pixels of each ``[H, W]`` mask in ``[N, H, W]`` (float)."""
    if masks.numel() == 0:
        return ember.zeros((0, 4), device=masks.device, dtype=ember.float32)
    host = _host(masks, np.float64) != 0
    out = np.zeros((host.shape[0], 4), dtype=np.float32)
    for i, mask in enumerate(host):
        ys, xs = np.nonzero(mask)
        if ys.size:  # an empty mask keeps the zero box
            out[i] = (xs.min(), ys.min(), xs.max(), ys.max())
    return ember.tensor(out, device=masks.device)


def _greedy_nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Keep the highest-scoring box, drop every later box overlapping it by IoU > threshold, repeat."""
    order = np.argsort(-scores, kind="stable")
    x1, y1, x2, y2 = (boxes[:, i] for i in range(4))
    areas = (x2 - x1) * (y2 - y1)
    suppressed = np.zeros(len(order), dtype=bool)
    keep = []
    for pos, i in enumerate(order):
        if suppressed[pos]:
            continue
        keep.append(i)
        rest = order[pos + 1:]
        w = np.maximum(0.0, np.minimum(x2[i], x2[rest]) - np.maximum(x1[i], x1[rest]))
        h = np.maximum(0.0, np.minimum(y2[i], y2[rest]) - np.maximum(y1[i], y1[rest]))
        inter = w * h
        with np.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (areas[i] + areas[rest] - inter)
        suppressed[pos + 1:] |= iou > iou_threshold
    return np.asarray(keep, dtype=np.int64)


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float) -> Tensor:
    """Non-maximum suppression: indices (int64) of the kept boxes, by decreasing score.

    A box is dropped when its IoU with a kept, higher-scoring box is greater than ``iou_threshold``.
    """
    _check_boxes("nms", boxes)
    if scores.ndim != 1 or scores.shape[0] != boxes.shape[0]:
        raise ValueError(f"nms: scores must have shape [N] matching boxes {list(boxes.shape)}, "
                         f"got {list(scores.shape)}")
    if boxes.device != scores.device:
        raise ValueError(f"nms: boxes are on {boxes.device} but scores on {scores.device}; move both to one device")
    keep = _greedy_nms(_host(boxes), _host(scores), float(iou_threshold))
    return ember.tensor(keep, dtype=ember.int64, device=boxes.device)


def batched_nms(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    """NMS run separately for each category in ``idxs``: boxes of different categories never suppress each
    other. Indices of the kept boxes (int64), by decreasing score."""
    _check_boxes("batched_nms", boxes)
    if idxs.shape[0] != boxes.shape[0] or scores.shape[0] != boxes.shape[0]:
        raise ValueError(f"batched_nms: boxes {list(boxes.shape)}, scores {list(scores.shape)} and idxs "
                         f"{list(idxs.shape)} must have the same length")
    host_boxes, host_scores, host_idxs = _host(boxes), _host(scores), _host(idxs, np.int64)
    keep = []
    for category in np.unique(host_idxs):
        members = np.nonzero(host_idxs == category)[0]
        keep.append(members[_greedy_nms(host_boxes[members], host_scores[members], float(iou_threshold))])
    kept = np.sort(np.concatenate(keep)) if keep else np.zeros(0, dtype=np.int64)
    kept = kept[np.argsort(-host_scores[kept], kind="stable")]
    return ember.tensor(kept.astype(np.int64), dtype=ember.int64, device=boxes.device)
