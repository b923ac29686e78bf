"""Stochastic depth (torchvision's ``torchvision.ops.stochastic_depth``): drop whole residual branches.

Example:
    >>> import ember
    >>> from ember.vision.ops import stochastic_depth
    >>> x = ember.ones(4, 3)
    >>> bool((stochastic_depth(x, 0.5, "row", training=False) == x).all())
    True
"""
from __future__ import annotations

from typing import Any

from ember import nn
import ember


def stochastic_depth(input: Any, p: float, mode: str, training: bool = True) -> Any:
    """Zero each row (``mode="row"``: per sample) or the whole batch (``"batch"``) with probability ``p``
    and scale the survivors by ``1 / (1 - p)``; the identity when not training or ``p == 0``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"stochastic_depth: drop probability has to be between 0 and 1, but got {p}")
    if mode not in ("batch", "row"):
        raise ValueError(f"stochastic_depth: mode has to be either 'batch' or 'row', but got {mode}")
    if not training or p == 0.0:
        return input

    survival = 1.0 - p
    shape = [input.shape[0]] + [1] * (input.ndim - 1) if mode == "row" else [1] * input.ndim
    noise = ember.empty(shape, dtype=input.dtype, device=input.device).bernoulli_(survival)
    if survival > 0.0:
        noise = noise / survival
    return input * noise


class StochasticDepth(nn.Module):
    """Module form of :func:`stochastic_depth` (active in training mode only)."""

    def __init__(self, p: float, mode: str) -> None:
        super().__init__()
        self.p = p
        self.mode = mode

    def forward(self, input: Any) -> Any:
        return stochastic_depth(input, self.p, self.mode, self.training)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(p={self.p}, mode={self.mode})"
