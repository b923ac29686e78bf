"""Adagrad: per-coordinate learning rates from the running sum of squared gradients.

Example:
    >>> opt = ember.optim.Adagrad(model.parameters(), lr=1e-2, lr_decay=1e-4)
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.creation import full_like
from ember.optim import fused_ops as F
from ember.optim import numpy_kernels
from ember.optim.optimizer import (
    Hyper, Optimizer, new_step_tensor, tensor_option, to_scalar, unsupported, with_weight_decay,
)
from ember.tensor import Tensor


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``: ``sum += g^2``; ``p -= lr / (1 + (step-1)*lr_decay) * g / (sqrt(sum) + eps)``.

    State (``step``, ``sum`` = ``initial_accumulator_value``) is created for every parameter up front,
    as PyTorch does.
    """

    numpy_kernel = numpy_kernels.ADAGRAD  # the NumPy-only step (no numba)

    def __init__(self, params: Any, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        unsupported("Adagrad", differentiable=differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:  # torch makes the state of every parameter up front
            for p in group["params"]:
                self.state[p].update(self.init_state(p, group))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "sum": full_like(p, group["initial_accumulator_value"])}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """The decayed rate is a tensor op on ``state['step']`` (float64, as torch's Python floats)."""
        step_t = hp.next_step(state)
        clr = hp["lr"] / (1 + (step_t.to(dtypes.float64) - 1) * hp["lr_decay"])
        if p.device != clr.device:
            clr = clr.to(p.device)
        g = with_weight_decay(grad, p, hp)
        total = state["sum"]
        total.addcmul_(g, g)  # torch's addcmul_(g, g, value=1): one fused multiply-add
        std = total.sqrt() + F.like(hp["eps"], total)
        F.addcdiv_(p, g, std, -clr)


numpy_kernels.ADAGRAD.update = Adagrad.update


__all__ = ["Adagrad"]
