"""The profiler's hot path: what runs per op, per autograd node and per graph node while recording.

Dispatch, the autograd engine, the graph executor and device transfers each hold a module global
``PROFILER`` that is ``None`` unless something records; they read it once per call and, when set,
call one of the methods below with the start time they took. A :class:`Recorder` only appends raw
tuples ``(kind, what, t0, t1, thread, inputs, outputs, attrs)``; turning them into events (nesting,
FLOPs, bytes) happens once, after recording (:mod:`ember.profiler.events`).

Several listeners may record at once (a profile and a FlopCounterMode inside it): :func:`attach`
installs the only one directly and a fan-out when there are more.

Example:
    >>> from ember.profiler import _recorder
    >>> rec = _recorder.Recorder()
    >>> _recorder.attach(rec)
    >>> import ember; _ = ember.ones(2) + 1
    >>> _recorder.detach(rec)
    >>> [raw[1] for raw in rec.raw if raw[0] == _recorder.OP]
    ['add']
"""
from __future__ import annotations

import time
from threading import get_ident
from typing import Any, Iterator
from ember.autograd import engine
from ember.graph import executor
from ember.ops import dispatch

# Kinds of raw events.
OP, NODE, GRAPH, RUN, USER, LOADER, COPY = "cpu_op", "autograd", "graph_node", "graph", "user_annotation", \
    "dataloader", "memcpy"

_clock = time.perf_counter_ns
_LISTENERS: list = []
# The profile whose context is open (recording or not: a schedule may be waiting); DataLoader reads it.
CURRENT: Any = None


# dtypes are recorded by name: a tuple holding a NumPy dtype object stays tracked by the garbage collector
# forever, and millions of tracked records would make every full collection (and so every op) slower.
DTYPES: dict = {}
_NAMES: dict = {}


def dtype_name(dtype: Any) -> str:
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = str(dtype)
        DTYPES[name] = dtype
    return name


def _meta(value: Any) -> Any:
    data = getattr(value, "_data", None)
    return None if data is None else (data.shape, _NAMES.get(data.dtype) or dtype_name(data.dtype))


class Recorder:
    """Collects raw events; the methods are called from the hooks (see the module docstring)."""

    def __init__(self) -> None:
        self.raw: list = []

    def op(self, op: Any, t0: int, args: tuple, attrs: Any, result: Any) -> None:
        # The per-op cost of recording (~1 us): shape/dtype references only. Records hold names, shapes
        # and numbers, nothing the garbage collector must walk (a profile of a long run would otherwise
        # make every full collection slower and slower); the op record is found again by name.
        t1 = _clock()
        ins = []
        for a in args:
            data = getattr(a, "_data", None)
            ins.append(None if data is None else (data.shape, _NAMES.get(data.dtype) or dtype_name(data.dtype)))
        if type(result) is tuple:
            outs = tuple([_meta(r) for r in result])
        else:
            data = result._data
            outs = ((data.shape, _NAMES.get(data.dtype) or dtype_name(data.dtype)),)
        self.raw.append((OP, op.name, t0, t1, get_ident(), tuple(ins), outs, attrs))

    def node(self, node: Any, t0: int, grads: Any) -> None:
        t1 = _clock()
        name = node.name() if callable(getattr(node, "name", None)) else type(node).__name__
        self.raw.append((NODE, name, t0, t1, get_ident(), tuple([_meta(g) for g in grads]), (), None))

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        kind = ("H" if source.type == "cpu" else "D") + "to" + ("H" if target.type == "cpu" else "D")
        meta = (data.shape, dtype_name(data.dtype))
        self.raw.append((COPY, f"Memcpy {kind}", t0, _clock(), get_ident(), (meta,), (meta,), None))

    def span(self, kind: str, name: str, t0: int, t1: int | None = None) -> None:
        self.raw.append((kind, name, t0, _clock() if t1 is None else t1, get_ident(), (), (), None))

    def graph_node(self, node: Any, t0: int, t1: int) -> None:
        self.raw.append((GRAPH, node, t0, t1, get_ident(), None, None, None))

    def run_program(self, executable: Any, env: list) -> None:
        run_program(self, executable, env)


def run_program(hook: Any, executable: Any, env: list) -> None:
    """The graph executor's loop with one event per node (and one for the whole run)."""
    start = _clock()
    for (fn, ins, out), node in zip(executable.program, executable.program_nodes):
        t0 = _clock()
        env[out] = fn(*[env[i] for i in ins])
        if node is not None:
            hook.graph_node(node, t0, _clock())
    hook.span(RUN, "graph::run", start)


class _Fanout:
    """Forwards each hook call to every listener (used only while two or more record)."""

    def __init__(self, listeners: list) -> None:
        self.listeners = list(listeners)

    def op(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.op(*args)

    def node(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.node(*args)

    def copy(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.copy(*args)

    def span(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.span(*args)

    def graph_node(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.graph_node(*args)

    def run_program(self, executable: Any, env: list) -> None:
        run_program(self, executable, env)


def _install() -> None:

    hook = None if not _LISTENERS else (_LISTENERS[0] if len(_LISTENERS) == 1 else _Fanout(_LISTENERS))
    dispatch.PROFILER = engine.PROFILER = executor.PROFILER = hook


def attach(listener: Any) -> None:
    """Start sending hook calls to ``listener``."""
    if listener not in _LISTENERS:
        _LISTENERS.append(listener)
    _install()


def detach(listener: Any) -> None:
    """Stop sending hook calls to ``listener`` (a no-op if it was not attached)."""
    if listener in _LISTENERS:
        _LISTENERS.remove(listener)
    _install()


def active() -> Any:
    """The installed hook (a listener or a fan-out), or ``None`` when nothing records."""
    return dispatch.PROFILER


def timed_batches(batches: Iterator[Any]) -> Iterator[Any]:
    """Yield from ``batches``, recording each wait for the next batch as a DataLoader event."""
    iterator = iter(batches)
    while True:
        hook = dispatch.PROFILER
        t0 = _clock()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        if hook is not None and dispatch.PROFILER is hook:
            hook.span(LOADER, "enumerate(DataLoader)#__next__", t0)
        yield batch
