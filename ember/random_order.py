"""The order PyTorch's in-place samplers fill a tensor in: memory order, not index order.

``uniform_``, ``normal_``, ``bernoulli_``, ``exponential_``, ``random_``, ... run a TensorIterator over the tensor
they write, and a TensorIterator walks its operands by stride (outermost stride first), so a transposed or
permuted tensor takes its draws in the order of its memory. ``rand_like``/``randn_like``/``randint_like`` are
``empty_like(input)`` (which keeps a permuted input's layout) filled in place, so they follow too. ember's
samplers draw a row-major block; drawing the block in the permuted shape and transposing it back gives every
element the number torch gives it (for the same seed, where ember's stream is torch's CPU generator).

Example:
    >>> fill_order((3, 4), (1, 3))   # a transposed (4, 3) tensor: dim 1 is outermost in memory
    (1, 0)
    >>> fill_order((3, 4), (4, 1)) is None
    True
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np


def fill_order(shape: Sequence[int], strides: Sequence[int]) -> tuple | None:
    """The dims outermost first in the order a TensorIterator walks a tensor of these strides (size-1 dims,
    which take any place, first), or None when that is row-major (then a plain draw is already right)."""
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    order = sorted(dims, key=lambda d: -abs(strides[d]))  # stable: equal strides keep their index order
    if order == dims:
        return None
    return tuple([d for d in range(len(shape)) if shape[d] == 1] + order)


def tensor_fill_order(t: Any) -> tuple | None:
    """:func:`fill_order` of a tensor's strides; None for arrays without strides (symbolic or device values)."""
    try:
        return fill_order(tuple(t.shape), t.stride())
    except Exception:  # noqa: BLE001 (symbolic values and device arrays without strides: row-major draws)
        return None


def draw_in_order(draw: Callable[[tuple], Any], shape: tuple, order: tuple | None) -> Any:
    """``draw(shape)`` made in ``order``: the block is drawn in the permuted shape and transposed back."""
    if order is None:
        return draw(tuple(shape))
    block = draw(tuple(shape[d] for d in order))
    return block.transpose(tuple(int(i) for i in np.argsort(order)))
