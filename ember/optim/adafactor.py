"""``torch.optim.Adafactor`` (Shazeer & Stern, 2018, as PyTorch 2.13 defines it): second moments kept as
row and column means of the squared gradient for matrices (a rank-1 factorization over the last two
dimensions), as a full vector for 1-D parameters; relative step size ``min(lr, 1/sqrt(t))`` scaled by the
parameter's RMS; update clipping at ``d``. The arithmetic follows torch's single-tensor loop step by step.

Example:
    >>> import ember
    >>> w = ember.randn(4, 3, requires_grad=True)
    >>> opt = ember.optim.Adafactor([w], lr=1e-2)
    >>> (w * w).sum().backward(); opt.step()
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember.autograd import grad_mode
from ember.creation import zeros, zeros_like
from ember.optim.optimizer import Optimizer, new_step_tensor, to_scalar
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
    def _init(p: Tensor) -> dict:
        state: dict = {"step": new_step_tensor()}
        if p.grad.ndim > 1:
            row_shape, col_shape = list(p.grad.shape), list(p.grad.shape)
            row_shape[-1], col_shape[-2] = 1, 1
            state["row_var"] = zeros(row_shape, dtype=p.dtype, device=p.device)
            state["col_var"] = zeros(col_shape, dtype=p.dtype, device=p.device)
        else:
            state["variance"] = zeros_like(p)
        return state

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr = to_scalar(group["lr"])
                eps1, eps2 = group["eps"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state.update(self._init(p))
                    grad = -p.grad if group["maximize"] else p.grad
                    self._update(p, grad, state, lr, eps1, eps2, group)
        return loss

    @staticmethod
    def _update(p: Tensor, grad: Tensor, state: dict, lr: float, eps1: float | None, eps2: float,
                group: dict) -> None:
        if eps1 is None:
            eps1 = float(np.finfo(p.dtype.np).eps)
        state["step"].add_(1)
        step = state["step"].item()
        one_minus_beta2_t = step ** group["beta2_decay"]
        rho_t = min(lr, 1 / (step ** 0.5))
        alpha = max(eps2, p.norm(2).item() / (p.numel() ** 0.5)) * rho_t
        if group["weight_decay"] != 0:
            p.mul_(1 - lr * group["weight_decay"])
        if grad.ndim > 1:
            row_var, col_var = state["row_var"], state["col_var"]
            row_mean = grad.norm(dim=-1, keepdim=True).square() / grad.shape[-1]
            row_var.lerp_(row_mean, one_minus_beta2_t)
            col_mean = grad.norm(dim=-2, keepdim=True).square() / grad.shape[-2]
            col_var.lerp_(col_mean, one_minus_beta2_t)
            var_estimate = (row_var @ col_var) / row_var.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            variance.lerp_(grad * grad, one_minus_beta2_t)
            var_estimate = variance.clone()
        update = var_estimate.clamp(min=eps1 * eps1).rsqrt() * grad
        denom = max(1.0, update.norm(2).item() / ((update.numel() ** 0.5) * group["d"]))
        p.add_(update, alpha=-alpha / denom)
