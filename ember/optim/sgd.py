"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.

Example:
    >>> opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    >>> loss.backward(); opt.step(); opt.zero_grad()
"""
from __future__ import annotations

from typing import Any, Callable

from ember.autograd import grad_mode
from ember.optim.optimizer import (
    Optimizer, prepared_grad, prepared_grad_array, run_kernel, to_scalar, unsupported, use_fast_path,
)
from ember.tensor import Tensor


class SGD(Optimizer):
    """``torch.optim.SGD``: ``buf = momentum*buf + (1-dampening)*g``; ``p -= lr * (g + momentum*buf | buf)``.

    The momentum buffer starts as a copy of the first gradient, as in PyTorch.
    """

    def __init__(self, params: Any, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        lr = to_scalar(lr)
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        unsupported("SGD", differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused)
        super().__init__(params, defaults)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        fast = use_fast_path()
        with grad_mode.no_grad():
            for group in self.param_groups:
                options = (to_scalar(group["lr"]), group["momentum"], group["dampening"], group["weight_decay"],
                           group["nesterov"], group["maximize"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p] if options[1] != 0 else None
                    if fast:
                        self._update_arrays(p, state, *options)
                    else:
                        _update_tensors(p, state, *options)
        return loss

    def _update_arrays(self, p: Tensor, state: dict | None, lr: float, momentum: float, dampening: float,
                       weight_decay: float, nesterov: bool, maximize: bool) -> None:
        """Eager fast path: the same math as :func:`_update_tensors` with in-place ufuncs on arrays."""
        bufs = self._scratch_for(p, 2 if (weight_decay or maximize) else 1)
        momentum_buffer, first = None, False
        if state is not None:
            if "momentum_buffer" not in state or state["momentum_buffer"] is None:
                state["momentum_buffer"] = Tensor._make(p._device.xp.empty_like(p._data), p._device, False)
                first = True
            momentum_buffer = state["momentum_buffer"]._data
        run_kernel(p._device.type == "cpu", p._device.xp, _kernel,
                   (p._data, p.grad._data, momentum_buffer, bufs[0] if len(bufs) > 1 else None, bufs[-1]),
                   lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov,
                   maximize=maximize, first=first)
        p._bump()


def _kernel(xp: Any, param: Any, grad: Any, buf: Any, grad_buf: Any, tmp: Any, *, lr: float, momentum: float,
            dampening: float, weight_decay: float, nesterov: bool, maximize: bool, first: bool) -> None:
    """In-place array update (elementwise, so :func:`run_kernel` may run it on chunks)."""
    g = prepared_grad_array(xp, grad, param, weight_decay, maximize, grad_buf)
    if buf is not None:
        if first:  # torch starts the buffer as a copy of the first gradient
            xp.copyto(buf, g)
        else:
            buf *= momentum
            if dampening == 0:
                buf += g
            else:
                xp.multiply(g, 1 - dampening, out=tmp)
                buf += tmp
        if nesterov:
            xp.multiply(buf, momentum, out=tmp)
            g = xp.add(g, tmp, out=tmp)
        else:
            g = buf
    xp.multiply(g, -lr, out=tmp)
    param += tmp


def _update_tensors(p: Tensor, state: dict | None, lr: float, momentum: float, dampening: float,
                    weight_decay: float, nesterov: bool, maximize: bool) -> None:
    """Reference update in ember ops (what a graph tracer records)."""
    g = prepared_grad(p.grad, p, weight_decay, maximize)
    if state is not None:
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = g.detach().clone()
            state["momentum_buffer"] = buf
        else:
            buf.mul_(momentum).add_(g, alpha=1 - dampening)
        g = g + buf * momentum if nesterov else buf
    p.add_(g, alpha=-lr)
