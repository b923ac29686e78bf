"""``torch.optim.Muon`` (PyTorch 2.13): SGD momentum (Nesterov by default) whose 2-D update is replaced by
its orthogonalization through five quintic Newton-Schulz steps in bfloat16, with decoupled weight decay
and an optional shape-based learning-rate adjustment. Its state initialization plus one update in ember ops,
in torch's single-tensor order; eagerly the update runs compiled like the other optimizers'.

Example:
    >>> import ember
    >>> w = ember.randn(4, 3, requires_grad=True)
    >>> opt = ember.optim.Muon([w], lr=1e-3)
    >>> (w * w).sum().backward(); opt.step()
"""
from __future__ import annotations

import math
from typing import Any

from ember import dtypes
from ember.creation import zeros_like
from ember.optim.optimizer import Hyper, Optimizer, to_scalar
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


def _lr_ratio(adjust_lr_fn: str | None, shape: tuple) -> float:
    """How much the learning rate is scaled for a parameter of this shape (torch's ``_adjust_lr``)."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, rows / cols))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(rows, cols))
    else:
        ratio = 1.0
    return ratio


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

    static_options = ("ns_steps",)  # a loop count: baked into the compiled update (and its key)

    @staticmethod
    def init_state(p: Tensor, group: dict) -> dict:
        if p.dtype.is_complex:
            raise RuntimeError("Muon does not support complex parameters")
        return {"momentum_buffer": zeros_like(p)}

    @staticmethod
    def update(p: Tensor, grad: Tensor, state: dict, hp: Hyper) -> None:
        """Torch's single-tensor Muon: momentum (``lerp``), Nesterov, orthogonalize, decay, step."""
        if grad.ndim != 2:
            raise ValueError("Param gradient must be a 2D matrix")
        lr, momentum = hp["lr"], hp["momentum"]
        buf = state["momentum_buffer"]
        buf.lerp_(grad, 1 - momentum)
        direction = grad.lerp(buf, momentum) if hp["nesterov"] else buf
        direction = zeropower_via_newtonschulz(direction, hp["ns_coefficients"], hp["ns_steps"], hp["eps"])
        p.mul_(1 - lr * hp["weight_decay"])
        p.add_(direction.to(p.dtype) * (-lr * _lr_ratio(hp["adjust_lr_fn"], tuple(p.shape))))
