"""RMSprop: divide the gradient by a running root-mean-square, optionally centered and with momentum.

Example:
    >>> opt = ember.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.99, momentum=0.9, centered=True)
"""
from __future__ import annotations

from typing import Any

from ember.creation import zeros_like
from ember.optim import fused_ops as F
from ember.optim import numpy_kernels
from ember.optim.optimizer import (
    Hyper, Optimizer, new_step_tensor, tensor_option, to_scalar, unsupported, with_weight_decay,
)
from ember.tensor import Tensor


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: ``v = alpha*v + (1-alpha)*g^2``; ``p -= lr * g / (sqrt(v - mean_g^2 | v) + eps)``.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (if ``momentum > 0``) and
    ``grad_avg`` (if ``centered``).
    """

    numpy_kernel = numpy_kernels.RMSPROP  # the NumPy-only step (no numba)

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        unsupported("RMSprop", differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        state = {"step": new_step_tensor(), "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)
        return state

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        alpha = hp["alpha"]
        hp.next_step(state)
        g = with_weight_decay(grad, p, hp)
        square_avg = state["square_avg"]
        # torch's ops, each rounded as its CPU kernel (addcmul_/lerp_/add_(alpha=) are fused multiply-adds)
        F.addcmul_(F.mul_(square_avg, alpha), g, g, 1 - alpha)
        if hp["centered"]:
            grad_avg = state["grad_avg"]
            F.lerp_(grad_avg, g, 1 - alpha)
            avg = F.addcmul(square_avg, grad_avg, grad_avg, -1).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg + F.like(hp["eps"], avg)
        if hp.nonzero("momentum"):
            buf = state["momentum_buffer"]
            F.mul_(buf, hp["momentum"]).addcdiv_(g, avg)
            F.add_scaled_(p, buf, -hp["lr"])
        else:
            F.addcdiv_(p, g, avg, -hp["lr"])

numpy_kernels.RMSPROP.update = RMSprop.update


__all__ = ["RMSprop"]
