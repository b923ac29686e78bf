"""``parameters_to_vector`` and ``vector_to_parameters``.

Example:
    >>> import ember
    >>> lin = ember.nn.Linear(2, 3)
    >>> ember.nn.utils.parameters_to_vector(lin.parameters()).shape
    ember.Size([9])
"""
from __future__ import annotations

from typing import Iterable

from ember.autograd import grad_mode
from ember.tensor import Tensor
from ember.ops.views import cat


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """Concatenate the flattened parameters into one 1-D tensor (differentiable)."""
    return cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of ``vec`` into the parameters' data."""
    if not isinstance(vec, Tensor) or vec.dim() != 1:
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")  # torch's message
    offset = 0
    with grad_mode.no_grad():
        for p in parameters:
            n = p.numel()
            p.copy_(vec[offset: offset + n].reshape(tuple(p.shape)))
            offset += n
    if offset != vec.numel():
        raise ValueError(f"vector_to_parameters: vector has {vec.numel()} elements but the parameters hold {offset}")
