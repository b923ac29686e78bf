"""The profiler's hot path: what runs per op, per autograd node and per graph node while recording.

Dispatch, the autograd engine, the graph executor and device transfers each hold a module global
``PROFILER`` that is ``None`` unless something records; they read it once per call and, when set,
take the start time with ``PROFILER.clock()`` and call one of the methods below at the end.

A :class:`Recorder` keeps per event four integers in a flat ``array`` (signature id, start ns, end
ns, thread): no Python object outlives the call, so a long profile adds nothing the garbage
collector must walk (tracked per-event tuples made every full collection, and so every op, slower as
the profile grew: ~1-4 us per event in a process with ember loaded). What an event *is* - the op, its
input and output shapes and dtypes, its attributes - is interned once per distinct signature in a
dict. Turning the integers into events (nesting, FLOPs, bytes) happens once, after recording
(:mod:`ember.profiler.events`). Shapes are looked at only when something needs them
(``record_shapes``, ``with_flops`` or ``profile_memory``).

With ``ProfilerActivity.CUDA`` a :class:`DeviceRecorder` also records a pair of the backend's timing
events (``backend.new_event(enable_timing=True)``: CUDA events on CuPy, host-clock events on the
stand-in device) around every op whose result is on the device and every host<->device copy; their
elapsed times become the device-side events after a synchronize.

Several listeners may record at once (a profile and a FlopCounterMode inside it): :func:`attach`
installs the only one directly and a fan-out when there are more.

Example:
    >>> from ember.profiler import _recorder
    >>> rec = _recorder.Recorder()
    >>> _recorder.attach(rec)
    >>> import ember; _ = ember.ones(2) + 1
    >>> _recorder.detach(rec)
    >>> [r[1].name for r in rec.records() if r[0] == _recorder.OP]
    ['add']
"""
from __future__ import annotations

import time
from array import array
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
_PLAIN = (int, float, str, bool, type(None))


def _meta(value: Any) -> Any:
    data = getattr(value, "_data", None)
    return None if data is None else (data.shape, data.dtype)


def _is_array(value: Any) -> bool:
    return hasattr(value, "_data") or hasattr(value, "__array__")


