"""What an optimizer's ``update`` reads (:class:`Hyper`) and the loop that runs it (:func:`apply_updates`).

Both the op-by-op path and the compiled update (:mod:`ember.optim.compiled_update`) go through
:func:`apply_updates`, so the two cannot differ in anything but how the ops run.

Example:
    >>> hp = Hyper({"lr": 0.1, "maximize": False})
    >>> hp["lr"]
    0.1
"""
from __future__ import annotations

from typing import Any, Callable

from ember.tensor import Tensor


def to_scalar(value: Any) -> Any:
    """A 1-element tensor option (``lr=ember.tensor(0.1)``) as a Python number; numbers pass through."""
    return value.item() if isinstance(value, Tensor) else value


def apply_updates(update: Callable, params: list, grads: list, states: list, hp: "Hyper") -> None:
    """Run ``update`` on each parameter (``maximize`` negates the gradient first, as torch does).

    The one loop both paths share: op by op here, and traced once into the compiled update."""
    maximize = hp.get("maximize", False)
    for p, grad, state in zip(params, grads, states):
        update(p, -grad if maximize else grad, state, hp)


class Hyper:
    """A parameter group's options as ``update`` reads them.

    ``hp["lr"]`` is a value to compute with: a Python number when the update runs op by op, a 0-d
    float64 tensor inside the compiled update (so a scheduler's new ``lr`` runs the same compiled
    graph instead of recompiling). Decisions that change which ops run read the number itself:
    ``hp.nonzero("weight_decay")``; boolean and ``None`` options (``amsgrad``, ``maximize``) are plain.
    The compiled update is keyed on these decisions.

    Example:
        >>> hp = Hyper({"lr": 0.1, "weight_decay": 0.0, "amsgrad": False})
        >>> hp["lr"], hp.nonzero("weight_decay"), hp["amsgrad"]
        (0.1, False, False)
    """

    __slots__ = ("group", "values", "step")

    def __init__(self, group: dict[str, Any], values: dict[str, Any] | None = None, step: Any = None) -> None:
        self.group = group
        self.values = values
        self.step = step

    def __getitem__(self, key: str) -> Any:
        if self.values is not None and key in self.values:
            return self.values[key]
        value = self.group[key]
        if isinstance(value, (tuple, list)):
            return tuple(to_scalar(v) for v in value)
        return to_scalar(value)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self.group else default

    def next_step(self, state: dict[str, Any]) -> Tensor:
        """Count a step: ``state['step'] += 1``; returns the new count (a 0-d tensor).

        In the compiled update of a group whose parameters all count the same step, the new count is one
        graph input and the host writes it into each ``state['step']`` (one bias correction per group)."""
        if self.step is not None:
            return self.step
        step = state["step"]
        step.add_(1)
        return step

    def nonzero(self, key: str) -> bool:
        """Whether option ``key`` is nonzero (a decision: read from the number, never traced)."""
        return to_scalar(self.group.get(key, 0)) != 0


