"""``torch.distributed._functional_collectives``: ``wait_tensor`` (ember's collectives finish before they return,
so waiting gives the tensor back); the autograd all-to-all is named and refused (see ``_not_here``).

Example:
    >>> import ember
    >>> from ember.distributed._functional_collectives import wait_tensor
    >>> t = ember.ones(2); wait_tensor(t) is t
    True
"""
from __future__ import annotations

from ember.distributed._not_here import refused_function
from ember.tensor import Tensor

__all__ = ["all_to_all_single_autograd", "wait_tensor"]


def wait_tensor(tensor: Tensor) -> Tensor:
    """Wait for the collective that produced ``tensor``: ember's are synchronous, so it is ready already."""
    return tensor


all_to_all_single_autograd = refused_function("torch.distributed._functional_collectives.all_to_all_single_autograd",
                                              "A differentiable all-to-all")
