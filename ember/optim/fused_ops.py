"""The in-place ops torch's single-tensor optimizers call, rounded as torch's CPU kernels round them.

An optimizer option reaches an ``update`` as a Python number (op by op) or as a 0-d float64 tensor (inside
the compiled update, :mod:`ember.optim.compiled_update`). Torch converts a number argument to the tensor's
dtype before its kernel runs (``add_(g, alpha=-lr)`` multiplies by ``float(-lr)`` for a float32 ``g``), so
a tensor option is cast to the parameter's dtype here first, and the fused multiply-adds of
``add(alpha=)``/``addcmul``/``lerp`` are computed with one rounding (:mod:`ember.ops.fma`). With both forms
the same numbers come out, and they are torch's: SGD, Adam, AdamW, RMSprop and Adagrad trajectories equal
torch's bit for bit (tests/optim/test_optimizer_trajectories_bitwise.py).

Example:
    >>> import ember
    >>> p = ember.ones(2)
    >>> add_scaled_(p, ember.full((2,), 3.0), -0.1).tolist()   # 1 + (-0.1) * 3, rounded once
    [0.699999988079071, 0.699999988079071]
"""
from __future__ import annotations

from typing import Any

from ember import dtypes
from ember.ops import elementwise as ew
from ember.ops.fma import fma
from ember.tensor import Tensor


def like(value: Any, t: Tensor) -> Any:
    """A number as it is; a 0-d tensor option cast to ``t``'s dtype, what torch does to a number argument
    (float32 for float16/bfloat16 tensors: torch's kernels take the number in their float32 math)."""
    if isinstance(value, Tensor):
        target = dtypes.float32 if t.dtype in (dtypes.float16, dtypes.bfloat16) else t.dtype
        return value if value.dtype is target else value.to(target)
    return value


def add_scaled(t: Tensor, other: Tensor, alpha: Any) -> Tensor:
    """``t.add(other, alpha=alpha)``: ``fma(alpha, other, t)``."""
    if not isinstance(alpha, Tensor):
        return t.add(other, alpha=alpha)
    return fma(like(alpha, t), other, t)


def add_scaled_(t: Tensor, other: Tensor, alpha: Any) -> Tensor:
    """``t.add_(other, alpha=alpha)``."""
    if not isinstance(alpha, Tensor):
        return t.add_(other, alpha=alpha)
    return t.copy_(fma(like(alpha, t), other, t))


def lerp_(t: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``t.lerp_(end, weight)`` (a tensor weight selects the branch elementwise: no value is read)."""
    return t.lerp_(end, like(weight, t))


def addcmul_(t: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    """``t.addcmul_(t1, t2, value=value)``: ``fma(value * t1, t2, t)``."""
    if not isinstance(value, Tensor):
        return t.addcmul_(t1, t2, value=value)
    return t.copy_(fma(t1 * like(value, t), t2, t))


def addcmul(t: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    """``t.addcmul(t1, t2, value=value)`` (out of place)."""
    if not isinstance(value, Tensor):
        return t.addcmul(t1, t2, value=value)
    return fma(t1 * like(value, t), t2, t)


def addcdiv_(t: Tensor, t1: Tensor, t2: Tensor, value: Any) -> Tensor:
    """``t.addcdiv_(t1, t2, value=value)``: ``t + (value * t1) / t2`` (no fused step in torch's kernel)."""
    if not isinstance(value, Tensor):
        return t.addcdiv_(t1, t2, value=value)
    return t.copy_(t + (t1 * like(value, t)) / t2)


def mul_(t: Tensor, factor: Any) -> Tensor:
    """``t.mul_(factor)`` with the factor in ``t``'s dtype."""
    return t.mul_(like(factor, t))


def div(t: Tensor, divisor: Any) -> Tensor:
    """``t / divisor`` with the divisor in ``t``'s dtype."""
    return t / like(divisor, t)


def maximum_(t: Tensor, other: Tensor) -> Tensor:
    return t.copy_(ew.maximum(t, other))
