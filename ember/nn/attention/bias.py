"""``torch.nn.attention.bias``: causal masks as tensors that ``scaled_dot_product_attention`` accepts.

``causal_upper_left(L, S)`` keeps key ``j`` for query ``i`` when ``j <= i`` (what ``is_causal=True`` does);
``causal_lower_right(L, S)`` aligns the last query with the last key (``j <= i + S - L``), the mask a decoder
step with a cache needs. Both return a :class:`CausalBias`, a Tensor subclass holding the boolean (L, S) mask
(PyTorch's holds only the variant and sizes and materializes on use; its printout is the mask's, as here), so
it works wherever a boolean ``attn_mask`` does.

Example:
    >>> causal_lower_right(2, 4).tolist()
    [[True, True, True, False], [True, True, True, True]]
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

from ember import dtypes
from ember.creation import ones
from ember.tensor import Tensor

__all__ = ["CausalVariant", "CausalBias", "causal_upper_left", "causal_lower_right"]


class CausalVariant(IntEnum):
    """Which corner the causal triangle starts from (PyTorch's numbers)."""
    UPPER_LEFT = 1
    LOWER_RIGHT = 2


def _mask(variant: CausalVariant, seq_len_q: int, seq_len_kv: int, device: Any = None) -> Tensor:
    full = ones(seq_len_q, seq_len_kv, dtype=dtypes.bool_, device=device)
    return full.tril() if variant == CausalVariant.UPPER_LEFT else full.tril(diagonal=seq_len_kv - seq_len_q)


class CausalBias(Tensor):
    """A causal attention mask of ``variant`` for ``seq_len_q`` queries and ``seq_len_kv`` keys."""

    def __new__(cls, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> "CausalBias":
        if not isinstance(variant, CausalVariant):
            raise AssertionError(f"CausalBias: variant must be a CausalVariant, got {variant!r}")
        mask = _mask(variant, seq_len_q, seq_len_kv)
        bias = Tensor._make.__func__(cls, mask._data, mask._device, False)
        bias.variant, bias.seq_len_q, bias.seq_len_kv = variant, seq_len_q, seq_len_kv
        return bias

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        pass  # everything happens in __new__

    def _materialize(self, device: Any = None) -> Tensor:
        """The plain boolean (L, S) mask (on ``device``)."""
        return _mask(self.variant, self.seq_len_q, self.seq_len_kv, device)

    def __repr__(self) -> str:
        return repr(self._materialize())

    __str__ = __repr__


def causal_upper_left(*size: int) -> CausalBias:
    """The causal mask aligned to the top-left corner (``is_causal=True``) for ``size = (L, S)``."""
    if len(size) != 2:
        raise AssertionError("causal_upper_left only supports 2D tensors")
    return CausalBias(CausalVariant.UPPER_LEFT, size[0], size[1])


def causal_lower_right(*size: int) -> CausalBias:
    """The causal mask aligned to the bottom-right corner for ``size = (L, S)``."""
    if len(size) != 2:
        raise AssertionError("causal_lower_right only supports 2D tensors")
    return CausalBias(CausalVariant.LOWER_RIGHT, size[0], size[1])
