"""Top-level functions whose PyTorch signature is the ATen operator's, not ``nn.functional``'s.

``torch.embedding(weight, indices)`` takes its arguments in the other order from ``F.embedding(input, weight)``;
``torch.batch_norm`` / ``torch.instance_norm`` put ``weight, bias`` before the running statistics; the
``torch.<loss>`` functions take ``reduction`` as an int (0 none, 1 mean, 2 sum) where ``F``'s third argument is the
legacy ``size_average``; ``torch.embedding_bag`` and ``torch.adaptive_max_pool1d`` return PyTorch's tuples. ember
bound the ``F`` functions under these names, so such calls failed or, worse, silently computed something else
(``torch.kl_div(x, t, 2)`` gave a mean). As in torch 2.13, a top-level loss called without ``reduction`` reduces
nothing (its Python binding's default), unlike ``nn.functional``'s mean. ``nn.functional`` keeps its own signatures.

Example:
    >>> import ember
    >>> w = ember.arange(6.0).reshape(3, 2)
    >>> ember.embedding(w, ember.tensor([2, 0])).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    >>> ember.kl_div(-ember.ones(2), ember.ones(2), 2).item()  # reduction=2: sum
    2.0
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ember.creation import tensor
from ember.nn import functional as F
from ember.tensor import Tensor

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(op: str, value: Any, position: int) -> str:
    """ATen's int reduction as F's string; PyTorch refuses a string here."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}(): argument 'reduction' (position {position}) must be int, not "
                        f"{type(value).__name__}")
    if not 0 <= int(value) <= 2:
        raise ValueError(f"{op}(): {value} is not a valid value for reduction (0 none, 1 mean, 2 sum)")
    return _REDUCTIONS[int(value)]


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """``torch.embedding``: ``weight`` first; ``padding_idx=-1`` means none."""
    return F.embedding(indices, weight, None if padding_idx is None or padding_idx < 0 else padding_idx,
                       scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False,
                  mode: int = 0, sparse: bool = False, per_sample_weights: Tensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> tuple:
    """``torch.embedding_bag``: ``mode`` 0 sum, 1 mean, 2 max; returns PyTorch's four results ``(output,
    offset2bag, bag_size, max_indices)`` with the values its CPU kernel gives (``offset2bag`` is empty on its fast
    sum path; ``bag_size`` is zero in sum mode; ``max_indices`` holds the bag sizes in mean mode and the chosen rows
    in max mode)."""
    names = {0: "sum", 1: "mean", 2: "max"}
    if mode not in names:
        raise ValueError(f"embedding_bag(): mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    if indices.dim() == 2:  # fixed-length bags: offsets are implied
        count, length = indices.shape
        offsets = tensor(np.arange(0, count * length, length), dtype=indices.dtype)
        indices = indices.reshape(-1)
    output = F.embedding_bag(indices, weight, offsets, mode=names[mode], sparse=sparse,
                             scale_grad_by_freq=scale_grad_by_freq, per_sample_weights=per_sample_weights,
                             include_last_offset=include_last_offset,
                             padding_idx=None if padding_idx is None or padding_idx < 0 else padding_idx)
    idx = indices.detach().cpu().numpy().astype(np.int64)
    starts = offsets.detach().cpu().numpy().astype(np.int64)
    if include_last_offset:
        starts = starts[:-1]
    bags = len(starts)
    sizes = np.diff(np.append(starts, len(idx)))  # torch counts the last bag to the end of the indices
    # torch's CPU kernel skips offset2bag on its fast sum path (float32/half weights, no padding_idx)
    fast_sum = mode == 0 and weight.dtype.itemsize <= 4 and weight.dtype.is_floating_point and (
        padding_idx is None or padding_idx < 0)
    if fast_sum:
        offset2bag = np.zeros(0, np.int64)
    else:
        offset2bag = (np.searchsorted(starts, np.arange(len(idx)), side="right") - 1).astype(np.int64)
    if mode == 0:
        bag_size = max_indices = np.zeros(bags, np.int64)
    else:
        bag_size = max_indices = sizes.astype(np.int64)
        if mode == 2:
            rows = weight.detach().cpu().numpy()
            max_indices = np.zeros((bags, rows.shape[1]), np.int64)
            for bag, (lo, size) in enumerate(zip(starts, sizes)):
                if size > 0:
                    chosen = idx[lo:lo + size]
                    max_indices[bag] = chosen[np.argmax(rows[chosen], axis=0)]
    device = output.device
    return (output, tensor(offset2bag, device=device), tensor(bag_size, device=device),
            tensor(max_indices, device=device))


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, training: bool, momentum: float, eps: float,
               cudnn_enabled: bool = True) -> Tensor:
    """``torch.batch_norm``: ATen's argument order (weight and bias before the running statistics)."""
    return F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                  running_var: Tensor | None, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool = True) -> Tensor:
    """``torch.instance_norm``: ATen's argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enabled: bool = True) -> Tensor:
    return F.group_norm(input, num_groups, weight, bias, eps)


def layer_norm(input: Tensor, normalized_shape: Any, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5, cudnn_enable: bool = True) -> Tensor:
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def kl_div(input: Tensor, target: Tensor, reduction: int = 0, *, log_target: bool = False) -> Tensor:
    """``torch.kl_div``: ``reduction=1`` is the mean over all elements (ATen's; no batchmean here), 0 none."""
    with warnings.catch_warnings():  # F warns that 'mean' is not batchmean; ATen's mean is meant here
        warnings.simplefilter("ignore")
        return F.kl_div(input, target, reduction=_reduction("kl_div", reduction, 3), log_target=log_target)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None, reduction: int = 0) -> Tensor:
    return F.binary_cross_entropy_with_logits(input, target, weight, pos_weight=pos_weight,
                                              reduction=_reduction("binary_cross_entropy_with_logits", reduction, 5))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 0) -> Tensor:
    return F.hinge_embedding_loss(input, target, margin=margin,
                                  reduction=_reduction("hinge_embedding_loss", reduction, 4))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 0) -> Tensor:
    return F.cosine_embedding_loss(input1, input2, target, margin=margin,
                                   reduction=_reduction("cosine_embedding_loss", reduction, 5))


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    return F.margin_ranking_loss(input1, input2, target, margin=margin,
                                 reduction=_reduction("margin_ranking_loss", reduction, 5))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2.0,
                        eps: float = 1e-6, swap: bool = False, reduction: int = 0) -> Tensor:
    return F.triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                 reduction=_reduction("triplet_margin_loss", reduction, 8))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    return F.poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                              reduction=_reduction("poisson_nll_loss", reduction, 6))


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: int = 0, zero_infinity: bool = False) -> Tensor:
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction=_reduction("ctc_loss", reduction, 6), zero_infinity=zero_infinity)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple:
    """``torch.adaptive_max_pool1d``: always ``(values, indices)``, as ATen's."""
    return F.adaptive_max_pool1d(input, output_size, True)


NAMES: dict[str, Any] = {fn.__name__: fn for fn in (
    embedding, embedding_bag, batch_norm, instance_norm, group_norm, layer_norm, kl_div,
    binary_cross_entropy_with_logits, hinge_embedding_loss, cosine_embedding_loss, margin_ranking_loss,
    triplet_margin_loss, poisson_nll_loss, ctc_loss, adaptive_max_pool1d)}
