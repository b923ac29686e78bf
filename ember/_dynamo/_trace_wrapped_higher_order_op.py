"""``torch._dynamo._trace_wrapped_higher_order_op``: ``TransformGetItemToIndex``, the mode that makes
``table[q_idx]`` with integer-tensor indices an indexing op (never a Python-number view).

Hugging Face ``transformers`` imports it at ``import transformers.masking_utils`` and enters it around vmapped
mask functions. Inside the mode, ``Tensor.__getitem__`` with indices that are all tensors or Python ints indexes
with int64 tensors (ints made 0-d tensors), as PyTorch's ``mod_index``; other subscripts run unchanged.

Example:
    >>> import ember
    >>> from ember._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
    >>> table = ember.arange(12).view(3, 4)
    >>> with TransformGetItemToIndex():
    ...     table[ember.tensor(1), 2]
    tensor(6)
"""
from __future__ import annotations

from typing import Any

import ember
from ember.overrides import TorchFunctionMode
from ember.tensor import Tensor
from ember.utils import _pytree as pytree

__all__ = ["TransformGetItemToIndex", "mod_index"]


def mod_index(x: Tensor, indices: list[Tensor]) -> Tensor:
    """``x[indices]`` with every index an integer tensor (advanced indexing, broadcasting the indices)."""
    return x[tuple(indices)]


class TransformGetItemToIndex(TorchFunctionMode):
    """Inside: ``t[i, j]`` with tensor / int indices is tensor indexing (ints become 0-d int64 tensors)."""

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func is Tensor.__getitem__:
            tensor_to_index = args[0]
            if not isinstance(tensor_to_index, Tensor):
                raise AssertionError(f"expected torch.Tensor, got {type(tensor_to_index)}")
            index_args = pytree.tree_leaves(args[1])
            if all(isinstance(x, (Tensor, int)) for x in index_args):
                converted = [ember.tensor(x, dtype=ember.int64, device=tensor_to_index.device)
                             if isinstance(x, int) else x for x in index_args]
                return mod_index(tensor_to_index, converted)
        return func(*args, **(kwargs or {}))
