"""``torch.utils.checkpoint``: activation checkpointing, accepted for compatibility.

Decision: ember keeps the activations (no recomputation in backward). Results and gradients are the same
as PyTorch's; only the memory saving is absent. Random ops inside run once, so no RNG-state replay is needed.

Example:
    >>> import ember
    >>> from ember.utils.checkpoint import checkpoint
    >>> x = ember.ones(2, requires_grad=True)
    >>> checkpoint(lambda t: (t * 3).sum(), x, use_reentrant=False).backward(); x.grad.tolist()
    [3.0, 3.0]
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["checkpoint", "checkpoint_sequential", "set_checkpoint_debug_enabled"]


def checkpoint(function: Callable, *args: Any, use_reentrant: bool | None = None, context_fn: Any = None,
               determinism_check: str = "default", debug: bool = False, preserve_rng_state: bool = True,
               **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def checkpoint_sequential(functions: Any, segments: int, input: Any, use_reentrant: bool | None = None,
                          **kwargs: Any) -> Any:
    modules: Sequence = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for module in modules:
        input = module(input)
    return input


class set_checkpoint_debug_enabled:
    def __init__(self, enabled: bool | None) -> None:
        self.enabled = enabled

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None
