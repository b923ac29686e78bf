"""``torch.compiler``: the names programs call around ``torch.compile``, on ember.compile.

ember.compile traces a whole step into one static graph; there is no bytecode-level compiler with guards,
caches or graph breaks to configure, so ``reset``, ``cudagraph_mark_step_begin`` and the like have nothing to
act on and return at once (documented, not silently different: results never depend on them).
``disable(fn)`` marks ``fn``; ember.compile runs such functions as Python between the graph's parts is not
possible in one graph, so a compiled function that calls a disabled one traces through it (the values are
the same, it is only compiled too). ``is_compiling()`` is True while ember.compile (or jit.trace) traces.

Example:
    >>> import ember
    >>> @ember.compiler.disable
    ... def log_stats(x):
    ...     return float(x.mean())
    >>> ember.compiler.is_compiling()
    False
"""
from __future__ import annotations

from typing import Any, Callable

from ember import interpreters
from ember.graph import compile  # noqa: F401,A004  (torch.compiler.compile)


def is_compiling() -> bool:
    """True while this thread's ops are being traced into a graph (ember.compile, jit.trace)."""
    return interpreters.tracing()


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    return False


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """Decorator marking ``fn`` as not to be compiled (see the module docstring for what ember does)."""
    def mark(function: Callable) -> Callable:
        try:
            function._ember_compile_disabled = reason or True
        except (AttributeError, TypeError):  # builtins cannot take attributes: nothing to mark
            pass
        return function
    return mark if fn is None else mark(fn)


def allow_in_graph(fn: Callable) -> Callable:
    """Every ember function can be traced already: returns ``fn``."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    return fn


def reset() -> None:
    """torch's compile caches are global; ember's live on each compiled function (drop it to drop them)."""


def cudagraph_mark_step_begin() -> None:
    """ember does not replay CUDA graphs (docs/gpu.md): nothing to mark."""


def list_backends(exclude_tags: Any = ("debug", "experimental")) -> list[str]:
    return ["ember"]


__all__ = ["compile", "is_compiling", "is_dynamo_compiling", "is_exporting", "disable", "allow_in_graph",
           "assume_constant_result", "reset", "cudagraph_mark_step_begin", "list_backends"]
