"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.

Example:
    >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    >>> loss.backward(); opt.step(); opt.zero_grad()
"""
from __future__ import annotations

from typing import Any

from ember.optim import fused_ops as F
from ember.optim import numpy_kernels
from ember.optim.optimizer import Hyper, Optimizer, tensor_option, to_scalar, unsupported, with_weight_decay
from ember.tensor import Tensor


class SGD(Optimizer):
    """``torch.optim.SGD``: ``buf = momentum*buf + (1-dampening)*g``; ``p -= lr * (g + momentum*buf | buf)``.

    The momentum buffer starts as a copy of the first gradient, as in PyTorch; with ``momentum=0``
    a parameter has no state.
    """

    numpy_kernel = numpy_kernels.SGD  # the NumPy-only step (no numba)
    complex_as_real = False  # (torch's SGD steps the complex tensor itself)

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        unsupported("SGD", differentiable=differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor SGD, op for op (its default on the CPU), each op rounded as torch's kernel."""
        g = with_weight_decay(grad, p, hp)
        if hp.nonzero("momentum"):
            buf = state.get("momentum_buffer")
            if buf is None:
                state["momentum_buffer"] = buf = g.detach().clone()
            else:
                F.mul_(buf, hp["momentum"])
                F.add_scaled_(buf, g, 1 - hp["dampening"])
            g = F.add_scaled(g, buf, hp["momentum"]) if hp["nesterov"] else buf
        F.add_scaled_(p, g, -hp["lr"])


numpy_kernels.SGD.update = SGD.update


__all__ = ["SGD"]
