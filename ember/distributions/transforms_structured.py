"""Transforms that rearrange or combine others: CatTransform, StackTransform, ReshapeTransform, and
CumulativeDistributionTransform (a distribution's CDF as a transform). Re-exported by
:mod:`ember.distributions.transforms`.

Example:
    >>> import ember
    >>> from ember.distributions.transforms import CatTransform, ExpTransform, identity_transform
    >>> t = CatTransform([ExpTransform(), identity_transform], dim=0, lengths=[1, 1])
    >>> [round(v, 4) for v in t(ember.tensor([0.0, 3.0])).tolist()]
    [1.0, 3.0]
"""
from __future__ import annotations

import math
from typing import Any

from ember.creation import zeros
from ember.ops.views import cat, stack
from ember.distributions import constraints
from ember.distributions.transform_base import Transform
from ember.distributions.utils import sum_rightmost
from ember.tensor import Tensor

__all__ = ["CatTransform", "CumulativeDistributionTransform", "ReshapeTransform", "StackTransform"]


class ReshapeTransform(Transform):
    """Reshape the rightmost ``in_shape`` dimensions to ``out_shape`` (volume-preserving: log-det 0).

    Example:
        >>> import ember
        >>> tuple(ReshapeTransform((4,), (2, 2))(ember.zeros(3, 4)).shape)
        (3, 2, 2)
    """

    bijective = True

    def __init__(self, in_shape: Any, out_shape: Any, cache_size: int = 0) -> None:
        self.in_shape, self.out_shape = tuple(in_shape), tuple(out_shape)
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError(f"in_shape, out_shape have different numbers of elements: {self.in_shape} vs "
                             f"{self.out_shape}")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else ReshapeTransform(self.in_shape, self.out_shape, cache_size)

    def _call(self, x: Tensor) -> Tensor:
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return x.reshape(batch + self.out_shape)

    def _inverse(self, y: Tensor) -> Tensor:
        batch = tuple(y.shape[:y.dim() - len(self.out_shape)])
        return y.reshape(batch + self.in_shape)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        batch = tuple(x.shape[:x.dim() - len(self.in_shape)])
        return zeros(batch, dtype=x.dtype, device=x.device)

    def _split(self, shape: tuple, core: tuple, name: str) -> tuple:
        if len(shape) < len(core):
            raise ValueError("Too few dimensions on input")
        cut = len(shape) - len(core)
        if tuple(shape[cut:]) != core:
            raise ValueError(f"Shape mismatch: expected {tuple(shape[cut:])} but got {name}={core}")
        return tuple(shape[:cut])

    def forward_shape(self, shape: tuple) -> tuple:
        return self._split(shape, self.in_shape, "in_shape") + self.out_shape

    def inverse_shape(self, shape: tuple) -> tuple:
        return self._split(shape, self.out_shape, "out_shape") + self.in_shape


def _check_dim(dim: int, x: Tensor, name: str) -> None:
    if not -x.dim() <= dim < x.dim():
        raise ValueError(f"{name}: dim {dim} is out of range for an input of shape {tuple(x.shape)}")


class CatTransform(Transform):
    """Apply ``tseq[i]`` to the i-th chunk (of ``lengths[i]``, default 1) of dimension ``dim``, then concatenate.

    Example:
        >>> import ember
        >>> from ember.distributions.transforms import ExpTransform
        >>> tuple(CatTransform([ExpTransform(), ExpTransform()], dim=1, lengths=[2, 3])(ember.zeros(4, 5)).shape)
        (4, 5)
    """

    def __init__(self, tseq: list, dim: int = 0, lengths: list | None = None, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise ValueError("CatTransform expects a sequence of Transforms")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError(f"CatTransform: {len(self.transforms)} transforms but {len(self.lengths)} lengths")
        self.dim = dim

    @property
    def event_dim(self) -> int:
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else CatTransform(self.transforms, self.dim, self.lengths,
                                                                        cache_size)

    def _chunks(self, x: Tensor) -> list:
        _check_dim(self.dim, x, "CatTransform")
        if x.shape[self.dim] != self.length:
            raise ValueError(f"CatTransform: dimension {self.dim} of the input has size {x.shape[self.dim]}, "
                             f"expected sum(lengths) = {self.length}")
        chunks, start = [], 0
        for length in self.lengths:
            chunks.append(x.narrow(self.dim, start, length))
            start += length
        return chunks

    def _call(self, x: Tensor) -> Tensor:
        return cat([t(chunk) for t, chunk in zip(self.transforms, self._chunks(x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return cat([t.inv(chunk) for t, chunk in zip(self.transforms, self._chunks(y))], self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        parts = []
        for t, xs, ys in zip(self.transforms, self._chunks(x), self._chunks(y)):
            part = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                part = sum_rightmost(part, self.event_dim - t.event_dim)
            parts.append(part)
        # dim inside the batch dims: the pieces sit side by side; inside the event: they add up
        dim = (self.dim - x.dim() if self.dim >= 0 else self.dim) + self.event_dim
        if dim < 0:
            return cat(parts, dim)
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """Apply ``tseq[i]`` to the i-th slice of dimension ``dim``, then stack.

    Example:
        >>> import ember
        >>> from ember.distributions.transforms import ExpTransform, identity_transform
        >>> StackTransform([ExpTransform(), identity_transform], dim=0)(ember.zeros(2)).tolist()
        [1.0, 0.0]
    """

    def __init__(self, tseq: list, dim: int = 0, cache_size: int = 0) -> None:
        if not all(isinstance(t, Transform) for t in tseq):
            raise ValueError("StackTransform expects a sequence of Transforms")
        if cache_size:
            tseq = [t.with_cache(cache_size) for t in tseq]
        super().__init__(cache_size=cache_size)
        self.transforms = list(tseq)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else StackTransform(self.transforms, self.dim, cache_size)

    def _slices(self, x: Tensor) -> list:
        _check_dim(self.dim, x, "StackTransform")
        if x.shape[self.dim] != len(self.transforms):
            raise ValueError(f"StackTransform: dimension {self.dim} of the input has size {x.shape[self.dim]}, "
                             f"expected one slice per transform ({len(self.transforms)})")
        return list(x.unbind(self.dim))

    def _call(self, x: Tensor) -> Tensor:
        return stack([t(s) for t, s in zip(self.transforms, self._slices(x))], self.dim)

    def _inverse(self, y: Tensor) -> Tensor:
        return stack([t.inv(s) for t, s in zip(self.transforms, self._slices(y))], self.dim)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        parts = [t.log_abs_det_jacobian(xs, ys) for t, xs, ys in zip(self.transforms, self._slices(x), self._slices(y))]
        return stack(parts, self.dim)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self) -> constraints.Constraint:  # type: ignore[override]
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """y = distribution.cdf(x), from the distribution's support to the unit interval; log-det = log_prob(x).

    Example:
        >>> import ember
        >>> from ember.distributions import Normal
        >>> CumulativeDistributionTransform(Normal(0.0, 1.0))(ember.tensor(0.0)).item()
        0.5
    """

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> constraints.Constraint:  # type: ignore[override]
        return self.distribution.support

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self if self._cache_size == cache_size else CumulativeDistributionTransform(self.distribution,
                                                                                           cache_size)

    def _call(self, x: Tensor) -> Tensor:
        return self.distribution.cdf(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return self.distribution.log_prob(x)
