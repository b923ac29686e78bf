"""``torch._dynamo.eval_frame``: ``OptimizedModule``, the type of ``torch.compile(module)``.

``ember.compile(module)`` returns a :class:`ember.graph.compile.CompiledFunction` that reaches the module's
attributes (``parameters()``, ``train()``, ``state_dict()``) and its module as ``_orig_mod``, as PyTorch's wrapper
does. Libraries test for a compiled module with ``isinstance(m, torch._dynamo.eval_frame.OptimizedModule)`` and
unwrap it through ``m._orig_mod`` (``accelerate``'s ``unwrap_model``, Hugging Face's ``Trainer``); here that
``isinstance`` is True exactly for compiled modules (not compiled plain functions).

Example:
    >>> import ember
    >>> from ember._dynamo.eval_frame import OptimizedModule
    >>> m = ember.nn.Linear(2, 2)
    >>> compiled = ember.compile(m)
    >>> isinstance(compiled, OptimizedModule), compiled._orig_mod is m, isinstance(m, OptimizedModule)
    (True, True, False)
"""
from __future__ import annotations

from typing import Any

from ember.graph.compile import CompiledFunction
from ember.nn.modules.module import Module

__all__ = ["OptimizedModule"]


class _CompiledModuleType(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, CompiledFunction) and isinstance(obj.__dict__.get("fn"), Module)


class OptimizedModule(metaclass=_CompiledModuleType):
    """What ``compile(module)`` returns (``isinstance`` only: make one with ``ember.compile(module)``)."""

    def __new__(cls, mod: Module, *args: Any, **kwargs: Any) -> Any:
        return CompiledFunction(mod)
