"""Position information for sequence models (ember-specific modules; PyTorch has no built-in ones).

* :class:`PositionalEncoding` adds the fixed sinusoids of "Attention Is All You Need":
  ``pe[pos, 2i] = sin(pos / 10000^(2i/d))``, ``pe[pos, 2i+1] = cos(...)``. No parameters; the table is a
  non-persistent buffer (not in ``state_dict``).
* :class:`LearnedPositionalEmbedding` adds a trained ``weight`` of shape (max_len, d_model),
  initialized N(0, 0.02^2) (GPT-2's choice).

Both take ``(L, N, E)`` input by default or ``(N, L, E)`` with ``batch_first=True`` (matching
``nn.TransformerEncoderLayer``), add the positions, and apply dropout.

Example:
    >>> import ember
    >>> pe = ember.nn.PositionalEncoding(8, batch_first=True)
    >>> pe(ember.zeros(2, 3, 8))[0, 0].tolist()[:2]
    [0.0, 1.0]
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import creation
from ember.nn import functional as F, init
from ember.nn.modules.module import Module
from ember.nn.parameter import Parameter
from ember.tensor import Tensor


def sinusoidal_table(max_len: int, d_model: int) -> np.ndarray:
    """The (max_len, d_model) sinusoid table, computed in float64."""
    position = np.arange(max_len, dtype=np.float64)[:, None]
    div_term = np.exp(np.arange(0, d_model, 2, dtype=np.float64) * (-math.log(10000.0) / d_model))
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(position * div_term)
    table[:, 1::2] = np.cos(position * div_term[: d_model // 2])
    return table


class _Positional(Module):
    def _check(self, x: Tensor) -> int:
        if x.dim() != 3:
            layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
            raise ValueError(f"{type(self).__name__}: expected 3-D input {layout}, got shape {tuple(x.shape)}")
        length = x.shape[1 if self.batch_first else 0]
        if length > self.max_len:
            raise ValueError(f"{type(self).__name__}: sequence length {length} exceeds max_len={self.max_len}")
        if x.shape[-1] != self.d_model:
            raise ValueError(f"{type(self).__name__}: last dim {x.shape[-1]} != d_model {self.d_model}")
        return length

    def _add(self, x: Tensor, table: Tensor) -> Tensor:
        length = self._check(x)
        positions = table[:length]
        positions = positions.unsqueeze(0) if self.batch_first else positions.unsqueeze(1)
        return F.dropout(x + positions, self.p, self.training) if self.p > 0 else x + positions

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}, dropout={self.p}, batch_first={self.batch_first}"


class PositionalEncoding(_Positional):
    """Adds fixed sinusoidal position encodings, then dropout."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0, batch_first: bool = False) -> None:
        super().__init__()
        self.d_model, self.max_len, self.p, self.batch_first = d_model, max_len, dropout, batch_first
        self.register_buffer("pe", creation.tensor(sinusoidal_table(max_len, d_model).astype(np.float32)),
                             persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return self._add(x, self.pe.to(x.dtype))


class LearnedPositionalEmbedding(_Positional):
    """Adds a learned (max_len, d_model) position embedding ``weight``, then dropout."""

    def __init__(self, max_len: int, d_model: int, dropout: float = 0.0, batch_first: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.d_model, self.max_len, self.p, self.batch_first = d_model, max_len, dropout, batch_first
        self.weight = Parameter(creation.empty(max_len, d_model, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.normal_(self.weight, 0.0, 0.02)

    def forward(self, x: Tensor) -> Tensor:
        return self._add(x, self.weight)