def _holds_array(value: Any) -> bool:
    """Whether ``value`` (an attribute, or a dict/list/tuple of them) holds a tensor or an array."""
    if isinstance(value, (list, tuple)):
        return any(_holds_array(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_array(v) for v in value.values())
    return not isinstance(value, _PLAIN) and _is_array(value)


def _freeze(value: Any) -> Any:
    """A hashable stand-in for an attribute value; tensors and arrays by shape and dtype only (a profile
    must not keep the user's tensors alive, nor make a new signature per tensor)."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, dict):
        return ("dict",) + tuple((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze(v) for v in value)
    if _is_array(value):
        return ("array", tuple(value.shape), str(value.dtype))
    try:
        hash(value)
    except TypeError:
        return ("object", repr(value))
    return value


class Recorder:
    """Collects events; the methods are called from the hooks (see the module docstring).

    ``shapes=False`` records only which op ran when (no shapes, dtypes, FLOPs or bytes): the cheapest
    profile, what ``profile()`` uses unless ``record_shapes``, ``with_flops`` or ``profile_memory`` asks.
    """

    def __init__(self, shapes: bool = True) -> None:
        self.shapes = shapes
        self.clock = _clock  # an instance attribute: the hooks call PROFILER.clock() for the start time
        self.times = array("Q")  # per event: signature id, t0, t1, thread
        self._append = self.times.append
        self._sig_ids: dict = {}
        self._node_ids: dict = {}  # autograd nodes apart: their keys may be the same op objects as ops' keys
        self.signatures: list = []  # id -> (kind, what, input metas, output metas, attrs)
        self._frozen_attrs: set = set()  # ops whose attrs need _freeze to be hashable

    def count(self) -> int:  # not __len__: the hooks test the recorder for truth (`PROFILER and ...`)
        """Events recorded so far."""
        return len(self.times) // 4

    def clear(self) -> None:
        del self.times[:]

    def _intern(self, key: Any, entry: tuple) -> int:
        sid = self._sig_ids[key] = len(self.signatures)
        self.signatures.append(entry)
        return sid

    def _push(self, sid: int, t0: int, t1: int) -> None:
        push = self._append
        push(sid)
        push(t0)
        push(t1)
        push(get_ident())

    @staticmethod
    def _key(op: Any, args: tuple, result: Any, frozen: Any) -> tuple:
        key = [op]
        put = key.append
        for a in args:
            data = getattr(a, "_data", None)
            if data is None:
                put(None)
            else:
                put(data.shape)
                put(data.dtype)
        put(-1)  # separates inputs from outputs
        for r in result if type(result) is tuple else (result,):
            data = getattr(r, "_data", None)
            if data is None:
                put(None)
            else:
                put(data.shape)
                put(data.dtype)
        put(frozen)
        return tuple(key)

    def op(self, op: Any, t0: int, args: tuple, attrs: Any, result: Any) -> None:
        t1 = _clock()
        if self.shapes:
            # The key is a flat temporary tuple (freed at once; a flat tuple hashes faster than a nested
            # one): per input (shape, dtype) or one None for a Python scalar, -1, the outputs likewise,
            # then the attributes. Only a new signature is kept. One and two tensor inputs with one
            # output (most ops) take a straight path.
            frozen = None if not attrs else (_freeze(attrs) if op in self._frozen_attrs else tuple(attrs.items()))
            n = len(args)
            data = getattr(result, "_data", None)
            if n == 2 and data is not None:
                x, y = args
                dx, dy = getattr(x, "_data", None), getattr(y, "_data", None)
                if dx is not None and dy is not None:
                    key = (op, dx.shape, dx.dtype, dy.shape, dy.dtype, -1, data.shape, data.dtype, frozen)
                else:
                    key = self._key(op, args, result, frozen)
            elif n == 1 and data is not None and (dx := getattr(args[0], "_data", None)) is not None:
                key = (op, dx.shape, dx.dtype, -1, data.shape, data.dtype, frozen)
            else:
                key = self._key(op, args, result, frozen)
            try:
                sid = self._sig_ids.get(key)
            except TypeError:  # an attribute holds a list or another unhashable value
                self._frozen_attrs.add(op)
                key = key[:-1] + (_freeze(attrs),)
                sid = self._sig_ids.get(key)
            if sid is None:
                if attrs and op not in self._frozen_attrs and _holds_array(attrs):
                    # tensors as attributes: key them by shape and dtype, never by identity
                    self._frozen_attrs.add(op)
                    key = key[:-1] + (_freeze(attrs),)
                    sid = self._sig_ids.get(key)
                if sid is None:
                    ins = tuple([_meta(a) for a in args])
                    outs = tuple([_meta(r) for r in result]) if type(result) is tuple else (_meta(result),)
                    sid = self._intern(key, (OP, op, ins, outs, dict(attrs) if attrs else None))
        else:
            sid = self._sig_ids.get(op)
            if sid is None:
                sid = self._intern(op, (OP, op, None, None, None))
        push = self._append
        push(sid)
        push(t0)
        push(t1)
        push(get_ident())

    def node(self, node: Any, t0: int, grads: Any) -> None:
        t1 = _clock()
        # Nodes are keyed by what names them (their op, their Function class, else their type), not by
        # node.name(): an op's backward name is built from its name on every call (~1 us).
        ident = getattr(node, "op", None) or getattr(node, "fn_class", None) or type(node)
        if not self.shapes:
            key = ident
        elif len(grads) == 1 and (data := getattr(grads[0], "_data", None)) is not None:
            key = (ident, data.shape, data.dtype)
        else:
            key = (ident, *[_meta(g) for g in grads])
        sid = self._node_ids.get(key)
        if sid is None:
            sid = self._node_ids[key] = len(self.signatures)
            self.signatures.append((NODE, node.name(), tuple([_meta(g) for g in grads]) if self.shapes else (),
                                    (), None))
        push = self._append
        push(sid)
        push(t0)
        push(t1)
        push(get_ident())

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        t1 = _clock()
        kind = ("H" if source.type == "cpu" else "D") + "to" + ("H" if target.type == "cpu" else "D")
        key = (COPY, kind, data.shape, data.dtype)
        sid = self._sig_ids.get(key)
        if sid is None:
            meta = (data.shape, data.dtype)
            sid = self._intern(key, (COPY, f"Memcpy {kind}", (meta,), (meta,), None))
        self._push(sid, t0, t1)

    def span(self, kind: str, name: str, t0: int, t1: int | None = None) -> None:
        end = _clock() if t1 is None else t1
        key = (kind, name)
        sid = self._sig_ids.get(key)
        if sid is None:
            sid = self._intern(key, (kind, name, (), (), None))
        self._push(sid, t0, end)

    def graph_node(self, node: Any, t0: int, t1: int) -> None:
        key = (GRAPH, id(node))
        sid = self._sig_ids.get(key)
        if sid is None or self.signatures[sid][1] is not node:
            sid = self._intern(key, (GRAPH, node, None, None, None))
        self._push(sid, t0, t1)

    def run_program(self, executable: Any, env: list) -> None:
        run_program(self, executable, env)

    def records(self) -> Iterator[tuple]:
        """``(kind, what, t0, t1, thread, input metas, output metas, attrs)`` per event, in recording order."""
        times, signatures = self.times, self.signatures
        for i in range(0, len(times), 4):
            kind, what, ins, outs, attrs = signatures[times[i]]
            yield kind, what, times[i + 1], times[i + 2], times[i + 3], ins, outs, attrs


class DeviceRecorder(Recorder):
    """A :class:`Recorder` that also times device work with the backend's events (``ProfilerActivity.CUDA``).

    ``clock()`` records a timing event on the device's current stream beside the host time; an op whose
    result lands on the device records a second one when it returns, and the pair becomes a device-side
    event (``kernel`` for ops, ``gpu_memcpy`` for copies) linked to the host event. Ops that stay on the
    host give their start event back to a pool.
    """

    def __init__(self, backend: Any, device_type: str = "cuda", shapes: bool = True) -> None:
        super().__init__(shapes)
        self.backend = backend
        self.device_type = device_type
        self.clock = self._device_clock
        self._starts: list = []  # stack of (t0, start event): op calls nest
        self._pool: list = []
        self.device: list = []  # (host event number, start event, end event, device index, stream id)
        self.origin: tuple | None = None  # (host ns, device event) recorded together, to place device times

    def _event(self) -> Any:
        return self._pool.pop() if self._pool else self.backend.new_event(enable_timing=True)

    def _device_clock(self) -> int:
        if self.origin is None:
            self.backend.synchronize(None)  # an idle device: the origin event runs when it is recorded
            event = self.backend.new_event(enable_timing=True)
            event.record()
            self.origin = (_clock(), event)
        start = self._event()
        t0 = _clock()  # before the start event and (origin) after its own event: the device interval is placed
        start.record()  # inside the host call on a synchronous device, never before it
        self._starts.append((t0, start))
        return t0

    def _pop_start(self, t0: int) -> Any:
        starts = self._starts
        while starts:
            t, event = starts.pop()
            if t == t0:
                return event
            self._pool.append(event)  # an op that raised never reported its end
        return None

    def _end(self, t0: int, device: Any, launches: bool = True) -> tuple | None:
        """The start event of the call that began at ``t0`` and, when its work ran on the device, an end
        event recorded now: taken before the host-side recording, so the device interval holds no
        profiler work. Views (``launches=False``) run no kernel and give both events back."""
        start = self._pop_start(t0)
        if start is None:
            return None
        if device is None or device.type != self.device_type or not launches:
            self._pool.append(start)
            return None
        end = self._event()
        end.record()
        return start, end, device.index or 0, _stream_id(self.backend.current_stream(device.index))

    def op(self, op: Any, t0: int, args: tuple, attrs: Any, result: Any) -> None:
        first = result[0] if type(result) is tuple and result else result
        pair = self._end(t0, getattr(first, "_device", None), not op.view)
        super().op(op, t0, args, attrs, result)
        if pair is not None:
            self.device.append((self.count() - 1, *pair))

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        pair = self._end(t0, target if target.type == self.device_type else source)
        super().copy(t0, data, source, target)
        if pair is not None:
            self.device.append((self.count() - 1, *pair))

    def clear(self) -> None:
        super().clear()
        self.device.clear()

    def device_times(self) -> list:
        """``(host event number, start ns, end ns, device index, stream id)`` per device event, on the host
        clock (after waiting for the device)."""
        if self.origin is None:
            return []
        self.backend.synchronize(None)
        host0, origin = self.origin
        out = []
        for number, start, end, index, stream in self.device:
            begin = host0 + int(origin.elapsed_time(start) * 1e6)
            finish = begin + max(0, int(start.elapsed_time(end) * 1e6))
            out.append((number, begin, finish, index, stream))
        return out


def _stream_id(stream: Any) -> int:
    """A stable number for a stream: CUDA's stream handle, else 0 (a synchronous device has one stream)."""
    handle = getattr(getattr(stream, "cupy_stream", None), "ptr", None)
    return int(handle) if handle is not None else 0


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

    def clock(self) -> int:
        # Every listener's clock runs (a DeviceRecorder records its start event there); the last time wins.
        t0 = 0
        for listener in self.listeners:
            t0 = listener.clock()
        return t0

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
