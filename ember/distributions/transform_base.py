"""``Transform``, the base of ember's distribution transforms, and the inverse wrapper ``.inv`` returns.

Kept apart from :mod:`ember.distributions.transforms` so the transform modules built on it
(``transforms_structured``, ``transforms_matrix``) import it without an import cycle; every name is
re-exported by ``ember.distributions.transforms``.

Example:
    >>> import ember
    >>> from ember.distributions.transforms import ExpTransform
    >>> round(ExpTransform().inv(ember.tensor(1.0)).item(), 6)
    0.0
"""
from __future__ import annotations

from typing import Any

from ember.distributions import constraints
from ember.tensor import Tensor

__all__ = ["Transform"]


class Transform:
    """y = f(x) with ``inv`` (x from y) and ``log_abs_det_jacobian(x, y)``; ``cache_size`` 0 or 1."""

    bijective = False
    sign: int = 1
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y: tuple = (None, None)

    @property
    def event_dim(self) -> int:
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> "Transform":
        return _InverseTransform(self)

    def with_cache(self, cache_size: int = 1) -> "Transform":
        """This transform with ``cache_size`` (a copy for transforms without constructor arguments)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self).__name__}.with_cache is not implemented")

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        raise NotImplementedError

    def forward_shape(self, shape: tuple) -> tuple:
        return shape

    def inverse_shape(self, shape: tuple) -> tuple:
        return shape

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    def __repr__(self) -> str:  # torch's: _InverseTransform(ExpTransform())
        return f"{self.__class__.__name__}({self._inv!r})"

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.codomain

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> int:  # type: ignore[override]
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __hash__(self) -> int:
        return hash(("inverse", self._inv))

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)
