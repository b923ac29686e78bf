"""The interpreter stack: who runs an op. Eager at the bottom of every thread's stack; a tracer on top.

Every way into ember runs ops through one dispatcher (:mod:`ember.ops.dispatch`), which asks which
interpreter an op belongs to, as JAX's ``bind`` asks ``find_top_trace``:

1. an argument that is a *symbolic* tensor (its ``_data`` is a :class:`SymbolicValue`, an IR value of
   a graph under construction) belongs to that graph's builder, which adds a node;
2. otherwise, when a tensor takes part, the top of this thread's stack: a tracer pushed by
   ``ember.compile``/``Tracer`` records every op of the traced function (concrete tensors included);
3. otherwise the bottom, :data:`EAGER`: the op computes now (dispatch's own code, inlined there for speed).

The stack is per thread (``threading.local``, like grad mode): a trace in one thread never captures
another thread's ops. Define-then-run graphs (``ember.graph.placeholder``) are not pushed: their tensors
carry their builder (rule 1), so eager code running beside an open default graph stays eager.

:data:`GRAPHS` counts graphs under construction on any thread; while it is zero, dispatch skips the
look-up above entirely (the eager fast path pays one attribute read). It never decides how an op runs.

Example:
    >>> from ember import interpreters
    >>> interpreters.current() is interpreters.EAGER
    True
"""
from __future__ import annotations

import threading
from typing import Any


class Interpreter:
    """How ops run at one level of the stack. Subclassed by ``ember.graph.builder.Builder``."""

    # True for interpreters that record ops into a graph (values unknown now); vmap's batching interpreter
    # (ember/func/batched.py) computes at once and sets it False.
    traces = True
    # True for levels that must see every op of a backward too (dispatch modes): the engine then runs the
    # ember-op gradient rules instead of its plain-array ones.
    watches = False

    def process(self, op: Any, args: tuple, attrs: dict) -> Any:
        """Run (or record) ``op`` on ``args``: the interpreter's answer to ``bind``."""
        raise NotImplementedError

    def lift(self, tensor: Any) -> None:
        """Make a concrete ``tensor`` part of this interpreter's graph before an in-place write."""

    def write(self, tensor: Any, result: Any, op_name: str) -> None:
        """In-place write of symbolic ``result`` into ``tensor`` (``op_name`` for errors)."""
        raise NotImplementedError

    def random_node(self, kind: str, shape: tuple, dtype: Any, device: Any, generator: Any, inputs: tuple,
                    params: dict) -> Any:
        """A symbolic tensor sampled by a random graph node, or None: sample now (see ember.random.graph_sample)."""
        return None

    def check_direct_sampling(self) -> None:
        """Raise when numbers drawn from a generator now could not be replayed (a trace)."""


class Eager(Interpreter):
    """The bottom of every stack: ops compute at once. Its ``process`` is dispatch's own inlined code."""

    traces = False

    def __repr__(self) -> str:
        return "EAGER"


EAGER = Eager()


class TracingError(RuntimeError):
    """A traced function did something a graph cannot hold (needs a traced tensor's data: ``.item()``,
    ``bool(x)``; an in-place change a graph cannot express); ``ember.compile`` then falls back to eager."""


class SymbolicValue:
    """Marker base of IR values that stand in a tensor's ``_data`` (``ember.graph.ir.Value``).

    ``interpreter`` is the builder of the value's graph: the interpreter its ops belong to.
    """

    __slots__ = ()
    # True for values whose view ops run as records with eager's view rules (vmap's batched values), rather
    # than the gather forms a graph needs (ember/ops/views.py, ember/ops/inplace.py).
    replays_views = False

    @property
    def interpreter(self) -> Interpreter:
        raise NotImplementedError

    # Array-like metadata derived from ``shape`` and ``itemsize`` (which subclasses define), so Tensor
    # methods that read ``ndim``/``size``/``nbytes``/``strides`` work on any symbolic value.
    @property
    def ndim(self) -> int:
        return len(self.shape)  # type: ignore[attr-defined]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:  # type: ignore[attr-defined]
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize  # type: ignore[attr-defined]

    @property
    def strides(self) -> tuple:
        """C-contiguous strides in bytes (a symbolic value has no real layout)."""
        out, step = [], self.itemsize  # type: ignore[attr-defined]
        for s in reversed(self.shape):  # type: ignore[attr-defined]
            out.append(step)
            step *= max(s, 1)
        return tuple(reversed(out))


