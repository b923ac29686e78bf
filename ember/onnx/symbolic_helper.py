"""``torch.onnx.symbolic_helper``: the ``parse_args`` decorator custom-op symbolics are written with.

Symbolic functions are recorded by :mod:`ember.onnx.symbolic_registry` and never run by ember's
exporter (it exports from op records), so ``parse_args`` checks its descriptors and marks the function,
as PyTorch's does, and calls it with the arguments unchanged.

Example:
    >>> from ember.onnx.symbolic_helper import parse_args
    >>> @parse_args("v", "f")
    ... def scale(g, x, factor):
    ...     return (x, factor)
    >>> scale._arg_descriptors
    ('v', 'f')
"""
from __future__ import annotations

import functools
from typing import Any, Callable

__all__ = ["parse_args"]

_DESCRIPTORS = {"v", "i", "is", "f", "fs", "b", "s", "t", "none"}  # PyTorch's set


def parse_args(*arg_descriptors: str) -> Callable[[Callable], Callable]:
    """Decorate a symbolic ``fn(g, *args)`` with how each argument is read ("v", "i", "is", "f", "fs", ...)."""
    bad = [d for d in arg_descriptors if d not in _DESCRIPTORS]
    if bad:
        raise ValueError(f"parse_args: unknown descriptor(s) {bad}; expected some of {sorted(_DESCRIPTORS)}")

    def decorator(fn: Callable) -> Callable:
        fn._arg_descriptors = arg_descriptors

        @functools.wraps(fn)
        def wrapper(g: Any, *args: Any, **kwargs: Any) -> Any:
            if len(arg_descriptors) < len(args):
                raise AssertionError(
                    f"A mismatch between the number of arguments ({len(args)}) and their descriptors "
                    f"({len(arg_descriptors)}) was found at symbolic function '{fn.__name__}'.")
            return fn(g, *args, **kwargs)

        return wrapper

    return decorator
