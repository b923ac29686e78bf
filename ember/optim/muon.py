"""``torch.optim.Muon`` (PyTorch 2.13): SGD momentum (Nesterov by default) whose 2-D update is replaced by
its orthogonalization through five quintic Newton-Schulz steps in bfloat16, with decoupled weight decay
and an optional shape-based learning-rate adjustment. Follows torch's single-tensor loop.

Example:
    >>> import ember
    >>> w = ember.randn(4, 3, requires_grad=True)
    >>> opt = ember.optim.Muon([w], lr=1e-3)
    >>> (w * w).sum().backward(); opt.step()
"""
from __future__ import annotations

import math
from typing import Any, Callable

from ember import dtypes
from ember.autograd import grad_mode
from ember.creation import zeros_like
from ember.optim.optimizer import Optimizer, to_scalar
from ember.tensor import Tensor

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5


def zeropower_via_newtonschulz(grad: Tensor, ns_coefficients: tuple, ns_steps: int, eps: float) -> Tensor:
    """Approximately U V^T of grad = U S V^T (singular values pushed into ~[0.5, 1.5]), in bfloat16."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    bf16, f32 = dtypes.bfloat16, dtypes.float32
    # bfloat16 values, each result rounded once where torch's CPU kernels round (addmm's beta*C + alpha*A@B is
    # one fused float32 expression), so the iterates match torch's bit for bit in most elements.
    x = grad.to(bf16)
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(ns_steps):
        x32 = x.to(f32)
        gram = (x32 @ x32.T).to(bf16).to(f32)
        gram_update = (b * gram + c * (gram @ gram)).to(bf16).to(f32)
        x = (a * x32 + gram_update @ x32).to(bf16)
    return x.T if tall else x


def _adjust_lr(lr: float, adjust_lr_fn: str | None, shape: tuple) -> float:
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """``Muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True, ns_coefficients=(3.4445,
    -4.7750, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)``: 2-D parameters only."""

    def __init__(self, params: Any, lr: float = 1e-3, weight_decay: float = 0.1, momentum: float = 0.95,
                 nesterov: bool = True, ns_coefficients: tuple = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS, adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= to_scalar(lr):
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                                      ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                                      adjust_lr_fn=adjust_lr_fn))
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError(f"Muon only supports 2D parameters whereas we found a parameter with size: "
                                     f"{p.shape}")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        with grad_mode.no_grad():
            for group in self.param_groups:
                lr, momentum = to_scalar(group["lr"]), group["momentum"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    grad = p.grad
                    if grad.ndim != 2:
                        raise ValueError("Param gradient must be a 2D matrix")
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        state["momentum_buffer"] = zeros_like(grad)
                    buf = state["momentum_buffer"]
                    buf.lerp_(grad, 1 - momentum)
                    update = grad.lerp(buf, momentum) if group["nesterov"] else buf
                    update = zeropower_via_newtonschulz(update, group["ns_coefficients"], group["ns_steps"],
                                                        group["eps"])
                    adjusted = _adjust_lr(lr, group["adjust_lr_fn"], tuple(p.shape))
                    p.mul_(1 - lr * group["weight_decay"])
                    p.add_(update.to(p.dtype), alpha=-adjusted)
        return loss
