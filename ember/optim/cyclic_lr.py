"""``CyclicLR``: PyTorch's cyclical learning-rate policy (Smith, 2017), step for step.

The lr climbs linearly from ``base_lr`` to ``max_lr`` over ``step_size_up`` steps, falls back over
``step_size_down``, and repeats; the amplitude is scaled per cycle (``triangular2``: halved each
cycle) or per iteration (``exp_range``: ``gamma ** iteration``). With ``cycle_momentum`` the
momentum (SGD) or beta1 (Adam) moves the opposite way. Step it once per batch.

Example:
    >>> import ember
    >>> w = ember.zeros(3, requires_grad=True)
    >>> opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> sched = ember.optim.lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4)
    >>> [round(g["lr"], 4) for g in opt.param_groups]
    [0.01]
"""
from __future__ import annotations

import math
import types
from functools import partial
from typing import Any, Callable

from ember.optim.scheduler_base import (
    LRScheduler, _check_optimizer, _per_group, _set_group_value, _start_cycled_momentum,
)
from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

__all__ = ["CyclicLR"]


def _copies(values: list) -> list:
    return [v.clone() if isinstance(v, Tensor) else v for v in values]


class CyclicLR(LRScheduler):
    """Cycle each group's lr between ``base_lr`` and ``max_lr`` (torch.optim.lr_scheduler.CyclicLR)."""

    def __init__(self, optimizer: Optimizer, base_lr: float | list[float], max_lr: float | list[float],
                 step_size_up: int = 2000, step_size_down: int | None = None, mode: str = "triangular",
                 gamma: float = 1.0, scale_fn: Callable[[float], float] | None = None, scale_mode: str = "cycle",
                 cycle_momentum: bool = True, base_momentum: float | list[float] = 0.8,
                 max_momentum: float | list[float] = 0.9, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        base_lrs = _copies(_per_group("base_lr", optimizer, base_lr))
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _copies(_per_group("max_lr", optimizer, max_lr))
        if step_size_up <= 0 or (step_size_down is not None and step_size_down <= 0):
            raise ValueError(f"CyclicLR: step_size_up and step_size_down must be positive, got {step_size_up} and "
                             f"{step_size_down}")
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None; use 'triangular', "
                             "'triangular2', 'exp_range' or pass scale_fn")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, bases, tops = _start_cycled_momentum(optimizer, base_momentum, max_momentum, last_epoch)
            self.base_momentums, self.max_momentums = _copies(bases), _copies(tops)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self) -> None:
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        else:
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x: float) -> float:
        """The amplitude scale at cycle (or iteration) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x: float) -> float:
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x: float) -> float:
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma: float, x: float) -> float:
        return gamma ** x

    def get_lr(self) -> list[Any]:
        self._warn_get_lr()
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        where = cycle if self.scale_mode == "cycle" else self.last_epoch
        # Same operation order as PyTorch (height first, then the scale) so floats agree bit for bit.
        lrs = [base + ((top - base) * scale_factor) * self.scale_fn(where)
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, bottom, top in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                momentum = top - ((top - bottom) * scale_factor) * self.scale_fn(where)
                if self.use_beta1:
                    group["betas"] = (momentum, *group["betas"][1:])
                else:
                    group["momentum"] = momentum
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer; a custom scale_fn is kept only if it is a callable object."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        super().load_state_dict(state_dict)
        if fn is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()
