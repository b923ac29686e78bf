"""``torch.optim.swa_utils``: stochastic weight averaging and EMA of a model, the SWA learning-rate
schedule and the BatchNorm statistics refresh.

Example:
    >>> import ember
    >>> model = ember.nn.Linear(2, 1)
    >>> swa = ember.optim.swa_utils.AveragedModel(model)
    >>> swa.update_parameters(model); int(swa.n_averaged)
    1
"""
from __future__ import annotations

import copy
import math
from typing import Any, Callable, Iterable

from ember.autograd.grad_mode import no_grad
from ember.creation import tensor
from ember.dtypes import int64
from ember.nn.modules.normalization import _BatchNorm
from ember.nn.modules.module import Module
from ember.optim.lr_scheduler import LRScheduler
from ember.optim.scheduler_base import _per_group
from ember.tensor import Tensor

__all__ = ["AveragedModel", "SWALR", "update_bn", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn() -> Callable:
    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged: Any) -> Tensor:
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    def ema_update(ema_params: list, current_params: list, num_averaged: Any) -> None:
        for e, c in zip(ema_params, current_params):
            e.lerp_(c, 1 - decay) if hasattr(e, "lerp_") else e.copy_(decay * e + (1 - decay) * c)
    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    def swa_update(averaged_params: list, current_params: list, num_averaged: Any) -> None:
        # As torch: the weight 1 / (n + 1) is computed from the integer counter in the default dtype.
        weight = 1 / (num_averaged + 1) if isinstance(num_averaged, Tensor) else 1.0 / (num_averaged + 1)
        for a, c in zip(averaged_params, current_params):
            if a.is_floating_point():
                a.lerp_(c, weight.to(a.dtype) if isinstance(weight, Tensor) else weight)
            else:
                a.copy_(a + (c - a) / (num_averaged + 1))
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` whose parameters are the running (SWA) or exponential (EMA) average."""

    def __init__(self, model: Module, device: Any = None, avg_fn: Callable | None = None,
                 multi_avg_fn: Callable | None = None, use_buffers: bool = False) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=int64, device=device))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        ours = list(self.module.parameters()) + (list(self.module.buffers()) if self.use_buffers else [])
        theirs = list(model.parameters()) + (list(model.buffers()) if self.use_buffers else [])
        n = int(self.n_averaged)
        with no_grad():
            pairs = [(a, m.detach().to(a.device)) for a, m in zip(ours, theirs)]
            if n == 0:
                for a, m in pairs:
                    a.copy_(m)
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn([a for a, _ in pairs], [m for _, m in pairs], self.n_averaged)
            else:  # torch's CPU path: avg_fn per tensor, copied back (integer buffers truncate, as in torch)
                fn = self.avg_fn or get_swa_avg_fn()
                for a, m in pairs:
                    a.copy_(fn(a.detach(), m, self.n_averaged))
            if not self.use_buffers:  # buffers follow the model (update_bn recomputes BN statistics)
                for a, m in zip(self.module.buffers(), model.buffers()):
                    a.copy_(m.detach().to(a.device))
            self.n_averaged.add_(1)


def update_bn(loader: Iterable, model: Module, device: Any = None) -> None:
    """Recompute BatchNorm running statistics with one pass over ``loader`` (cumulative averages)."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm) and module.running_mean is not None:
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            if device is not None:
                x = x.to(device)
            model(x)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs`` (cosine or linear), then hold it."""

    def __init__(self, optimizer: Any, swa_lr: Any, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1) -> None:
        for lr, group in zip(_per_group("swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _set_anneal_func(self, anneal_strategy: str) -> None:
        self._anneal_strategy = anneal_strategy  # (what the state dict keeps, as torch: not the function)
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self) -> dict[str, Any]:
        """Every attribute but the optimizer and ``anneal_func`` (``_anneal_strategy`` names it), as torch."""
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._set_anneal_func(self.__dict__.get("_anneal_strategy", "cos"))

    @staticmethod
    def _linear_anneal(t: float) -> float:
        return t

    @staticmethod
    def _cosine_anneal(t: float) -> float:
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(self.optimizer.param_groups, prev_lrs)]
