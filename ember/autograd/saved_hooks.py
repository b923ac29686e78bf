"""The state behind ``torch.autograd.graph.saved_tensors_hooks``: a per-thread stack of (pack, unpack)
pairs and the message that refuses new pairs (``disable_saved_tensors_hooks``).

Only the innermost pair is used when an op saves a tensor (PyTorch's rule). ``ACTIVE`` counts the pairs
pushed on all threads, so saving a tensor costs one list read when no thread uses hooks.

Example:
    >>> from ember.autograd import saved_hooks
    >>> saved_hooks.push(lambda t: t, lambda t: t)
    >>> saved_hooks.current() is not None
    True
    >>> saved_hooks.pop()
"""
from __future__ import annotations

import threading
from typing import Any, Callable

ACTIVE = [0]  # pairs pushed on any thread; SavedTensor looks at the thread's stack only when nonzero
# ``allow_mutation_on_saved_tensors``: called with a tensor right before an in-place op writes into it (at most one,
# process-wide as in PyTorch); every in-place op checks this list first (ember.ops.inplace.check_inplace).
BEFORE_INPLACE: list = []
_LOCAL = threading.local()


def _stack() -> list:
    stack = getattr(_LOCAL, "stack", None)
    if stack is None:
        stack = _LOCAL.stack = []
    return stack


def current() -> tuple[Callable, Callable] | None:
    """The innermost (pack, unpack) pair of this thread, or None."""
    stack = getattr(_LOCAL, "stack", None)
    return stack[-1] if stack else None


def push(pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]) -> None:
    message = getattr(_LOCAL, "disabled", None)
    if message is not None:
        raise RuntimeError(message)
    _stack().append((pack_hook, unpack_hook))
    ACTIVE[0] += 1


def pop() -> None:
    stack = _stack()
    if not stack:
        raise RuntimeError("saved_tensors_hooks: no pair of hooks to pop (enter and exit the context manager in pairs)")
    stack.pop()
    ACTIVE[0] -= 1


def disabled_message() -> str | None:
    return getattr(_LOCAL, "disabled", None)


def disable(message: str) -> None:
    """Refuse new pairs with ``message``; refused at once when a pair is active (as PyTorch does)."""
    if current() is not None:
        raise RuntimeError(message)
    _LOCAL.disabled = message




def restore(message: str | None) -> None:
    """Put back the message a ``disable_saved_tensors_hooks`` block found on entry."""
    _LOCAL.disabled = message
