"""``torch.nested``: batches of tensors of different sizes (``strided`` and ``jagged`` layouts).

Built on ordinary tensors (:mod:`ember.nested._tensor`): each op runs on the components, so autograd, devices and
dtypes are those of the components. Compared with torch 2.13 in tests/nested/test_nested_vs_torch.py.

Example:
    >>> import ember
    >>> a, b = ember.ones(2, 3, requires_grad=True), ember.ones(4, 3, requires_grad=True)
    >>> nt = ember.nested.as_nested_tensor([a, b], layout=ember.jagged)
    >>> ember.nested.to_padded_tensor(nt.relu() * 3, 0.0).sum().backward()
    >>> a.grad.tolist()[0]
    [3.0, 3.0, 3.0]
"""
from __future__ import annotations

from typing import Any

from ember.nested._tensor import NestedTensor, from_jagged, make, to_padded_tensor
from ember.tensor import Tensor


def nested_tensor(tensor_list: Any, *, dtype: Any = None, layout: Any = None, device: Any = None,
                  requires_grad: bool = False, pin_memory: bool = False) -> NestedTensor:
    """A nested tensor of copies of ``tensor_list`` (a leaf: ``requires_grad`` as asked)."""
    return make(list(tensor_list), layout, True, requires_grad, dtype, device, "nested_tensor")


def as_nested_tensor(ts: Any, dtype: Any = None, device: Any = None, layout: Any = None) -> NestedTensor:
    """A nested tensor of ``ts`` that keeps their autograd history (gradients flow back to them)."""
    if isinstance(ts, NestedTensor):
        return ts
    if isinstance(ts, Tensor):
        ts = list(ts.unbind(0))
    return make(list(ts), layout, False, False, dtype, device, "as_nested_tensor")


def nested_tensor_from_jagged(values: Tensor, offsets: Any = None, lengths: Any = None, jagged_dim: Any = None,
                              min_seqlen: Any = None, max_seqlen: Any = None) -> NestedTensor:
    """A jagged nested tensor whose components are ``values[offsets[i]:offsets[i+1]]``."""
    return from_jagged(values, offsets, lengths, jagged_dim, min_seqlen, max_seqlen)


def narrow(tensor: Tensor, dim: int, start: Any, length: Any, layout: Any = None) -> NestedTensor:
    """``torch.nested.narrow`` on a dense tensor along dim 1: row ``i`` keeps ``[start[i], start[i] + length[i])``."""
    if dim != 1:
        raise RuntimeError(f"narrow(): nested narrow supports dim 1, got {dim}")
    starts = start.tolist() if isinstance(start, Tensor) else [start] * tensor.shape[0]
    lengths = length.tolist() if isinstance(length, Tensor) else [length] * tensor.shape[0]
    parts = [tensor[i, int(s):int(s) + int(n)] for i, (s, n) in enumerate(zip(starts, lengths))]
    return make(parts, layout, False, False, None, None, "narrow")


__all__ = ["nested_tensor", "as_nested_tensor", "nested_tensor_from_jagged", "to_padded_tensor", "narrow"]
