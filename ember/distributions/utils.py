"""Helpers shared by the distributions: broadcasting parameters, probs <-> logits, cached properties.

Example:
    >>> import ember
    >>> from ember.distributions.utils import broadcast_all
    >>> [tuple(t.shape) for t in broadcast_all(ember.zeros(3), 1.0)]
    [(3,), (3,)]
"""
from __future__ import annotations

import numbers
from typing import Any, Callable

import numpy as np

from ember.autograd.grad_mode import enable_grad
from ember.creation import empty, tensor
from ember import dtypes
from ember.dtypes import get_default_dtype
from ember.ops.elementwise import log, log1p, sigmoid
from ember.ops.nn_ops import softmax
from ember.ops.views import cat
from ember.tensor import Tensor


def broadcast_all(*values: Any) -> tuple:
    """Tensors and numbers broadcast to one shape; numbers become tensors of the tensors' dtype."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    for v in values:
        if not isinstance(v, (Tensor, numbers.Number)):
            raise ValueError("Input arguments must all be instances of numbers.Number or ember.Tensor, "
                             f"got {type(v).__name__}")
    dtype = tensors[0].dtype if tensors else get_default_dtype()
    if not dtype.is_floating_point:
        dtype = get_default_dtype()
    device = tensors[0].device if tensors else None
    as_tensors = [v if isinstance(v, Tensor) else tensor(float(v), dtype=dtype, device=device) for v in values]
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in as_tensors))
    return tuple(t if tuple(t.shape) == shape else t.expand(shape) for t in as_tensors)


def finfo_eps(dtype: Any) -> float:
    return float(dtypes.finfo_np(dtype.np).eps)


def finfo_tiny(dtype: Any) -> float:
    return float(dtypes.finfo_np(dtype.np).tiny)


def clamp_probs(probs: Tensor) -> Tensor:
    eps = finfo_eps(probs.dtype)
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    clamped = clamp_probs(probs)
    if is_binary:
        return log(clamped) - log1p(-clamped)
    return log(clamped)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    if is_binary:
        return sigmoid(logits)
    return softmax(logits, dim=-1)


def expand_cached_parameters(source: Any, new: Any, names: tuple, shape: tuple) -> None:
    """Give ``new`` each of ``names`` that ``source`` holds already (a lazily computed one may be absent), expanded
    to ``shape``; the last one found becomes ``new._param``, as the families' constructors set it.

    Example:
        >>> expand_cached_parameters(Bernoulli(probs=tensor(0.3)), new, ("probs", "logits"), (2,))  # doctest: +SKIP
    """
    for name in names:
        if name in source.__dict__:
            value = source.__dict__[name].expand(shape)
            setattr(new, name, value)
            new._param = value


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """Sum the ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[:value.dim() - dim]) + (-1,)).sum(-1)


_sum_rightmost = sum_rightmost  # torch's private name, imported by flow libraries (zuko, pyro)
euler_constant = 0.57721566490153286060  # Euler-Mascheroni constant, as torch.distributions.utils


def _standard_normal(shape: Any, dtype: Any, device: Any) -> Tensor:
    """Standard normal draws of ``shape`` (torch's helper: ``empty(shape).normal_()``)."""
    return empty(shape, dtype=dtype, device=device).normal_()


def is_tensor_like(inp: Any) -> bool:
    """True for tensors and objects whose type has ``__torch_function__``, as torch's helper."""
    return type(inp) is Tensor or hasattr(inp, "__torch_function__")


class lazy_property:
    """A property computed once per instance, on first use (with gradients recorded)."""

    def __init__(self, wrapped: Callable) -> None:
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        with enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


def _tril_flat_indices(n: int, diag: int) -> "np.ndarray":
    """Flat (row-major) positions of the entries of an n x n matrix on or below diagonal ``diag``, in row order."""
    rows, cols = np.nonzero(np.arange(n)[None, :] < np.arange(n)[:, None] + (diag + 1))
    return rows * n + cols


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of ``mat`` (..., D, D) on or below diagonal ``diag``, in row order (differentiable).

    Example:
        >>> import ember
        >>> tril_matrix_to_vec(ember.arange(9.0).reshape(3, 3), diag=-1).tolist()
        [3.0, 6.0, 7.0]
    """
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    index = tensor(_tril_flat_indices(n, diag), device=mat.device)
    return mat.reshape(tuple(mat.shape[:-2]) + (n * n,)).index_select(-1, index)


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The inverse of :func:`tril_matrix_to_vec`: a (..., D, D) lower-triangular matrix, zeros elsewhere.

    Example:
        >>> import ember
        >>> vec_to_tril_matrix(ember.tensor([1.0, 2.0, 3.0]), diag=-1).tolist()
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 3.0, 0.0]]
    """
    size = vec.shape[-1]
    # D solves D^2 + (1 + 2 diag) D - |diag| (diag + 1) - 2 size = 0
    b = 1 + 2 * diag
    n_real = (-b + (b * b + 8 * size + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    n = int(round(n_real))
    if abs(n - n_real) > 1e-6 or len(_tril_flat_indices(n, diag)) != size:
        raise ValueError(f"The size of last dimension is {size} which cannot be expressed as the lower triangular "
                         "part of a square D x D matrix.")
    # gather from [vec, 0]: each matrix entry takes its vec position, or the trailing zero
    source = np.full(n * n, size, dtype=np.int64)
    source[_tril_flat_indices(n, diag)] = np.arange(size)
    padded = cat([vec, vec.new_zeros(tuple(vec.shape[:-1]) + (1,))], -1)
    return padded.index_select(-1, tensor(source, device=vec.device)).reshape(tuple(vec.shape[:-1]) + (n, n))

