"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` (context managers and decorators).

Grad mode is per thread, as in PyTorch, so a DataLoader thread never changes the trainer's mode.

Example:
    >>> import ember
    >>> with ember.no_grad():
    ...     ember.is_grad_enabled()
    False
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable


class _GradState(threading.local):
    enabled: bool = True
    inference: bool = False  # inside inference_mode(True) (is_inference_mode_enabled)


STATE = _GradState()


def is_grad_enabled() -> bool:
    return STATE.enabled


class _GradModeContext:
    """Base for the grad-mode managers: usable as ``with`` and as a decorator."""

    _target: bool = True

    def __init__(self) -> None:
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(STATE.enabled)
        STATE.enabled = self._target

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self._previous.pop()

    def _clone(self) -> "_GradModeContext":
        """A fresh manager of the same mode (one per call of a decorated function: calls may nest or run in threads)."""
        return self.__class__()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._clone():
                return fn(*args, **kwargs)

        return wrapper


class _NoParamDecoratorContext(_GradModeContext):
    """A manager that is also a decorator without parentheses: ``@no_grad`` as well as ``@no_grad()`` (PyTorch's)."""

    def __new__(cls, orig_func: Callable | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamDecoratorContext):
    """Do not record operations for autograd inside this block."""

    _target = False


class enable_grad(_NoParamDecoratorContext):
    """Record operations even inside a ``no_grad`` block."""

    _target = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` acts like ``no_grad``; also works as a plain function call."""

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self._target = bool(mode)
        # Called as a function (not in a with-statement) it switches the mode at once, as PyTorch.
        self._previous.append(STATE.enabled)
        STATE.enabled = self._target

    def __enter__(self) -> None:
        pass  # the switch already happened in __init__

    def __call__(self, fn: Callable) -> Callable:
        # Used as a decorator, the switch made by __init__ must not outlive the decoration.
        STATE.enabled = self._previous.pop()
        return super().__call__(fn)

    def __exit__(self, *exc: Any) -> None:
        STATE.enabled = self._previous.pop()

    def _clone(self) -> "_GradModeContext":
        return set_grad_enabled(self._target)


class inference_mode(no_grad):
    """Alias of ``no_grad`` (ember has no separate inference tensors)."""

    def __new__(cls, mode_or_orig_func: Any = True) -> Any:
        # PyTorch's: ``@inference_mode`` (a function), ``inference_mode()``, ``inference_mode(False)``
        if mode_or_orig_func is None or isinstance(mode_or_orig_func, bool):
            return _GradModeContext.__new__(cls)
        return cls()(mode_or_orig_func)

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self._target = not mode
        self._mode = bool(mode)
        self._previous_inference: list[bool] = []

    def _clone(self) -> "_GradModeContext":
        return inference_mode(self._mode)

    def __enter__(self) -> None:
        super().__enter__()
        self._previous_inference.append(STATE.inference)
        STATE.inference = self._mode

    def __exit__(self, *exc: Any) -> None:
        STATE.inference = self._previous_inference.pop()
        super().__exit__(*exc)


def is_inference_mode_enabled() -> bool:
    """True inside ``inference_mode()`` (ember runs it as ``no_grad``; no separate inference tensors)."""
    return STATE.inference
