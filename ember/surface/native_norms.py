"""PyTorch's ``torch.native_*`` normalization and dropout functions: the layer results together with the
statistics the backward uses (``native_layer_norm`` -> (out, mean, rstd), ``native_batch_norm`` ->
(out, save_mean, save_invstd), ``native_group_norm`` -> (out, mean, rstd), ``native_dropout`` -> (out, mask)).

Decompositions and hand-written kernels call these; each is written in ember ops, so gradients flow to the
input, weight and bias as through ``nn.functional``'s layers.

Example:
    >>> import ember as torch
    >>> out, mean, rstd = torch.native_layer_norm(torch.ones(2, 4), [4], None, None, 1e-5)
    >>> tuple(mean.shape), tuple(rstd.shape)
    ((2, 1), (2, 1))
"""
from __future__ import annotations

from typing import Any, Sequence

from ember import creation
from ember.autograd.grad_mode import no_grad
from ember.tensor import Tensor

__all__ = ["native_batch_norm", "native_dropout", "native_group_norm", "native_layer_norm"]


def _affine(out: Tensor, weight: Tensor | None, bias: Tensor | None, shape: Sequence[int]) -> Tensor:
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def native_layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None, bias: Tensor | None,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Layer norm over the last ``len(normalized_shape)`` dims; mean and rstd keep those dims as size 1."""
    shape = tuple(normalized_shape)
    if tuple(input.shape[input.dim() - len(shape):]) != shape:
        raise RuntimeError(f"native_layer_norm: normalized_shape {list(shape)} does not match the input's last "
                           f"dims (input of shape {list(input.shape)}).")
    dims = tuple(range(input.dim() - len(shape), input.dim()))
    mean = input.mean(dim=dims, keepdim=True)
    var = ((input - mean) ** 2).mean(dim=dims, keepdim=True)
    rstd = (var + eps).rsqrt()
    return _affine((input - mean) * rstd, weight, bias, shape), mean, rstd


def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                      running_var: Tensor | None, training: bool, momentum: float,
                      eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Batch norm over every dim but 1. Training: batch statistics (running ones updated in place, the variance
    unbiased), returning the batch mean and 1/sqrt(var + eps); evaluation: the running statistics, returning
    empty statistics, as PyTorch's CPU kernel."""
    if input.dim() < 2:
        raise RuntimeError(f"native_batch_norm: expected an input with at least 2 dims, got {list(input.shape)}.")
    dims = tuple(d for d in range(input.dim()) if d != 1)
    channel_shape = [1, input.shape[1]] + [1] * (input.dim() - 2)
    if training:
        mean = input.mean(dim=dims)
        var = ((input - mean.reshape(channel_shape)) ** 2).mean(dim=dims)
        invstd = (var + eps).rsqrt()
        count = input.numel() // max(input.shape[1], 1)
        with no_grad():
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(mean.detach() * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(var.detach() * (momentum * count / max(count - 1, 1)))
        out = (input - mean.reshape(channel_shape)) * invstd.reshape(channel_shape)
        return _affine(out, weight, bias, channel_shape), mean, invstd
    if running_mean is None or running_var is None:
        raise RuntimeError("native_batch_norm: running_mean and running_var must be given when training=False.")
    invstd = (running_var + eps).rsqrt()
    out = (input - running_mean.reshape(channel_shape)) * invstd.reshape(channel_shape)
    empty = creation.empty(0, dtype=input.dtype, device=input.device)
    return _affine(out, weight, bias, channel_shape), empty, empty.clone()


def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int,
                      group: int, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """Group norm of an (N, C, *) input in ``group`` groups; mean and rstd have shape (N, group)."""
    if C % group:
        raise RuntimeError(f"native_group_norm: the number of channels ({C}) must be divisible by group ({group}).")
    if input.numel() != N * C * HxW:
        raise RuntimeError(f"native_group_norm: the input of shape {list(input.shape)} does not hold N * C * HxW = "
                           f"{N} * {C} * {HxW} elements.")
    grouped = input.reshape(N, group, -1)
    mean = grouped.mean(dim=2, keepdim=True)
    var = ((grouped - mean) ** 2).mean(dim=2, keepdim=True)
    rstd = (var + eps).rsqrt()
    out = ((grouped - mean) * rstd).reshape(input.shape)
    channel_shape = [1, C] + [1] * (input.dim() - 2)
    return _affine(out, weight, bias, channel_shape), mean.reshape(N, group), rstd.reshape(N, group)


def native_dropout(input: Tensor, p: float, train: bool | None) -> tuple[Tensor, Tensor]:
    """Dropout returning its boolean keep-mask; with ``train=False`` the input and an all-true mask (``None``
    drops, as in PyTorch)."""
    if not 0.0 <= p <= 1.0:
        raise RuntimeError(f"native_dropout: dropout probability has to be between 0 and 1, but got {p}.")
    if train is False:
        return input.clone(), creation.ones(input.shape, dtype="bool", device=input.device)
    if p == 1.0:
        return input * 0.0, creation.zeros(input.shape, dtype="bool", device=input.device)
    mask = creation.rand_like(input) >= p
    return input * mask * (1.0 / (1.0 - p)), mask