class _Stack(threading.local):
    def __init__(self) -> None:  # runs again in every new thread: each starts eager
        self.interpreters: list[Interpreter] = [EAGER]


class _GraphCount:
    """Graphs under construction on any thread (pushed tracers and open define-then-run graphs), pushed levels
    (vmap, dispatch modes) and live ``__torch_dispatch__`` subclasses: while zero, dispatch asks nothing."""

    count = 0


class _SubclassCount:
    """Live tensor classes with ``__torch_dispatch__`` (ember/_dispatch_levels.py sets ``types`` and ``level``)."""

    count = 0
    types: Any = ()
    level: Any = None


_STACK = _Stack()
GRAPHS = _GraphCount()
SUBCLASSES = _SubclassCount()
_LOCK = threading.Lock()


def current() -> Interpreter:
    """The top of this thread's stack (:data:`EAGER` unless a trace is running in this thread)."""
    return _STACK.interpreters[-1]


def stack() -> list:
    """This thread's interpreters, bottom (:data:`EAGER`) first (a copy)."""
    return list(_STACK.interpreters)


def watching() -> bool:
    """True while this thread's backward ops must be dispatched one by one: a trace, a dispatch mode on the stack,
    or a live ``__torch_dispatch__`` subclass class (call only when ``GRAPHS.count``)."""
    return SUBCLASSES.count > 0 or any(i.traces or i.watches for i in _STACK.interpreters[1:])


def tracing() -> bool:
    """True while this thread's ops are recorded by an interpreter above eager (a trace)."""
    stack = _STACK.interpreters
    return stack[-1] is not EAGER and any(i.traces for i in stack)


def push(interpreter: Interpreter) -> None:
    """Put ``interpreter`` on top of this thread's stack (pair with :func:`pop`)."""
    _STACK.interpreters.append(interpreter)
    graph_opened()


def pop(interpreter: Interpreter) -> None:
    """Remove ``interpreter`` from this thread's stack (the innermost one, as a ``with`` block ends)."""
    stack = _STACK.interpreters
    if interpreter is EAGER or interpreter not in stack:
        raise RuntimeError(f"interpreter {interpreter!r} is not on this thread's stack")
    del stack[len(stack) - 1 - stack[::-1].index(interpreter)]
    graph_closed()


def suspend(interpreter: Interpreter) -> list:
    """Take ``interpreter`` and every interpreter above it off this thread's stack, so the ops it runs on
    its inputs go to the level below (JAX's levels: a batching rule binds one level down). Pair with
    :func:`resume`, which puts them back."""
    stack = _STACK.interpreters
    index = len(stack) - 1
    while stack[index] is not interpreter:
        index -= 1
        if index <= 0:
            raise RuntimeError(f"interpreter {interpreter!r} is not on this thread's stack")
    above = stack[index:]
    del stack[index:]
    return above


def resume(suspended: list) -> None:
    """Undo :func:`suspend`."""
    _STACK.interpreters.extend(suspended)


def graph_opened() -> None:
    """A graph whose symbolic tensors may reach dispatch was created (define-then-run, a trace)."""
    with _LOCK:
        GRAPHS.count += 1


def graph_closed() -> None:
    with _LOCK:
        GRAPHS.count -= 1


def find(values: tuple) -> Interpreter:
    """The interpreter an op on ``values`` belongs to (JAX's ``find_top_trace``; see the module doc)."""
    tensor_seen = False
    for value in values:
        data = getattr(value, "_data", None)
        if data is not None:
            if isinstance(data, SymbolicValue):
                return data.interpreter
            tensor_seen = True
    if not tensor_seen:
        return EAGER
    top = _STACK.interpreters[-1]
    if top is EAGER and SUBCLASSES.count:  # a __torch_dispatch__ subclass's object takes part: its level
        types = SUBCLASSES.types
        for value in values:
            if type(value) in types:
                return SUBCLASSES.level
    return top
