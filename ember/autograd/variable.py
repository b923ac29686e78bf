"""``torch.autograd.Variable``: since PyTorch 0.4 a Variable is a Tensor; the constructor returns one.

Example:
    >>> import ember
    >>> v = ember.autograd.Variable(ember.ones(2), requires_grad=True)
    >>> isinstance(v, ember.Tensor), v.requires_grad
    (True, True)
"""
from __future__ import annotations

from typing import Any


class _VariableMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        from ember.tensor import Tensor

        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)`` -> the tensor (detached alias when requires_grad changes)."""

    def __new__(cls, data: Any = None, requires_grad: bool = False, volatile: bool = False) -> Any:
        from ember.creation import tensor as make
        from ember.tensor import Tensor

        if volatile:
            import warnings

            warnings.warn("volatile was removed and now has no effect. Use `with torch.no_grad():` instead.",
                          UserWarning, stacklevel=2)
        t = data if isinstance(data, Tensor) else make(data if data is not None else [])
        if requires_grad and not t.requires_grad:
            t = t.detach().requires_grad_(True)
        return t


class set_multithreading_enabled:
    """``torch.autograd.set_multithreading_enabled(mode)``: accepted; ember's backward runs on one thread."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None

    def clone(self) -> "set_multithreading_enabled":
        return set_multithreading_enabled(self.mode)
