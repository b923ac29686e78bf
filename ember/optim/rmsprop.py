"""RMSprop: divide the gradient by a running root-mean-square, optionally centered and with momentum.

Example:
    >>> opt = ember.optim.RMSprop(model.parameters(), lr=1e-2, alpha=0.99, momentum=0.9, centered=True)
"""
from __future__ import annotations

from typing import Any, Callable

from ember.autograd import grad_mode
from ember.creation import zeros_like
from ember.optim.optimizer import (
    Optimizer, lerp_array_, new_step_tensor, prepared_grad, prepared_grad_array, run_kernel, to_scalar,
    unsupported, use_fast_path,
)
from ember.tensor import Tensor


class RMSprop(Optimizer):
    """``torch.optim.RMSprop``: ``v = alpha*v + (1-alpha)*g^2``; ``p -= lr * g / (sqrt(v - mean_g^2 | v) + eps)``.

    State per parameter: ``step``, ``square_avg``, ``momentum_buffer`` (if ``momentum > 0``) and
    ``grad_avg`` (if ``centered``).
    """

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        lr = to_scalar(lr)
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

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        fast = use_fast_path()
        with grad_mode.no_grad():
            for group in self.param_groups:
                options = (to_scalar(group["lr"]), group["alpha"], group["eps"], group["weight_decay"],
                           group["momentum"], group["centered"], group["maximize"])
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = new_step_tensor()
                        state["square_avg"] = zeros_like(p)
                        if options[4] > 0:
                            state["momentum_buffer"] = zeros_like(p)
                        if options[5]:
                            state["grad_avg"] = zeros_like(p)
                    if fast:
                        self._update_arrays(p, state, *options)
                    else:
                        _update_tensors(p, state, *options)
        return loss

    def _update_arrays(self, p: Tensor, state: dict, lr: float, alpha: float, eps: float, weight_decay: float,
                       momentum: float, centered: bool, maximize: bool) -> None:
        """Eager fast path: :func:`_update_tensors` as in-place ufuncs on the arrays."""
        bufs = self._scratch_for(p, 2 if (weight_decay or maximize) else 1)
        state["step"]._data += 1
        run_kernel(p._device.type == "cpu", p._device.xp, _kernel,
                   (p._data, p.grad._data, state["square_avg"]._data,
                    state["grad_avg"]._data if centered else None,
                    state["momentum_buffer"]._data if momentum > 0 else None,
                    bufs[0] if len(bufs) > 1 else None, bufs[-1]),
                   lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, maximize=maximize)
        p._bump()


def _kernel(xp: Any, param: Any, grad: Any, square_avg: Any, grad_avg: Any, buf: Any, grad_buf: Any, tmp: Any, *,
            lr: float, alpha: float, eps: float, weight_decay: float, momentum: float, maximize: bool) -> None:
    """In-place array update in torch's operation order (elementwise, so it may run on chunks)."""
    g = prepared_grad_array(xp, grad, param, weight_decay, maximize, grad_buf)
    square_avg *= alpha
    xp.multiply(g, 1 - alpha, out=tmp)
    tmp *= g
    square_avg += tmp
    if grad_avg is not None:  # centered: subtract the squared running mean of the gradient
        lerp_array_(xp, grad_avg, g, 1 - alpha, tmp)
        xp.multiply(grad_avg, grad_avg, out=tmp)
        xp.subtract(square_avg, tmp, out=tmp)
        xp.sqrt(tmp, out=tmp)
    else:
        xp.sqrt(square_avg, out=tmp)
    tmp += eps
    xp.divide(g, tmp, out=tmp)
    if buf is not None:
        buf *= momentum
        buf += tmp
        xp.multiply(buf, -lr, out=tmp)
    else:
        tmp *= -lr
    param += tmp


def _update_tensors(p: Tensor, state: dict, lr: float, alpha: float, eps: float, weight_decay: float,
                    momentum: float, centered: bool, maximize: bool) -> None:
    """Reference update in ember ops (what a graph tracer records)."""
    state["step"].add_(1)
    g = prepared_grad(p.grad, p, weight_decay, maximize)
    square_avg = state["square_avg"]
    square_avg.mul_(alpha).add_(g * (1 - alpha) * g)
    if centered:
        grad_avg = state["grad_avg"]
        grad_avg.add_((g - grad_avg) * (1 - alpha))
        avg = (square_avg - grad_avg * grad_avg).sqrt()
    else:
        avg = square_avg.sqrt()
    avg = avg + eps
    if momentum > 0:
        buf = state["momentum_buffer"]
        buf.mul_(momentum).add_(g / avg)
        p.add_(buf, alpha=-lr)
    else:
        p.add_(g / avg, alpha=-lr)
