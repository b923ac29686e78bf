"""``torch.nn.utils.parametrizations``: weight_norm, spectral_norm and orthogonal as parametrizations.

Example:
    >>> import ember
    >>> m = ember.nn.utils.parametrizations.weight_norm(ember.nn.Linear(4, 2))
    >>> sorted(m.state_dict())
    ['bias', 'parametrizations.weight.original0', 'parametrizations.weight.original1']
"""
from __future__ import annotations

from typing import Any

from ember.autograd.grad_mode import no_grad
from ember.creation import randn
from ember.ops.linalg import dot, mv
from ember.nn.modules.module import Module
from ember.nn.utils import parametrize
from ember.nn.utils.orthogonal import orthogonal  # noqa: F401
from ember.nn.utils.weight_norm import _l2_normalize, _norm_except_dim, _weight_from
from ember.tensor import Tensor

__all__ = ["weight_norm", "spectral_norm", "orthogonal"]


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = None if dim == -1 else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return _weight_from(weight_g, weight_v, self.dim)

    def right_inverse(self, weight: Tensor) -> tuple:
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """``weight = g * v / ||v||`` with ``original0 = g`` and ``original1 = v`` (PyTorch's state-dict keys)."""
    return parametrize.register_parametrization(module, name, _WeightNorm(-1 if dim is None else dim), unsafe=True)


class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        self.dim = dim if dim >= 0 else dim + weight.ndim
        self.eps, self.n_power_iterations = eps, n_power_iterations
        if weight.ndim > 1:
            mat = self._reshape(weight)
            h, w = mat.shape
            self.register_buffer("_u", _l2_normalize(randn(h, dtype=weight.dtype), eps))
            self.register_buffer("_v", _l2_normalize(randn(w, dtype=weight.dtype), eps))
            self._power_method(mat, 15)

    def _reshape(self, weight: Tensor) -> Tensor:
        w = weight
        if self.dim != 0:
            w = w.permute(self.dim, *[d for d in range(w.ndim) if d != self.dim])
        return w.reshape(w.shape[0], -1)

    def _power_method(self, mat: Tensor, iterations: int) -> None:
        with no_grad():
            for _ in range(iterations):
                # mv, not @: under autocast PyTorch runs mv (and dot) in float32 and matmul in the low dtype
                self._u.copy_(_l2_normalize(mv(mat.detach(), self._v), self.eps))
                self._v.copy_(_l2_normalize(mv(mat.t().detach(), self._u), self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return _l2_normalize(weight, self.eps)
        mat = self._reshape(weight)
        if self.training:
            self._power_method(mat, self.n_power_iterations)
        sigma = dot(self._u.clone(), mv(mat, self._v.clone()))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    weight = getattr(module, name)
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
