"""``torch.gradient``: central differences inside, one-sided ones at the edges, with PyTorch's spacings.

Spacing is a number (the same step along every dim), a list of numbers (one step per dim) or a list of 1-d
coordinate tensors (one per dim: the sample positions, uneven steps allowed). The formulas and their
evaluation order are ATen's (``ReduceOps.cpp``: ``gradient_helper_float`` and ``gradient_helper``), so the
roundings are torch's: with coordinates the interior is ``a * f[:-2] + b * f[1:-1] + c * f[2:]`` with the
second-order weights of the two neighbouring steps ``dx1, dx2``.

Example:
    >>> import ember
    >>> f = ember.tensor([1., 4., 9., 16.])
    >>> ember.gradient(f, spacing=(ember.tensor([0., 1., 1.5, 3.5]),))[0]
    tensor([3.0000, 7.6667, 8.7000, 3.5000])
"""
from __future__ import annotations

import builtins
from typing import Any

from ember.dtypes import get_default_dtype, uint8
from ember.ops.views import cat, narrow
from ember.tensor import Tensor


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> tuple:
    """The derivative of ``input`` along each of ``dim`` (all dims by default) by finite differences."""
    if input.dtype == uint8:
        raise RuntimeError("torch.gradient does not support uint8 input.")
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2 (got {edge_order}).")
    dims = list(builtins.range(input.ndim)) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    spacing = 1 if spacing is None else spacing
    if isinstance(spacing, Tensor) and spacing.ndim == 0:  # torch reads a 0-d tensor as the number
        spacing = spacing.item()
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        if dim is None:
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                               f"equal to 'self.dim() = {input.ndim}', since dim argument was not given, but got a "
                               f"list of length {len(spacings)}")
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length "
                           f"{len(spacings)} and a dim argument of length {len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1 (dim "
                               f"{d} of input {tuple(input.shape)} has {input.shape[d]} elements, edge_order "
                               f"{edge_order})")
    if any(isinstance(h, Tensor) for h in spacings):
        if not all(isinstance(h, Tensor) for h in spacings):
            raise TypeError("torch.gradient: spacing must be all numbers or all 1-d coordinate tensors, got a mix")
        return tuple(_along_coordinates(input, d % input.ndim, h, edge_order) for d, h in zip(dims, spacings))
    # complex inputs stay complex (a cast to the default float dtype dropped the imaginary part)
    x = input if input.is_floating_point() or input.dtype.is_complex else input.to(get_default_dtype())
    return tuple(_along_step(x, d % input.ndim, h, edge_order) for d, h in zip(dims, spacings))


def _along_step(x: Tensor, d: int, h: Any, edge_order: int) -> Tensor:
    """ATen's ``gradient_helper_float``: one step ``h`` along dim ``d``."""
    n = x.shape[d]
    nar = lambda start, length: narrow(x, d, start, length)  # noqa: E731
    inner = (nar(2, n - 2) - nar(0, n - 2)) / h / 2
    if edge_order == 1:
        first = (nar(1, 1) - nar(0, 1)) / h
        last = (nar(n - 1, 1) - nar(n - 2, 1)) / h
    else:
        first = (nar(0, 1) * -1.5 + nar(1, 1) * 2 + nar(2, 1) * -0.5) / h
        last = (nar(n - 3, 1) * 0.5 + nar(n - 2, 1) * -2 + nar(n - 1, 1) * 1.5) / h
    return cat([first, inner, last], dim=d)


def _along_coordinates(x: Tensor, d: int, coords: Tensor, edge_order: int) -> Tensor:
    """ATen's ``gradient_helper``: samples of ``x`` along dim ``d`` taken at the 1-d ``coords``."""
    if coords.ndim != 1:
        raise RuntimeError(f"torch.gradient expected each element of spacing to have one dimension, but got an "
                           f"element with {coords.ndim} dimensions!")
    n = x.shape[d]
    shape = [1] * x.ndim
    shape[d] = -1
    dx = coords.diff(1, 0)
    dx1, dx2 = dx[:-1], dx[1:]
    a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
    b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
    c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
    nar = lambda start, length: narrow(x, d, start, length)  # noqa: E731
    center = a * nar(0, n - 2) + b * nar(1, n - 2) + c * nar(2, n - 2)
    first_dx, last_dx = dx[0], dx[-1]
    if edge_order == 1:
        first = (nar(1, 1) - nar(0, 1)) / first_dx
        last = (nar(n - 1, 1) - nar(n - 2, 1)) / last_dx
    else:
        second_dx, before_last_dx = dx[1], dx[-2]
        a0 = -(2.0 * first_dx + second_dx) / (first_dx * (first_dx + second_dx))
        b0 = (first_dx + second_dx) / (first_dx * second_dx)
        c0 = -first_dx / (second_dx * (first_dx + second_dx))
        first = a0 * nar(0, 1) + b0 * nar(1, 1) + c0 * nar(2, 1)
        a1 = last_dx / (before_last_dx * (last_dx + before_last_dx))
        b1 = -(last_dx + before_last_dx) / (last_dx * before_last_dx)
        c1 = (2 * last_dx + before_last_dx) / (last_dx * (last_dx + before_last_dx))
        last = a1 * nar(n - 3, 1) + b1 * nar(n - 2, 1) + c1 * nar(n - 1, 1)
    return cat([first, center, last], dim=d)
