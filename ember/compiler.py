"""``torch.compiler``: the helpers model code calls around compilation (``is_compiling``, ``disable``, ...).

ember's compiler is :func:`ember.compile` (a tracer into ember's static graph IR), so:

- ``compile`` is ``ember.compile``; ``is_compiling()`` (and ``is_dynamo_compiling()``) is True while this
  thread is being traced by it, as PyTorch's is True while dynamo traces;
- ``disable(fn)`` / ``allow_in_graph`` / ``assume_constant_result`` return the function: ember traces
  whole functions (no graph breaks), so code that asks "leave me out of the graph" still runs with the
  same values (inside a trace its ops are recorded; a data-dependent branch in it makes the compiled
  function fall back to eager, as ember.compile does anywhere);
- ``reset()`` drops every compiled function's graphs and guards (the next calls warm up and trace again);
  ``cudagraph_mark_step_begin()`` has nothing to mark and returns None;
- ``set_stance`` works as torch's (function, context manager or decorator): ``force_eager``,
  ``eager_on_recompile`` and ``fail_on_recompile`` change what compiled functions do
  (ember/graph/compile_options.py).

Example:
    >>> import ember
    >>> ember.compiler.is_compiling()
    False
    >>> f = ember.compile(lambda x: x + ember.compiler.is_compiling())
    >>> [f(ember.zeros(1)).item() for _ in range(3)]   # the first call runs eagerly, the second traces
    [0.0, 1.0, 1.0]
"""
from __future__ import annotations

from typing import Any, Callable

import functools

from ember import interpreters
from ember.graph import compile, compile_options  # noqa: F401,A004  (torch.compiler.compile)

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
    """Drop every compiled function's graphs, warm-up counts and guards, as ``torch._dynamo.reset()``."""
    compile_options.reset()


def cudagraph_mark_step_begin() -> None:
    """Nothing to mark: ember has no CUDA graphs."""


def list_backends(exclude_tags: Any = ("debug", "experimental")) -> list[str]:
    """torch 2.13's backend names (``compile(backend=...)`` accepts them all, and ``"ember"``; every one
    compiles with ember's graph)."""
    if exclude_tags:
        return ["cudagraphs", "inductor", "openxla", "tvm"]
    return [b for b in compile_options.BACKENDS if b != "ember"]


class _Stance:
    """torch's ``set_stance``: set on creation; as a context manager restores the previous stance on exit; as a
    decorator applies the stance around each call of the function (and restores it at once)."""

    def __init__(self, stance: str, force_backend: Any = None) -> None:
        if stance not in _STANCES:
            raise RuntimeError(f"set_stance: invalid stance {stance!r}; expected one of {list(_STANCES)}")
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        self.stance = stance
        self.prev = compile_options.STANCE[0]
        compile_options.STANCE[0] = stance

    def __enter__(self) -> "_Stance":
        compile_options.STANCE[0] = self.stance
        return self

    def __exit__(self, *exc: Any) -> None:
        compile_options.STANCE[0] = self.prev

    def __call__(self, fn: Callable) -> Callable:
        compile_options.STANCE[0] = self.prev

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            prev, compile_options.STANCE[0] = compile_options.STANCE[0], self.stance
            try:
                return fn(*args, **kwargs)
            finally:
                compile_options.STANCE[0] = prev

        return wrapper


def set_stance(stance: str = "default", *, skip_guard_eval_unsafe: bool = False, force_backend: Any = None) -> _Stance:
    """Set the compiler's stance (torch's names); usable as a function, context manager or decorator."""
    return _Stance(stance, force_backend)
