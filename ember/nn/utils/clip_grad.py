"""Gradient clipping: ``clip_grad_norm_`` and ``clip_grad_value_`` (in place on ``.grad``).

Example:
    >>> import ember
    >>> w = ember.nn.Parameter(ember.ones(4)); (w * 3).sum().backward()
    >>> float(ember.nn.utils.clip_grad_norm_([w], max_norm=1.0))
    6.0
    >>> round(float(w.grad.norm()), 4)
    1.0
"""
from __future__ import annotations

import math

import numpy as np
from typing import Any, Iterable

from ember.autograd import grad_mode
from ember.tensor import Tensor
from ember import creation
from ember.ops.views import stack


def _with_grads(parameters: Any) -> list:
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def _set_grad(param: Tensor, value: Tensor) -> None:
    # Write in place when the gradient owns a writable buffer (references to p.grad stay valid);
    # gradients can be read-only broadcast views, which get replaced instead.
    grad = param.grad
    owns_buffer = getattr(grad._data, "base", None) is None and grad._device.backend.is_writeable(grad._data)
    if owns_buffer and grad.dtype == value.dtype:
        grad._data[...] = value._data
        grad._bump()
    else:
        param.grad = value.detach()


def _vector_norm(t: Tensor, norm_type: float) -> Tensor:
    """``linalg.vector_norm(t, norm_type)`` over all elements: inf the largest magnitude, -inf the smallest."""
    if math.isinf(norm_type):
        return t.abs().max() if norm_type > 0 else t.abs().min()
    return t.norm(norm_type)


def clip_grad_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: Any = None) -> Tensor:
    """Scale all gradients together so their joint ``norm_type``-norm is at most ``max_norm``.

    Returns the total norm before clipping (a 0-d tensor), as PyTorch does.
    """

    params = _with_grads(parameters)
    grads = [p.grad for p in params]
    norm_type = float(norm_type)
    if not grads:
        return creation.tensor(0.0)
    with grad_mode.no_grad():
        # torch's _get_total_norm: vector_norm of each gradient, then of the stacked norms (-inf: the minimum)
        norms = [_vector_norm(g.detach(), norm_type).to(grads[0].dtype) for g in grads]
        total = norms[0] if len(norms) == 1 and math.isinf(norm_type) else _vector_norm(stack(norms), norm_type)
        if error_if_nonfinite and not bool(total.isfinite().all()):
            raise RuntimeError(
                f"The total norm of order {norm_type} for gradients from `parameters` is "
                "non-finite, so it cannot be clipped. To disable this error and scale the gradients by the "
                "non-finite norm anyway, set `error_if_nonfinite=False`")
        # torch's coefficient, in the norm's dtype and always applied (1.0 when under max_norm; NaN spreads)
        _scale_grads(params, max_norm, total)
    return total


def clip_grad_value_(parameters: Iterable[Tensor] | Tensor, clip_value: float, foreach: Any = None) -> None:
    """Clamp every gradient element into [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with grad_mode.no_grad():
        for p in _with_grads(parameters):
            _set_grad(p, p.grad.detach().clamp(-clip_value, clip_value))


def get_total_norm(tensors: Iterable[Tensor] | Tensor, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: Any = None) -> Tensor:
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    with grad_mode.no_grad():
        return _vector_norm(stack([_vector_norm(t.detach(), norm_type) for t in tensors]), norm_type)


def clip_grads_with_norm_(parameters: Iterable[Tensor] | Tensor, max_norm: float, total_norm: Tensor,
                          foreach: Any = None) -> None:
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` (the second half of clip_grad_norm_).

    Example:
        >>> w = ember.ones(2, requires_grad=True); w.grad = ember.tensor([3.0, 4.0])
        >>> clip_grads_with_norm_([w], 1.0, get_total_norm([w.grad])); [round(v, 3) for v in w.grad.tolist()]
        [0.6, 0.8]
    """
    params = _with_grads(parameters)
    if not params:
        return
    with grad_mode.no_grad():
        _scale_grads(params, max_norm, total_norm)


def _scale_grads(params: list, max_norm: float, total: Any) -> None:
    """``grad *= min(max_norm / (total + 1e-6), 1)`` computed as torch's 0-d tensor ops, in the norm's dtype (so the
    product rounds as torch's; NaN spreads); a coefficient of exactly 1 changes no bit, so that pass is skipped."""
    t = np.asarray(total.detach().cpu().numpy() if isinstance(total, Tensor) else np.float32(total))
    one = t.dtype.type
    scale = float(np.minimum(one(max_norm) / (t + one(1e-6)), one(1.0)))
    if scale == 1.0:
        return
    for p in params:
        _set_grad(p, p.grad.detach() * scale)
