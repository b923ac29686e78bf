"""``linear_cross_entropy``: cross entropy of ``linear(input, weight)`` logits, optionally without ever holding
all of them (PyTorch's ``torch.nn.functional.linear_cross_entropy`` and ``LinearCrossEntropyOptions``).

``options=None`` is the reference: the logits are built, then ``cross_entropy`` (every feature, any
autograd). With ``options=LinearCrossEntropyOptions()`` the rows are processed in chunks: the forward keeps
only per-row losses, the backward recomputes each chunk's logits and adds its share of the gradients, so
the peak extra memory is one ``(chunk, num_classes)`` block instead of ``(N, num_classes)`` -- the point for
LLM vocabulary heads. Decision: ember's chunked backward always recomputes (PyTorch precomputes gradients
in the forward for 'mean'/'sum'); that costs one more product per chunk but makes ``retain_graph`` work for
every reduction, so ``allow_retain_graph`` is accepted and has nothing to guard. Like PyTorch, the chunked path
is differentiable once (higher-order gradients need ``options=None``) and falls back to the reference, with
a warning, for label smoothing, probability targets or K-dimensional weights.

Example:
    >>> import ember
    >>> import ember.nn.functional as F
    >>> x, w, y = ember.randn(6, 4), ember.randn(10, 4), ember.tensor([1, 2, 3, 4, 5, 6])
    >>> a = F.linear_cross_entropy(x, w, y)
    >>> b = F.linear_cross_entropy(x, w, y, options=ember.nn.LinearCrossEntropyOptions(batch_chunk_size=4))
    >>> bool(ember.allclose(a, b))
    True
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

from ember import dtypes
from ember.autograd.function import Function, once_differentiable
from ember.ops.losses import cross_entropy
from ember.ops.reductions import logsumexp
from ember.ops.views import cat

# Rows per chunk when the caller does not say: the logits block stays near 4M elements (16 MB in float32).
_CHUNK_ELEMENTS = 1 << 22


@dataclasses.dataclass(frozen=True)
class LinearCrossEntropyOptions:
    """How the chunked ``linear_cross_entropy`` runs (PyTorch's fields). ember reads ``batch_chunk_size``
    (rows per chunk; ``None`` picks about 4M logits per chunk) and ``acc_dtype`` (the dtype the logits of a
    chunk are computed in; ``None`` keeps the input's, half precision is computed in float32);
    ``chunking_method``, ``acc_policy`` and ``allow_retain_graph`` are accepted for compatibility."""

    allow_retain_graph: bool = False
    batch_chunk_size: int | None = None
    chunking_method: str = "auto"
    acc_policy: str = "auto"
    acc_dtype: Any = None


def _chunk_rows(options: LinearCrossEntropyOptions, rows: int, classes: int) -> int:
    if options.batch_chunk_size is not None:
        if int(options.batch_chunk_size) < 1:
            raise ValueError(f"LinearCrossEntropyOptions: batch_chunk_size must be >= 1, got "
                             f"{options.batch_chunk_size}")
        return int(options.batch_chunk_size)
    return max(1, min(rows, _CHUNK_ELEMENTS // max(classes, 1)))


def _compute_dtype(options: LinearCrossEntropyOptions, dtype: Any) -> Any:
    if options.acc_dtype is not None:
        return options.acc_dtype
    return dtypes.float32 if dtype in (dtypes.float16, dtypes.bfloat16) else dtype


class _ChunkedLinearCrossEntropy(Function):
    """Per-row losses ``w[t] * (logsumexp(z) - z[t])`` of ``z = x W^T + b``, chunk by chunk; the reduction is
    applied outside, so one Function serves 'none', 'sum' and 'mean'."""

    @staticmethod
    def forward(ctx: Any, input: Any, weight: Any, bias: Any, target: Any, class_weight: Any, ignore_index: int,
                chunk: int, compute: Any) -> Any:
        ctx.save_for_backward(input, weight, bias, target, class_weight)
        ctx.ignore_index, ctx.chunk, ctx.compute = ignore_index, chunk, compute
        losses = []
        for start in range(0, input.shape[0], chunk):
            rows = slice(start, start + chunk)
            logits, picked, scale = _chunk_logits(input[rows], weight, bias, target[rows], class_weight,
                                                  ignore_index, compute)
            chosen = logits.gather(1, picked.unsqueeze(1)).squeeze(1)
            losses.append((logsumexp(logits, 1) - chosen) * scale)
        return _cat(losses, input.new_zeros(0)).to(input.dtype)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_losses: Any) -> tuple:
        input, weight, bias, target, class_weight = ctx.saved_tensors
        grad_input = [] if ctx.needs_input_grad[0] else None
        grad_weight = weight.new_zeros(weight.shape, dtype=ctx.compute) if ctx.needs_input_grad[1] else None
        grad_bias = (bias.new_zeros(bias.shape, dtype=ctx.compute)
                     if bias is not None and ctx.needs_input_grad[2] else None)
        for start in range(0, input.shape[0], ctx.chunk):
            rows = slice(start, start + ctx.chunk)
            x = input[rows].to(ctx.compute)
            logits, picked, scale = _chunk_logits(input[rows], weight, bias, target[rows], class_weight,
                                                  ctx.ignore_index, ctx.compute)
            dz = logits.softmax(1)
            dz.scatter_add_(1, picked.unsqueeze(1), -dz.new_ones(picked.shape[0], 1))
            dz = dz * (scale * grad_losses[rows].to(ctx.compute)).unsqueeze(1)
            if grad_input is not None:
                grad_input.append(dz @ weight.to(ctx.compute))
            if grad_weight is not None:
                grad_weight += dz.mT @ x
            if grad_bias is not None:
                grad_bias += dz.sum(0)
        if grad_input is not None:
            grad_input = _cat(grad_input, input.new_zeros(input.shape)).to(input.dtype)
        return (grad_input, None if grad_weight is None else grad_weight.to(weight.dtype),
                None if grad_bias is None else grad_bias.to(bias.dtype), None, None, None, None, None)


def _chunk_logits(x: Any, weight: Any, bias: Any, target: Any, class_weight: Any, ignore_index: int,
                  compute: Any) -> tuple:
    """One chunk's logits (in ``compute``), the class each row reads (ignored rows read class 0) and each
    row's scale (its class weight, 0 where ignored)."""
    logits = x.to(compute) @ weight.to(compute).mT
    if bias is not None:
        logits = logits + bias.to(compute)
    ignored = target == ignore_index
    picked = target.masked_fill(ignored, 0)
    scale = (class_weight.to(compute)[picked] if class_weight is not None
             else logits.new_ones(picked.shape[0])).masked_fill(ignored, 0.0)
    return logits, picked, scale


def _cat(pieces: list, empty: Any) -> Any:
    """The chunks' rows together (``empty`` when there were no rows)."""
    if not pieces:
        return empty
    return pieces[0] if len(pieces) == 1 else cat(pieces, 0)


def linear_cross_entropy(input: Any, linear_weight: Any, target: Any, *, linear_bias: Any = None, weight: Any = None,
                         reduction: str = "mean", ignore_index: int | None = None, label_smoothing: float = 0.0,
                         options: LinearCrossEntropyOptions | None = None) -> Any:
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)``; ``input`` is ``(N, in)`` or
    ``(in,)``, ``linear_weight`` is ``(C, in)`` or ``(C, d_1, ..., d_K, in)`` for a K-dimensional loss.

    Example:
        >>> ember.nn.functional.linear_cross_entropy(ember.randn(3, 4), ember.randn(5, 4),
        ...                                          ember.tensor([0, 4, 2])).shape
        ember.Size([])
    """
    if input.dim() < 1 or input.dim() > 2:
        raise RuntimeError(f"linear_cross_entropy: expected input with dimensionality 1 or 2, got {input.dim()} "
                           f"(shape {tuple(input.shape)})")
    if linear_weight.dim() < 2:
        raise RuntimeError(f"linear_cross_entropy: expected linear_weight with dimensionality at least 2, got "
                           f"{linear_weight.dim()}")
    batch, in_features = tuple(input.shape[:-1]), input.shape[-1]
    if in_features != linear_weight.shape[-1]:
        raise RuntimeError(f"linear_cross_entropy: expected equal input and linear_weight last dimensions "
                           f"(in_features), got {in_features} and {linear_weight.shape[-1]}, respectively")
    classes, out_features = linear_weight.shape[0], tuple(linear_weight.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise RuntimeError(f"linear_cross_entropy: expected linear_bias shape {(classes, *out_features)}, got "
                           f"{tuple(linear_bias.shape)}")
    if out_features and not batch:
        raise RuntimeError(f"linear_cross_entropy: K-dimensional loss defined by linear_weight shape "
                           f"{tuple(linear_weight.shape)} requires batched input (N, {in_features}), got unbatched "
                           f"input with shape {tuple(input.shape)}")
    probabilities = tuple(target.shape) == (*batch, classes, *out_features)
    if probabilities and ignore_index is not None:
        raise RuntimeError("linear_cross_entropy: ignore_index cannot be specified when target contains "
                           "probabilities")
    ignore_index = -100 if ignore_index is None else ignore_index
    chunkable = (not out_features and reduction in ("mean", "sum", "none") and label_smoothing == 0.0
                 and target.dtype == dtypes.int64 and not probabilities)
    if options is not None and not chunkable:
        warnings.warn("linear_cross_entropy: ``options`` ignored; the chunked path needs reduction in "
                      "{'mean','sum','none'}, label_smoothing == 0, int64 class-index targets and out_features == (); "
                      f"got reduction={reduction!r}, label_smoothing={label_smoothing}, target.dtype={target.dtype}, "
                      f"out_features={out_features}", stacklevel=2)
    if options is None or not chunkable:
        if out_features:  # (N, in) x (C, d..., in) -> (N, C, d...)
            logits = (input @ linear_weight.reshape(-1, in_features).mT).reshape(*batch, classes, *out_features)
            if linear_bias is not None:
                logits = logits + linear_bias
        else:
            logits = input @ linear_weight.mT
            if linear_bias is not None:
                logits = logits + linear_bias
        return cross_entropy(logits, target, weight=weight, ignore_index=ignore_index, reduction=reduction,
                             label_smoothing=label_smoothing)
    rows, labels = (input, target) if batch else (input.unsqueeze(0), target.unsqueeze(0))
    if labels.shape[0] != rows.shape[0]:
        raise ValueError(f"linear_cross_entropy: expected target batch size {rows.shape[0]} to match the input's, "
                         f"got target of shape {tuple(target.shape)}")
    chunk = _chunk_rows(options, rows.shape[0], classes)
    losses = _ChunkedLinearCrossEntropy.apply(rows, linear_weight, linear_bias, labels, weight, ignore_index, chunk,
                                              _compute_dtype(options, input.dtype))
    if reduction == "none":
        return losses if batch else losses.squeeze(0)
    if reduction == "sum":
        return losses.sum()
    kept = labels != ignore_index
    total = (weight[labels.masked_fill(~kept, 0)] * kept).sum() if weight is not None else kept.sum()
    return losses.sum() / total.to(losses.dtype)
