"""Adam and AdamW (decoupled weight decay), with AMSGrad and maximize.

Example:
    >>> opt = ember.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    >>> loss.backward(); opt.step(); opt.zero_grad()
"""
from __future__ import annotations

from typing import Any

from ember import dtypes, interpreters
from ember.creation import zeros, zeros_like
from ember.ops.host_pow import host_pow
from ember.optim import fused_ops as F
from ember.optim import numpy_kernels
from ember.optim.optimizer import (
    Hyper, Optimizer, new_step_tensor, scalar_dtype, tensor_option, to_scalar, unsupported, with_weight_decay,
)
from ember.tensor import Tensor


class Adam(Optimizer):
    """``torch.optim.Adam``: bias-corrected first/second moment estimates.

    ``weight_decay`` adds ``weight_decay * p`` to the gradient (L2) unless ``decoupled_weight_decay``
    (what :class:`AdamW` sets), which shrinks the parameter by ``1 - lr * weight_decay`` instead.
    State per parameter: ``step`` (0-d CPU tensor), ``exp_avg``, ``exp_avg_sq`` and, with
    ``amsgrad``, ``max_exp_avg_sq``.

    ``capturable=True`` (torch's): ``step`` lives on the parameter's device (float32) and the bias
    corrections are device ops on it (torch's capturable formulas), so a step reads no host value and
    a compiled training step with Adam replays as one CUDA graph (``mode="reduce-overhead"``). As in
    torch, it needs parameters on a CUDA device (the CPU raises when the step runs).
    """

    numpy_kernel = numpy_kernels.ADAM  # the NumPy-only step (no numba)
    capturable_update = True  # (its own capturable formulas, CUDA only)

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (all(isinstance(b, float) for b in betas) or all(isinstance(b, Tensor) for b in betas)):
            raise ValueError("betas must be either both floats or both Tensors")
        for i, beta in enumerate(betas):
            tensor_option(beta, f"betas[{i}]")
            if isinstance(beta, Tensor) and foreach and not capturable:
                raise ValueError(f"betas[{i}] as a Tensor is not supported for capturable=False and foreach=True")
        if isinstance(lr, Tensor) and foreach and not capturable:
            raise ValueError("lr as a Tensor is not supported for capturable=False and foreach=True")
        unsupported(type(self).__name__, differentiable=differentiable)
        if fused and foreach:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        betas = tuple(b.squeeze() if isinstance(b, Tensor) and b.dim() != 0 else b for b in betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        step = capturable_step(p) if group.get("capturable") else new_step_tensor()
        state = {"step": step, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)
        return state

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor Adam. The step-dependent factors are tensor ops on ``state['step']`` (in
        float64, as torch's Python floats), so a traced step keeps counting instead of freezing the bias
        correction of the step it was traced at."""
        lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
        decoupled = hp.get("decoupled_weight_decay", False)
        if hp.get("capturable", False):
            return _capturable_update(p, grad, state, hp, decoupled)
        # The step-dependent scalars first (they read nothing the moments write): compiled, the scalar chain
        # then precedes the whole elementwise chain, which fuses into one loop per parameter.
        step = hp.next_step(state).to(dtypes.float64)
        # torch computes these in Python floats: the C library's pow, not NumPy's (ember/ops/host_pow.py)
        bias_correction1 = 1 - host_pow(beta1, step)
        bias_correction2_sqrt = host_pow(1 - host_pow(beta2, step), 0.5)
        step_size = lr / bias_correction1
        if decoupled and hp.nonzero("weight_decay"):
            F.mul_(p, 1 - lr * hp["weight_decay"])
        g = grad if decoupled else with_weight_decay(grad, p, hp)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        # torch's ops, each rounded as its CPU kernel: lerp_ and addcmul_ are fused multiply-adds
        F.lerp_(exp_avg, g, 1 - beta1)
        F.addcmul_(F.mul_(exp_avg_sq, beta2), g, g, 1 - beta2)
        second = exp_avg_sq
        if hp["amsgrad"]:
            second = F.maximum_(state["max_exp_avg_sq"], exp_avg_sq)
        if p.device != step.device:
            bias_correction2_sqrt, step_size = bias_correction2_sqrt.to(p.device), step_size.to(p.device)
        denom = F.div(second.sqrt(), bias_correction2_sqrt) + F.like(eps, p)
        F.addcdiv_(p, exp_avg, denom, -step_size)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        move_steps_for_capture(self)


def capturable_step(p: Tensor) -> Tensor:
    """``state['step']`` of a capturable optimizer: a 0-d float32 (float64 when that is the default) tensor
    on the parameter's device, as torch's ``torch.zeros((), dtype=_get_scalar_dtype(), device=p.device)``."""
    return zeros((), dtype=scalar_dtype(), device=p.device)


def move_steps_for_capture(opt: Optimizer) -> None:
    """After ``load_state_dict``: a capturable group's step counts go to their parameter's device (a checkpoint
    saved without ``capturable`` keeps them on the CPU), as torch's loading does."""
    for group in opt.param_groups:
        if not group.get("capturable"):
            continue
        for p in group["params"]:
            state = opt.state.get(p)
            step = None if not state else state.get("step")
            if isinstance(step, Tensor) and (step.device != p.device or step.dtype != scalar_dtype()):
                state["step"] = step.to(device=p.device, dtype=scalar_dtype())


def _capturable_update(p: Tensor, grad: Tensor, state: dict, hp: Hyper, decoupled: bool) -> None:
    """Torch's capturable single-tensor Adam: the step count and every step-dependent factor stay 0-d tensors on
    the device (float32), the step size folded into the denominator (``addcdiv_`` takes no tensor value)."""
    lr, (beta1, beta2), eps = hp["lr"], hp["betas"], hp["eps"]
    step_t = state["step"]
    if not interpreters.tracing() and (p.device.type != step_t.device.type or p.device.type != "cuda"):
        raise AssertionError("If capturable=True, params and state_steps must be on supported devices: "
                             f"['cuda'] (parameter on {p.device}, step on {step_t.device})")
    step_t.add_(1)
    if decoupled and hp.nonzero("weight_decay"):
        F.mul_(p, 1 - lr * hp["weight_decay"])
    g = grad if decoupled else with_weight_decay(grad, p, hp)
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    F.lerp_(exp_avg, g, 1 - beta1)
    F.addcmul_(F.mul_(exp_avg_sq, beta2), g, g, 1 - beta2)
    bias_correction1 = 1 - beta1 ** step_t
    bias_correction2 = 1 - beta2 ** step_t
    step_size_neg = (lr / bias_correction1).neg()
    bias_correction2_sqrt = bias_correction2.sqrt()
    second = exp_avg_sq
    if hp["amsgrad"]:
        second = F.maximum_(state["max_exp_avg_sq"], exp_avg_sq)
    denom = (second.sqrt() / (bias_correction2_sqrt * step_size_neg)).add_(eps / step_size_neg)
    F.addcdiv_(p, exp_avg, denom, 1)


class AdamW(Adam):
    """``torch.optim.AdamW``: Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` each step)."""

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)  # (Adam's: capturable steps moved to the device)
        for group in self.param_groups:  # an AdamW always decays decoupled, whatever the file says
            group["decoupled_weight_decay"] = True


numpy_kernels.ADAM.update = Adam.update


__all__ = ["Adam", "AdamW"]
