"""More of ``torch.optim``: Adadelta, Adamax, NAdam, RAdam, Rprop, ASGD.

Each optimizer is its state initialization plus one update written in ember ops (the design's "two small
functions"), following torch's single-tensor algorithm and operation order, so a step agrees with
``torch.optim`` to rounding. The base class owns parameter groups, the step loop, ``maximize``, closures,
hooks and state dicts. Updates that read values (``.item()`` of the step count, a branch on it) set
``compile_update = False`` and always run op by op.

Example:
    >>> import ember
    >>> w = ember.randn(3, requires_grad=True)
    >>> opt = ember.optim.Adadelta([w], lr=1.0)
    >>> (w * w).sum().backward(); opt.step()
"""
from __future__ import annotations

import math
from typing import Any

from ember import dtypes
from ember.creation import full_like, tensor, zeros_like
from ember.ops.elementwise import maximum, where
from ember.ops.host_pow import host_pow
from ember.optim import fused_ops as F
from ember.optim import numpy_kernels
from ember.optim.optimizer import (
    Hyper, Optimizer, new_step_tensor, scalar_dtype, tensor_option, to_scalar, unsupported, with_weight_decay,
)
from ember.tensor import Tensor

__all__ = ["Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD", "SparseAdam"]


def _check(name: str, ok: bool, what: str, value: Any) -> None:
    if not ok:
        raise ValueError(f"Invalid {what}: {value}")


class _ElementwiseOptimizer(Optimizer):
    """An optimizer that refuses the torch options ember cannot honor (``differentiable=True``)."""

    _unsupported = ("differentiable",)

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        unsupported(type(self).__name__, **{k: defaults.get(k) for k in self._unsupported})
        super().__init__(params, defaults)


