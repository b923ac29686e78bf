"""``torch.optim.Adafactor`` (Shazeer & Stern, 2018, as PyTorch 2.13 defines it): second moments kept as
row and column means of the squared gradient for matrices (a rank-1 factorization over the last two
dimensions), as a full vector for 1-D parameters; relative step size ``min(lr, 1/sqrt(t))`` scaled by the
parameter's RMS; update clipping at ``d``. Its state initialization plus one update in ember ops, in torch's
single-tensor order; eagerly the update runs compiled like the other optimizers'.

Example:
    >>> import ember
    >>> w = ember.randn(4, 3, requires_grad=True)
    >>> opt = ember.optim.Adafactor([w], lr=1e-2)
    >>> (w * w).sum().backward(); opt.step()
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes
from ember.creation import zeros, zeros_like
from ember.optim.optimizer import Hyper, Optimizer, new_step_tensor, to_scalar
from ember.tensor import Tensor

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0, weight_decay=0.0, *,
    foreach=None, maximize=False)``; ``eps[0]`` None means the parameter dtype's machine epsilon."""

    def __init__(self, params: Any, lr: float | Tensor = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= to_scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        if p.dtype.is_complex:
            raise RuntimeError("Adafactor does not support complex parameters")
        state: dict = {"step": new_step_tensor()}
        if p.ndim > 1:
            row_shape, col_shape = list(p.shape), list(p.shape)
            row_shape[-1], col_shape[-2] = 1, 1
            state["row_var"] = zeros(row_shape, dtype=p.dtype, device=p.device)
            state["col_var"] = zeros(col_shape, dtype=p.dtype, device=p.device)
        else:
            state["variance"] = zeros_like(p)
        return state

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor Adafactor. Torch computes the step size, ``alpha`` and the clipping
        denominator as Python floats (float64, ``.item()``); here they are 0-d float64 tensor ops, so the
        update stays traceable (compiled eagerly, like Adam) and rounds as torch's floats do."""
        lr, d = hp["lr"], hp["d"]
        eps1, eps2 = hp["eps"]
        if eps1 is None:
            eps1 = float(dtypes.finfo_np(p.dtype.np).eps)
        step = hp.next_step(state).to(dtypes.float64)
        one_minus_beta2_t = step ** hp["beta2_decay"]
        rho_t = (1 / step ** 0.5).clamp(max=lr)
        param_rms = p.norm(2).to(dtypes.float64) / math.sqrt(p.numel())
        alpha = param_rms.clamp(min=eps2) * rho_t
        if hp.nonzero("weight_decay"):
            p.mul_(1 - lr * hp["weight_decay"])
        if grad.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_var.lerp_(grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1], one_minus_beta2_t)
            col_var.lerp_(grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2], one_minus_beta2_t)
            var_estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            variance.lerp_(grad * grad, one_minus_beta2_t)
            var_estimate = variance
        direction = var_estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = (direction.norm(2).to(dtypes.float64) / (math.sqrt(direction.numel()) * d)).clamp(min=1.0)
        p.add_(direction * (-alpha / denom))
