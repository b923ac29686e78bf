"""``torch.compiler``: the helpers model code calls around compilation (``is_compiling``, ``disable``, ...).

ember's compiler is :func:`ember.compile` (a tracer into ember's static graph IR), so:

- ``compile`` is ``ember.compile``; ``is_compiling()`` (and ``is_dynamo_compiling()``) is True while this
  thread is being traced by it, as PyTorch's is True while dynamo traces;
- ``disable(fn)`` / ``allow_in_graph`` / ``assume_constant_result`` return the function: ember traces
  whole functions (no graph breaks), so code that asks "leave me out of the graph" still runs with the
  same values (inside a trace its ops are recorded; a data-dependent branch in it makes the compiled
  function fall back to eager, as ember.compile does anywhere);
- ``reset()`` and ``cudagraph_mark_step_begin()`` have nothing to clear here (ember.compile's caches
  belong to each compiled function; there are no CUDA graphs) and return None.

Example:
    >>> import ember
    >>> ember.compiler.is_compiling()
    False
    >>> seen = []
    >>> f = ember.compile(lambda x: seen.append(ember.compiler.is_compiling()) or x + 1)
    >>> _ = [f(ember.zeros(1)) for _ in range(3)]
    >>> seen[:2]                        # the first call runs eagerly, the second traces
    [False, True]
"""
from __future__ import annotations

from typing import Any, Callable

from ember import interpreters
from ember.graph import compile  # noqa: F401,A004  (torch.compiler.compile)

__all__ = ["compile", "is_compiling", "is_dynamo_compiling", "is_exporting", "disable", "allow_in_graph",
           "assume_constant_result", "reset", "cudagraph_mark_step_begin", "list_backends", "set_stance"]

_STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
            "aot_eager_then_compile")


def is_compiling() -> bool:
    """True while :func:`ember.compile` traces this thread's ops (PyTorch: while dynamo traces)."""
    return interpreters.tracing()


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """False: ember's ``torch.export`` builds fx graphs by running ``forward`` on proxies, not by a compiler."""
    return False


def disable(fn: Callable | None = None, recursive: bool = True, *, reason: str | None = None) -> Any:
    """Return ``fn`` (or a decorator): ember traces whole functions and has no frames to skip."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn: Callable) -> Callable:
    """Return ``fn``: every ember function is traceable as written."""
    return fn


def assume_constant_result(fn: Callable) -> Callable:
    """Return ``fn`` (ember.compile bakes the value a Python-level result had when traced anyway)."""
    return fn


def reset() -> None:
    """Nothing to clear: ember.compile keeps its graphs per compiled function."""


def cudagraph_mark_step_begin() -> None:
    """Nothing to mark: ember has no CUDA graphs."""


def list_backends(exclude_tags: Any = ("debug", "experimental")) -> list[str]:
    """The backends ``compile(backend=...)`` understands: ember ignores the name and uses its own graph."""
    return ["ember"]


class _Stance:
    def __init__(self, stance: str) -> None:
        if stance not in _STANCES:
            raise RuntimeError(f"set_stance: invalid stance {stance!r}; expected one of {list(_STANCES)}")
        self.stance = stance

    def __enter__(self) -> "_Stance":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __call__(self, fn: Callable) -> Callable:
        return fn


def set_stance(stance: str = "default", *, skip_guard_eval_unsafe: bool = False, force_backend: Any = None) -> _Stance:
    """Accept PyTorch's stances (checked by name); ember.compile's own fallback rules decide eager vs graph."""
    return _Stance(stance)
