"""The base of ember's learning-rate schedulers: :class:`LRScheduler` and the helpers schedulers share.

Its own module so that :mod:`ember.optim.lr_scheduler` (most schedulers) and :mod:`ember.optim.cyclic_lr`
(CyclicLR, re-exported by ``lr_scheduler``) both build on it without importing each other.

Example:
    >>> class Halving(LRScheduler):
    ...     def get_lr(self):
    ...         return [group["lr"] * 0.5 for group in self.optimizer.param_groups]
"""
from __future__ import annotations

import warnings
from typing import Any

from ember.optim.optimizer import Optimizer
from ember.tensor import Tensor

__all__ = ["LRScheduler"]


def _group_values(optimizer: Optimizer, key: str) -> list[Any]:
    """``group[key]`` of every group (tensor values cloned so callers never alias them)."""
    return [g[key].clone() if isinstance(g[key], Tensor) else g[key] for g in optimizer.param_groups]


def _set_group_value(group: dict[str, Any], key: str, value: Any) -> None:
    if isinstance(group[key], Tensor):
        group[key].fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def _per_group(name: str, optimizer: Optimizer, value: Any) -> list[Any]:
    """One value per param group: a list/tuple is checked for length, a scalar repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} "
                             f"values, param_groups has {len(optimizer.param_groups)}.")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _check_optimizer(optimizer: Any) -> None:
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{type(optimizer).__name__} is not an Optimizer; pass an ember.optim optimizer")


class LRScheduler:
    """Base class: keeps ``base_lrs`` and ``last_epoch``; subclasses implement :meth:`get_lr`.

    Building a scheduler performs its first step (``last_epoch`` becomes 0 and the lrs take their
    epoch-0 values). ``state_dict()`` holds every attribute but the optimizer.
    """

    _get_lr_called_within_step: bool = False
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        _check_optimizer(optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                lr = group["lr"]
                group.setdefault("initial_lr", lr.clone() if isinstance(lr, Tensor) else lr)
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when resuming a "
                                   "scheduler with last_epoch >= 0; load the optimizer state first or use "
                                   "last_epoch=-1 for a fresh run")
        self.base_lrs: list[Any] = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        if not optimizer.__dict__.get("_lr_sched_tracked", False):
            # PyTorch counts optimizer steps from the first scheduler's creation on (it patches `step` then), so
            # steps taken before it do not silence the call-order warning.
            optimizer.__dict__["_lr_sched_tracked"] = True
            optimizer._opt_called = False
        self._initial_step()

    def _initial_step(self) -> None:
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def state_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def get_last_lr(self) -> list[Any]:
        """The learning rates set by the latest ``step`` (one per param group)."""
        return self._last_lr

    def get_lr(self) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def _warn_get_lr(self) -> None:
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=3)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to ``epoch``, deprecated in torch too) and set the new lrs."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", False):
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch 1.1.0 and "
                          "later, you should call them in the opposite order: `optimizer.step()` before "
                          "`lr_scheduler.step()`.  Failure to do this will result in PyTorch skipping the first value "
                          "of the learning rate schedule. See more details at "
                          "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                          UserWarning, stacklevel=2)  # PyTorch's words: programs and logs match on them
        self._step_count += 1
        if epoch is not None:
            warnings.warn("The epoch parameter in `scheduler.step()` is deprecated; call `scheduler.step()` "
                          "without it.", UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed = getattr(self, "_get_closed_form_lr", None)
                values = closed() if closed is not None else self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")

    def _current(self) -> list[Any]:
        return _group_values(self.optimizer, "lr")


def _start_cycled_momentum(optimizer: Any, base_momentum: Any, max_momentum: Any,
                           last_epoch: int) -> tuple[bool, list, list]:
    """Shared by OneCycleLR and CyclicLR: check the optimizer has momentum (or Adam's beta1) and, on a
    fresh start, set it to the top of the cycle. Returns (uses beta1, base values, max values)."""
    if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
        raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` option enabled "
                         f"({type(optimizer).__name__} has neither); pass cycle_momentum=False")
    use_beta1 = "betas" in optimizer.defaults
    max_momentums = _per_group("max_momentum", optimizer, max_momentum)
    base_momentums = _per_group("base_momentum", optimizer, base_momentum)
    if last_epoch == -1:
        for top, bottom, group in zip(max_momentums, base_momentums, optimizer.param_groups):
            if use_beta1:
                group["betas"] = (top, *group["betas"][1:])
            else:
                group["momentum"] = top
            group["max_momentum"] = top
            group["base_momentum"] = bottom
    return use_beta1, base_momentums, max_momentums
