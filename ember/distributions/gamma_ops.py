"""PyTorch's underscore gamma samplers that distribution libraries call directly (zuko, pyro, nflows):
``torch._standard_gamma``, ``torch._standard_gamma_grad`` and ``torch._sample_dirichlet``.

``_standard_gamma(alpha)`` draws Gamma(alpha, 1) in alpha's shape and dtype and is differentiable in alpha
through the implicit reparameterization gradient (``_standard_gamma_grad(alpha, x)`` = dx/dalpha), as torch's
``StandardGammaBackward0``. ``_sample_dirichlet`` draws normalized gammas; as in torch its derivative is not
implemented (torch's ``Dirichlet.rsample`` has its own backward). Draws come from NumPy's gamma sampler on the
generator's stream, not torch's: seeded values differ from torch's, distributions agree.

Example:
    >>> import ember
    >>> a = ember.tensor([0.5, 2.0], requires_grad=True)
    >>> x = ember._standard_gamma(a); x.sum().backward()
    >>> bool((a.grad - ember._standard_gamma_grad(a.detach(), x.detach())).abs().max() < 1e-5)
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, random as ember_random
from ember.autograd import Function
from ember.creation import tensor
from ember.distributions._gamma_rsample import standard_gamma_grad
from ember.tensor import Tensor

__all__ = ["_standard_gamma", "_standard_gamma_grad", "_sample_dirichlet"]


def _check_float(op: str, alpha: Any) -> None:
    if not isinstance(alpha, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(alpha).__name__}")
    if not alpha.is_floating_point():
        raise NotImplementedError(f'"{op}" not implemented for \'{dtypes._float8_name(alpha.dtype)}\'')


def _draw(alpha: Tensor, generator: Any) -> Tensor:
    host = alpha.detach().cpu().numpy().astype(np.float64)
    draws = ember_random._rng(generator).standard_gamma(host)
    # torch clamps to the dtype's smallest normal so that log(x) stays finite
    draws = np.maximum(draws, dtypes.finfo_np(alpha.dtype.np).tiny)
    return tensor(draws.astype(alpha.dtype.np), device=alpha.device)


def _standard_gamma_grad(self: Tensor, output: Tensor) -> Tensor:
    """dx/dalpha of a Gamma(alpha, 1) draw x held at a fixed quantile (no gradient through it)."""
    alpha = np.broadcast_to(self.detach().cpu().numpy().astype(np.float64), tuple(output.shape))
    grad = standard_gamma_grad(output.detach().cpu().numpy().astype(np.float64), np.asarray(alpha))
    return tensor(grad.astype(output.dtype.np), device=output.device)


class StandardGamma(Function):
    @staticmethod
    def forward(ctx: Any, alpha: Tensor, generator: Any) -> Tensor:
        out = _draw(alpha, generator)
        ctx.save_for_backward(alpha, out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        alpha, out = ctx.saved_tensors
        return grad * _standard_gamma_grad(alpha, out), None


def _standard_gamma(input: Tensor, generator: Any = None) -> Tensor:
    """Gamma(input, 1) draws in input's shape and dtype, differentiable in ``input`` (implicit gradient)."""
    _check_float("gamma_cpu", input)
    if input.requires_grad:
        return StandardGamma.apply(input, generator)
    return _draw(input, generator)


class SampleDirichlet(Function):
    @staticmethod
    def forward(ctx: Any, alpha: Tensor, generator: Any) -> Tensor:
        gammas = _draw(alpha, generator).numpy().astype(np.float64)
        total = gammas.sum(-1, keepdims=True)
        out = gammas / np.where(total > 0, total, 1.0)
        tiny = dtypes.finfo_np(alpha.dtype.np).tiny
        return tensor(np.clip(out, tiny, 1.0).astype(alpha.dtype.np), device=alpha.device)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple:
        raise RuntimeError("the derivative for '_sample_dirichlet' is not implemented.")


def _sample_dirichlet(input: Tensor, generator: Any = None) -> Tensor:
    """Dirichlet(input) draws along the last dim (normalized gammas), in input's dtype."""
    _check_float("dirichlet", input)
    if input.requires_grad:
        return SampleDirichlet.apply(input, generator)
    return SampleDirichlet.forward(None, input, generator)
