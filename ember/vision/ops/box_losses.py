"""Box-regression losses on matched pairs of boxes (torchvision's ``generalized_box_iou_loss``,
``distance_box_iou_loss``, ``complete_box_iou_loss``): ``boxes1[i]`` is compared with ``boxes2[i]``, not every
pair, and the loss is ``1 - (G/D/C)IoU``.

Example:
    >>> import ember
    >>> from ember.vision.ops import generalized_box_iou_loss
    >>> a, b = ember.tensor([[0., 0., 2., 2.]]), ember.tensor([[1., 1., 3., 3.]])
    >>> round(generalized_box_iou_loss(a, b).item(), 6)
    1.079365
"""
from __future__ import annotations

import math

import ember
from ember.tensor import Tensor
from ember.vision.ops.boxes import _upcast

__all__ = ["complete_box_iou_loss", "distance_box_iou_loss", "generalized_box_iou_loss"]


def _reduce(name: str, loss: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: "
                     "'none', 'mean', 'sum'")


def _inter_union(boxes1: Tensor, boxes2: Tensor) -> tuple[Tensor, Tensor]:
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xk1, yk1 = ember.max(x1, x1g), ember.max(y1, y1g)
    xk2, yk2 = ember.min(x2, x2g), ember.min(y2, y2g)
    inter = ember.where((yk2 > yk1) & (xk2 > xk1), (xk2 - xk1) * (yk2 - yk1), ember.zeros_like(x1))
    union = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - inter
    return inter, union


def generalized_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - GIoU`` of each matched pair (``[..., 4]`` ``xyxy`` boxes), reduced by ``reduction``."""
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / (union + eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    area_c = (ember.max(x2, x2g) - ember.min(x1, x1g)) * (ember.max(y2, y2g) - ember.min(y1, y1g))
    return _reduce("generalized_box_iou_loss", 1 - (iou - (area_c - union) / (area_c + eps)), reduction)


def _diou_loss(boxes1: Tensor, boxes2: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    inter, union = _inter_union(boxes1, boxes2)
    iou = inter / (union + eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    diagonal_sq = (ember.max(x2, x2g) - ember.min(x1, x1g)) ** 2 + (ember.max(y2, y2g) - ember.min(y1, y1g)) ** 2 + eps
    centers_sq = ((x1 + x2) / 2 - (x1g + x2g) / 2) ** 2 + ((y1 + y2) / 2 - (y1g + y2g) / 2) ** 2
    return 1 - iou + centers_sq / diagonal_sq, iou


def distance_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - DIoU`` of each matched pair, reduced by ``reduction``."""
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    return _reduce("distance_box_iou_loss", _diou_loss(boxes1, boxes2, eps)[0], reduction)


def complete_box_iou_loss(boxes1: Tensor, boxes2: Tensor, reduction: str = "none", eps: float = 1e-7) -> Tensor:
    """``1 - CIoU`` of each matched pair (``alpha`` is not differentiated), reduced by ``reduction``."""
    boxes1, boxes2 = _upcast(boxes1), _upcast(boxes2)
    diou_loss, iou = _diou_loss(boxes1, boxes2, eps)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    v = (4 / (math.pi ** 2)) * (ember.atan((x2g - x1g) / (y2g - y1g)) - ember.atan((x2 - x1) / (y2 - y1))) ** 2
    with ember.no_grad():
        alpha = v / (1 - iou + v + eps)
    return _reduce("complete_box_iou_loss", diou_loss + alpha * v, reduction)
