"""``nn.CrossMapLRN2d``'s computation as torch 2.13's legacy one (``torch.nn.modules._functions.CrossMapLRN2d``).

torch keeps Lua Torch's running-sum loop: channel ``c`` sums the squares of channels ``c - p + 1 .. c + p - 1``
(``p = (size - 1) // 2 + 1``) except that channel 0 is never subtracted again, so from ``c = p + 1`` on
channel 0 stays in every window. Its backward is Lua Torch's formula for a centred window, not the derivative
of that forward. ``LocalResponseNorm`` (the correct windows) differed from it by up to 1e-4 on random input;
both directions here are torch's, written as two 0/1 channel-mixing matrices.

Example:
    >>> x = ember.randn(2, 5, 3, 3)
    >>> cross_map_lrn2d(x, 3, 1e-4, 0.75, 1).shape
    ember.Size([2, 5, 3, 3])
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.autograd.function import Function
from ember.tensor import Tensor


def _forward_windows(channels: int, size: int) -> np.ndarray:
    """``M[c, j] = 1`` when torch's forward loop has channel ``j``'s square in channel ``c``'s sum."""
    pre_pad = int((size - 1) / 2 + 1)
    m = np.zeros((channels, channels))
    m[0, :min(pre_pad, channels)] = 1
    for c in range(1, channels):
        m[c] = m[c - 1]
        if c < channels - pre_pad + 1:
            m[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            m[c, c - pre_pad] -= 1
    return m


def _backward_windows(channels: int, size: int) -> np.ndarray:
    """``M[c, j] = 1`` when torch's backward adds channel ``j``'s ratio into channel ``c``'s accumulator."""
    inverse_pre_pad = int(size - (size - 1) / 2)
    c = np.arange(channels)[:, None]
    j = np.arange(channels)[None, :]
    return ((j >= c - inverse_pre_pad) & (j <= c + size - 1 - inverse_pre_pad)).astype(np.float64)


def _mix(t: Tensor, matrix: np.ndarray) -> Tensor:
    """``out[:, c] = sum_j matrix[c, j] * t[:, j]`` (channels last for one matmul, then back)."""
    m = Tensor._make(matrix.T.astype(t.dtype.np), t._device, False)
    return (t.permute(0, 2, 3, 1) @ m).permute(0, 3, 1, 2)


class _CrossMapLRN2d(Function):
    @staticmethod
    def forward(ctx: Any, input: Tensor, size: int, alpha: float, beta: float, k: float) -> Tensor:
        scale = _mix(input * input, _forward_windows(input.shape[1], size)) * (alpha / size) + k
        output = scale.pow(-beta) * input
        ctx.save_for_backward(input, output)
        ctx.scale, ctx.size, ctx.alpha, ctx.beta = scale, size, alpha, beta
        return output

    @staticmethod
    def backward(ctx: Any, grad_output: Tensor) -> tuple:
        input, output = ctx.saved_tensors
        ratio = grad_output * output / ctx.scale
        accum = _mix(ratio, _backward_windows(input.shape[1], ctx.size))
        grad = ctx.scale.pow(-ctx.beta) * grad_output - (2 * ctx.alpha * ctx.beta / ctx.size) * input * accum
        return grad, None, None, None, None


def cross_map_lrn2d(input: Tensor, size: int, alpha: float, beta: float, k: float) -> Tensor:
    """torch's ``CrossMapLRN2d`` forward (4-D input) with its legacy backward."""
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
    return _CrossMapLRN2d.apply(input, size, alpha, beta, k)
