"""Autograd state of a sparse tensor is its values' (COO and compressed layouts alike).

A sparse tensor requires grad, has a ``grad_fn`` and becomes a leaf exactly as its values tensor does:
the sparse wrapper only forwards, so gradients flow to the values with the pattern kept.

Example:
    >>> import ember
    >>> s = ember.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse().requires_grad_()
    >>> s.requires_grad, s.values().requires_grad
    (True, True)
"""
from __future__ import annotations

from typing import Any


class ValuesAutogradState:
    """Mixin for sparse tensor classes holding their values in ``_sp_values`` (put it before ``Tensor``)."""

    __slots__ = ()

    @property
    def _requires_grad(self) -> bool:
        return self._sp_values._requires_grad

    @_requires_grad.setter
    def _requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @property
    def grad_fn(self) -> Any:
        return self._sp_values.grad_fn

    @grad_fn.setter
    def grad_fn(self, value: Any) -> None:
        raise RuntimeError("grad_fn of a sparse tensor is its values' and cannot be set")

    def requires_grad_(self, requires_grad: bool = True) -> Any:
        values = self._sp_values
        if requires_grad and values.grad_fn is None and not values._requires_grad:
            # a leaf of its own: marking the values the user gave would change their tensor
            self._sp_values = values = values.detach()
        values.requires_grad_(requires_grad)
        return self
