"""The small ``torch.jit`` decorators library code applies at import time: ``script_if_tracing``,
``_overload``, ``_overload_method``, ``_unwrap_optional``, ``Error``.

torchvision decorates its box helpers with ``torch.jit._script_if_tracing`` and declares TorchScript
overloads of ``forward`` with ``torch.jit._overload_method``; both run whenever the library is imported.
As in PyTorch, an overload declaration does nothing in eager Python (the method defined last is the one
that runs), and a function marked "script if tracing" runs as written unless a ``torch.jit.trace`` is
recording, where it is scripted (ember's ``script``: compiled, or eager with a warning).

Example:
    >>> import ember
    >>> @ember.jit.script_if_tracing
    ... def double(x):
    ...     return x * 2
    >>> double(ember.tensor([1.0])).tolist()
    [2.0]
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from ember.jit.api import is_tracing, script

__all__ = ["Error", "script_if_tracing", "_script_if_tracing", "_overload", "_overload_method",
           "_unwrap_optional"]


class Error(Exception):
    """``torch.jit.Error``: what a failing TorchScript ``raise`` turns into (caught by library code)."""


def _script_if_tracing(fn: Callable) -> Callable:
    """Run ``fn`` as written; while ``torch.jit.trace`` records, script it first (PyTorch's rule)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not is_tracing():
            return fn(*args, **kwargs)
        return script(fn)(*args, **kwargs)

    wrapper.__original_fn = fn
    wrapper.__script_if_tracing_wrapper = True
    return wrapper


script_if_tracing = _script_if_tracing


def _overload(func: Callable) -> Callable:
    """A TorchScript overload declaration of a function: eager Python keeps the later full definition."""
    return func


def _overload_method(func: Callable) -> Callable:
    """A TorchScript overload declaration of a method (as :func:`_overload`)."""
    return func


def _unwrap_optional(x: Any) -> Any:
    """``x`` unless it is None (PyTorch's AssertionError text)."""
    if x is None:
        raise AssertionError("Unwrapping null optional")
    return x