class Adadelta(_ElementwiseOptimizer):
    """``torch.optim.Adadelta``: step sizes from running averages of squared gradients and updates."""

    numpy_kernel = numpy_kernels.ADADELTA  # the NumPy-only step (no numba)

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6, weight_decay: float = 0,
                 foreach: bool | None = None, *, capturable: bool = False, maximize: bool = False,
                 differentiable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("Adadelta", 0.0 <= lr, "learning rate", lr)
        _check("Adadelta", 0.0 <= rho <= 1.0, "rho value", rho)
        _check("Adadelta", 0.0 <= eps, "epsilon value", eps)
        _check("Adadelta", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      capturable=capturable, foreach=foreach, differentiable=differentiable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor Adadelta, op for op (each op rounded as torch's CPU kernel)."""
        rho, eps, lr = hp["rho"], hp["eps"], hp["lr"]
        hp.next_step(state)
        grad = with_weight_decay(grad, p, hp)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        F.addcmul_(F.mul_(square_avg, rho), grad, grad, 1 - rho)
        std = (square_avg + F.like(eps, p)).sqrt()
        delta = (acc_delta + F.like(eps, p)).sqrt() / std * grad
        F.addcmul_(F.mul_(acc_delta, rho), delta, delta, 1 - rho)
        F.add_scaled_(p, delta, -lr)


numpy_kernels.ADADELTA.update = Adadelta.update


class Adamax(_ElementwiseOptimizer):
    """``torch.optim.Adamax``: Adam with the infinity norm of past gradients as the denominator."""

    numpy_kernel = numpy_kernels.ADAMAX  # the NumPy-only step (no numba)

    def __init__(self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("Adamax", 0.0 <= lr, "learning rate", lr)
        _check("Adamax", 0.0 <= eps, "epsilon value", eps)
        _check("Adamax", 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check("Adamax", 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check("Adamax", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        # (torch's param_groups key order)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, capturable=capturable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "exp_avg": zeros_like(p), "exp_inf": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor Adamax, op for op; the bias correction in float64 as torch's Python float."""
        (beta1, beta2), eps, lr = hp["betas"], hp["eps"], hp["lr"]
        step = hp.next_step(state).to(dtypes.float64)
        grad = with_weight_decay(grad, p, hp)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        F.lerp_(exp_avg, grad, 1 - beta1)
        exp_inf.copy_(maximum(F.mul_(exp_inf, beta2), grad.abs() + F.like(eps, p)))
        clr = lr / (1 - host_pow(beta1, step))  # a tensor op: traced steps keep counting
        if p.device != step.device:
            clr = clr.to(p.device)
        F.addcdiv_(p, exp_avg, exp_inf, -clr)


numpy_kernels.ADAMAX.update = Adamax.update


def _decay(p: Tensor, grad: Tensor, hp: Hyper) -> Tensor:
    """L2 (added to the gradient) or decoupled (AdamW-style shrink of the parameter) weight decay."""
    if not hp.nonzero("weight_decay"):
        return grad
    wd = hp["weight_decay"]
    if hp.get("decoupled_weight_decay"):
        p.mul_(1 - hp["lr"] * wd)
        return grad
    return grad.add(p, alpha=wd)  # one rounding, as torch's kernel


class NAdam(_ElementwiseOptimizer):
    """``torch.optim.NAdam``: Adam with Nesterov momentum and a momentum-decay schedule."""

    compile_update = False  # reads the step count and mu_product with .item()

    def __init__(self, params: Any, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("NAdam", 0.0 <= lr, "learning rate", lr)
        _check("NAdam", 0.0 <= eps, "epsilon value", eps)
        _check("NAdam", 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check("NAdam", 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check("NAdam", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        _check("NAdam", 0.0 <= momentum_decay, "momentum_decay value", momentum_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "mu_product": tensor(1.0, dtype=scalar_dtype()),
                "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor NAdam, op for op, with its Python-float scalars."""
        (beta1, beta2), eps, lr, psi = hp["betas"], hp["eps"], hp["lr"], hp["momentum_decay"]
        state["step"].add_(1)
        step = state["step"].item()
        bias_correction2 = 1 - host_pow(beta2, step)
        grad = _decay(p, grad, hp)
        mu = beta1 * (1.0 - 0.5 * host_pow(0.96, step * psi))
        mu_next = beta1 * (1.0 - 0.5 * host_pow(0.96, (step + 1) * psi))
        mu_product = state["mu_product"]
        mu_product.mul_(mu)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()
        product = mu_product.item()
        mu_product_next = product * mu_next
        denom.add_(eps)
        p.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - product)))
        p.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))


class RAdam(_ElementwiseOptimizer):
    """``torch.optim.RAdam``: Adam with the variance of the adaptive rate rectified in early steps."""

    compile_update = False  # branches on the step count (rho_t > 5)

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("RAdam", 0.0 <= lr, "learning rate", lr)
        _check("RAdam", 0.0 <= eps, "epsilon value", eps)
        _check("RAdam", 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check("RAdam", 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        _check("RAdam", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay, differentiable=differentiable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor RAdam, op for op, with its Python-float scalars."""
        (beta1, beta2), eps, lr = hp["betas"], hp["eps"], hp["lr"]
        state["step"].add_(1)
        step = state["step"].item()
        grad = _decay(p, grad, hp)
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - host_pow(beta1, step)
        bias_correction2 = 1 - host_pow(beta2, step)
        corrected = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * host_pow(beta2, step) / bias_correction2
        if rho_t > 5.0:
            rect = host_pow((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t), 0.5)
            adaptive = host_pow(bias_correction2, 0.5) / exp_avg_sq.sqrt().add_(eps)
            p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
        else:
            p.add_(corrected * lr, alpha=-1.0)


class Rprop(_ElementwiseOptimizer):
    """``torch.optim.Rprop``: per-element step sizes grown or shrunk by the sign agreement of gradients."""

    compile_update = False  # builds per-step factors with full_like(number)

    def __init__(self, params: Any, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("Rprop", 0.0 <= lr, "learning rate", lr)
        _check("Rprop", 0.0 < etas[0] < 1.0 < etas[1], "eta values", f"{etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        lr = to_scalar(group["lr"])  # (a complex parameter's parts are two reals: both start at lr, as torch)
        return {"step": new_step_tensor(), "prev": zeros_like(p),
                "step_size": full_like(p, complex(lr, lr) if p.dtype.is_complex else lr)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        (etaminus, etaplus), (step_min, step_max) = hp["etas"], hp["step_sizes"]
        state["step"].add_(1)
        agreement = (grad * state["prev"]).sign()
        # full_like keeps the parameter's dtype (Python scalars in where() would be float32)
        factor = where(agreement > 0, full_like(p, etaplus), where(agreement < 0, full_like(p, etaminus),
                                                                    full_like(p, 1.0)))
        step_size = state["step_size"]
        step_size.mul_(factor).clamp_(step_min, step_max)
        grad = where(agreement < 0, zeros_like(grad), grad)  # after a sign change, no step this time
        p.add_(grad.sign() * step_size * -1)
        state["prev"].copy_(grad)


class ASGD(_ElementwiseOptimizer):
    """``torch.optim.ASGD``: SGD with a decaying rate and a running (Polyak) average in ``state['ax']``."""

    compile_update = False  # reads eta/mu with .item() and branches on mu

    def __init__(self, params: Any, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75, t0: float = 1e6,
                 weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("ASGD", 0.0 <= lr, "learning rate", lr)
        _check("ASGD", 0.0 <= weight_decay, "weight_decay value", weight_decay)
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": new_step_tensor(), "eta": tensor(float(to_scalar(group["lr"])), dtype=scalar_dtype()),
                "mu": tensor(1.0, dtype=scalar_dtype()), "ax": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor ASGD, op for op, with its Python-float scalars."""
        lr, lambd, alpha, t0 = hp["lr"], hp["lambd"], hp["alpha"], hp["t0"]
        state["step"].add_(1)
        step = state["step"].item()
        grad = with_weight_decay(grad, p, hp)
        eta = state["eta"].item()
        p.mul_(1 - lambd * eta)
        p.add_(grad, alpha=-eta)
        mu = state["mu"]
        if mu.item() != 1:
            ax = state["ax"]
            ax.add_((p - ax).mul_(mu))
        else:
            state["ax"].copy_(p)
        state["eta"].fill_(lr / host_pow(1 + lambd * lr * step, alpha))
        mu.fill_(1 / max(1, step - t0))


class SparseAdam(_ElementwiseOptimizer):
    """``torch.optim.SparseAdam``: lazy Adam that updates only the entries a (sparse) gradient touches.

    A sparse gradient (``p.grad = g.to_sparse()``, ``ember/sparse/``) touches its stored entries, explicit
    zeros included, as in PyTorch. A dense gradient touches its nonzero entries (an entry whose gradient is
    exactly 0 keeps its moments and value).
    """

    compile_update = False  # keeps its step count as a Python int

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:
        lr = tensor_option(lr, "lr")  # a Tensor lr stays one in param_groups, as torch
        _check("SparseAdam", 0.0 < lr, "learning rate", lr)
        _check("SparseAdam", 0.0 < eps, "epsilon value", eps)
        _check("SparseAdam", 0.0 <= betas[0] < 1.0, "beta parameter at index 0", betas[0])
        _check("SparseAdam", 0.0 <= betas[1] < 1.0, "beta parameter at index 1", betas[1])
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))  # (torch's keys)

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        return {"step": 0, "exp_avg": zeros_like(p), "exp_avg_sq": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        (beta1, beta2), eps, lr = hp["betas"], hp["eps"], hp["lr"]
        state["step"] += 1
        if grad.is_sparse:
            grad = grad.coalesce()
            touched = grad._with_values(full_like(grad._values(), 1.0)).to_dense() != 0
            grad = grad.to_dense()
        else:
            touched = grad != 0
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.copy_(where(touched, exp_avg + (grad - exp_avg) * (1 - beta1), exp_avg))
        exp_avg_sq.copy_(where(touched, exp_avg_sq + (grad * grad - exp_avg_sq) * (1 - beta2), exp_avg_sq))
        step = state["step"]
        step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
        update = exp_avg / (exp_avg_sq.sqrt() + eps) * -step_size
        p.add_(where(touched, update, zeros_like(update)))
