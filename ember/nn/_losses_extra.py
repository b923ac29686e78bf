"""Losses that ``ember.ops.losses`` lacks, as compositions of ember ops: ``multilabel_margin_loss``.

Example:
    >>> import ember
    >>> import ember.nn.functional as F
    >>> x = ember.tensor([[0.1, 0.2, 0.4, 0.8]])
    >>> y = ember.tensor([[3, 0, -1, 1]])
    >>> round(float(F.multilabel_margin_loss(x, y)), 4)
    0.85
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes
from ember.ops.elementwise import relu
from ember.ops.losses import _reduce, _reduction
from ember.amp.policy import autocast_policy
from ember.creation import tensor


@autocast_policy("fp32")
def multilabel_margin_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean") -> Any:
    """Multi-label hinge loss, PyTorch's definition: for each sample,
    ``sum_{j in targets} sum_{i not in targets} max(0, 1 - (x[j] - x[i])) / C``.

    ``target`` holds class indices (int64, same shape as ``input``); the first ``-1`` ends the list.
    """
    reduction = _reduction("multilabel_margin_loss", reduction, size_average, reduce)
    if input.ndim not in (0, 1, 2) or tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"multilabel_margin_loss: expected input (C) or (N, C) and a target of the same shape, "
                           f"got input {tuple(input.shape)} and target {tuple(target.shape)}")
    if target.dtype.is_floating_point or target.dtype is dtypes.bool_:
        raise RuntimeError(f"multilabel_margin_loss: target must hold int64 class indices, got {target.dtype}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multilabel_margin_loss: expected a floating-point input, got {input.dtype}")
    single = input.ndim < 2
    x = input.reshape(1, -1) if single else input
    labels = np.asarray(target.detach().cpu().numpy(), dtype=np.int64).reshape(x.shape)
    n, classes = labels.shape
    if labels.size and (labels.min() < -1 or labels.max() >= classes):
        raise RuntimeError(f"multilabel_margin_loss: target values must lie in [-1, {classes}) (class indices, -1 "
                           f"ends each list), got min {labels.min()} and max {labels.max()}")
    # count[n, c]: how often class c is listed before the first -1 (a repeat counts twice, as in PyTorch).
    count = np.zeros((n, classes))
    for row in range(n):
        for c in labels[row]:
            if c < 0:
                break
            count[row, c] += 1
    other = (count == 0).astype(np.float64)
    pair_weight = tensor(count[:, :, None] * other[:, None, :], dtype=input.dtype, device=input.device)
    # margins[n, j, i] = 1 - x[n, j] + x[n, i]: target class j against non-target class i.
    margins = relu(1.0 - x.unsqueeze(2) + x.unsqueeze(1))
    loss = (margins * pair_weight).sum(dim=(1, 2)) / classes
    if single:
        loss = loss.reshape(())
    return _reduce(loss, reduction)
