"""``torch.utils._python_dispatch``: ``TorchDispatchMode`` and the mode-stack helpers.

A mode's ``__torch_dispatch__(func, types, args, kwargs)`` sees every op run inside its ``with`` block, backward
ops included, as ATen overloads (``func is torch.ops.aten.mm.default``), below autograd: ``func(*args, **kwargs)``
computes (with this mode popped, so the next mode or ember itself runs it) and gradients are recorded above it, as
in PyTorch. How ember's op records map to ATen calls: :mod:`ember._aten_present` and docs/pytorch-compat.md.

Example:
    >>> import ember
    >>> from ember.utils._python_dispatch import TorchDispatchMode
    >>> class Log(TorchDispatchMode):
    ...     def __init__(self):
    ...         super().__init__(); self.names = []
    ...     def __torch_dispatch__(self, func, types, args=(), kwargs=None):
    ...         self.names.append(func.overloadpacket.__name__)
    ...         return func(*args, **(kwargs or {}))
    >>> x = ember.ones(3, requires_grad=True)
    >>> with Log() as log:
    ...     (x * 2).sum().backward()
    >>> log.names
    ['mul', 'sum', 'expand', 'mul']
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator

from ember import _dispatch_levels as levels


class TorchDispatchMode:
    """Subclass and define ``__torch_dispatch__``; enter with ``with``. Modes nest: the innermost sees an op first,
    and ``func(...)`` inside it goes on to the next."""

    def __init__(self, _dispatch_key: Any = None) -> None:
        self._dispatch_key = _dispatch_key
        self.old_dispatch_mode_flags: list = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define __torch_dispatch__")

    def __enter__(self) -> "TorchDispatchMode":
        levels.push_mode(self)
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        levels.pop_mode(self)

    @classmethod
    def push(cls, *args: Any, **kwargs: Any) -> "TorchDispatchMode":
        warnings.warn("`Mode.push()` is no longer necessary and can be replaced with just `with Mode()`",
                      stacklevel=2)
        return cls(*args, **kwargs)

    @classmethod
    def is_infra_mode(cls) -> bool:
        return False


def _get_current_dispatch_mode() -> Any:
    """The innermost active mode of this thread (``None`` inside the only mode's own handler, as in torch)."""
    stack = levels.modes()
    return stack[-1] if stack else None


def _get_current_dispatch_mode_stack() -> list:
    return levels.modes()


def _len_torch_dispatch_stack() -> int:
    return len(levels.modes())


def _push_mode(mode: TorchDispatchMode) -> None:
    levels.push_mode(mode)


def _pop_mode(k: Any = None) -> TorchDispatchMode:
    if k is not None and not isinstance(k, TorchDispatchMode):
        raise NotImplementedError("ember keeps no infra-mode keys; pop a mode with _pop_mode()")
    return levels.pop_mode(k)


@contextlib.contextmanager
def _pop_mode_temporarily(k: Any = None) -> Iterator[TorchDispatchMode]:
    """Pop the innermost mode for the ``with`` block (it is pushed back afterwards)."""
    mode = _pop_mode(k)
    try:
        yield mode
    finally:
        _push_mode(mode)


@contextlib.contextmanager
def _disable_current_modes() -> Iterator[list]:
    """Pop every active mode for the ``with`` block; yields them, outermost first."""
    popped = []
    while levels.modes():
        popped.append(levels.pop_mode())
    popped.reverse()
    try:
        yield popped
    finally:
        for mode in popped:
            levels.push_mode(mode)


def is_in_torch_dispatch_mode(include_infra_modes: bool = True) -> bool:
    return bool(levels.modes())


def is_traceable_wrapper_subclass(t: Any) -> bool:
    """torch's test for a subclass that ``__tensor_flatten__``/``__tensor_unflatten__`` describe."""
    kind = t if isinstance(t, type) else type(t)
    return levels.is_dispatch_type(kind) and hasattr(kind, "__tensor_flatten__") and \
        hasattr(kind, "__tensor_unflatten__")


def is_traceable_wrapper_subclass_type(t: type) -> bool:
    return is_traceable_wrapper_subclass(t)


def return_and_correct_aliasing(func: Any, args: Any, kwargs: Any, out: Any) -> Any:
    """torch fixes up the aliasing metadata of a wrapper's outputs here; ember's wrappers carry none: ``out``."""
    return out


def transform_subclass(t: Any, callback: Any, outer_size: Any = None, outer_stride: Any = None) -> Any:
    """Rebuild wrapper ``t`` with ``callback(attr_name, inner)`` applied to each inner tensor."""
    attrs, ctx = t.__tensor_flatten__()
    inner = {name: callback(name, getattr(t, name)) for name in attrs}
    return type(t).__tensor_unflatten__(inner, ctx, outer_size or t.size(), outer_stride or t.stride())
