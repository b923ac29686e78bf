"""Focal loss of RetinaNet (torchvision's ``torchvision.ops.sigmoid_focal_loss``).

Example:
    >>> import ember
    >>> from ember.vision.ops import sigmoid_focal_loss
    >>> logits, targets = ember.tensor([2.0, -1.0]), ember.tensor([1.0, 0.0])
    >>> round(sigmoid_focal_loss(logits, targets, reduction="sum").item(), 6)
    0.017444
"""
from __future__ import annotations

import ember
from ember.nn import functional as F
from ember.tensor import Tensor

__all__ = ["sigmoid_focal_loss"]


def sigmoid_focal_loss(inputs: Tensor, targets: Tensor, alpha: float = 0.25, gamma: float = 2,
                       reduction: str = "none") -> Tensor:
    """Binary cross-entropy on logits scaled by ``(1 - p_t) ** gamma`` (down-weights easy examples) and by
    ``alpha`` for positives / ``1 - alpha`` for negatives (no weighting when ``alpha < 0``)."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: "
                         "'none', 'mean', 'sum'")
    p = ember.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        loss = (alpha * targets + (1 - alpha) * (1 - targets)) * loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
