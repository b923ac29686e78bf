"""Training-step closures the compile tests share (importable as ``train_steps``: tests/ is on sys.path)."""
from __future__ import annotations

from typing import Any, Callable

import ember


def classification_step(model: Any, opt: Any) -> Callable[[Any, Any], Any]:
    """``step(x, t)``: cross entropy of ``model(x)`` against ``t``, ``zero_grad``, ``backward``, ``opt.step()``;
    returns the loss.

    Example: fn = ember.compile(classification_step(model, opt)); loss = fn(x, t)
    """

    def step(x: Any, t: Any) -> Any:
        loss = ember.nn.functional.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step
