"""The profiler's hot path: what runs per op, per autograd node and per graph node while recording.

Dispatch, the autograd engine, the graph executor and device transfers each hold a module global
``PROFILER`` that is ``None`` unless something records; they read it once per call and, when set,
take the start time with ``PROFILER.clock()`` and call one of the methods below at the end.

A :class:`Recorder` appends each event to one flat ``list`` with a single ``list.extend`` of a tuple (one
C call, so events from several threads never interleave): start ns, end ns, thread and what the event
is. Without shapes that is the op record itself (nothing is looked up); with shapes it is a signature
id, interned per distinct (op, input and output shapes and dtypes, attributes that the op's cost rules
read) through one flat temporary key tuple. Nothing the log keeps per event is tracked by the garbage
collector (ints, op records, strings): kept shape tuples or attribute dicts would make it collect more
often, and each collection promotes ember's live temporaries towards its full passes, which walk every
object in the process (measured: ~0.5 ms per training step of 84 events, in outliers of ~100 ms).
What is left to intern (spans, graph nodes, plain ops) is interned by :meth:`Recorder.compact` into four
integers per event in an ``array('Q')``, when the trace is asked for and whenever the log passes
:data:`COMPACT_AT` entries (checked at autograd nodes, spans and profile steps, never per op). FLOPs and bytes are
computed later still, once per event when the trace is built (:mod:`ember.profiler.events`), from the
op record's rules.

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
# Entries of the flat log after which the next autograd node, span or profile step compacts it (about 200k events,
# ~25 MB: references to shared objects and the two timestamps' ints).
COMPACT_AT = 1 << 20


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


def _key_metas(values: Any) -> tuple:
    """Shape and dtype of each tensor in ``values`` as a flat key part (one ``None`` for anything else)."""
    key = []
    put = key.append
    for value in values:
        data = getattr(value, "_data", None)
        if data is None:
            put(None)
        else:
            put(data.shape)
            put(data.dtype)
    return tuple(key)


class Recorder:
    """Collects events; the methods are called from the hooks (see the module docstring).

    ``shapes=False`` records only which op ran when (no shapes, dtypes, FLOPs or bytes): the cheapest
    profile, what ``profile()`` uses unless ``record_shapes``, ``with_flops`` or ``profile_memory`` asks.
    """

    def __init__(self, shapes: bool = True) -> None:
        self.shapes = shapes
        self.clock = _clock  # an instance attribute: the hooks call PROFILER.clock() for the start time
        self._log: list = []  # events as recorded: (head, [what,] t0, t1, thread), see compact()
        self._extend = self._log.extend
        self._keys: dict = {}  # signature key -> signature id (ops and nodes with shapes, copies)
        self._node_names: dict = {}  # autograd node identity (its op, Function class or type) -> its name
        self._frozen_attrs: set = set()  # ops whose attrs need _freeze to be hashable
        self._attr_ids: dict = {}  # (op, attributes as a hashable key) -> index in self._attrs
        self._attrs: list = []
        self.signatures: list = []  # id -> (kind, what, input metas, output metas, attrs)
        self._sig_ids: dict = {}  # compaction's keys: plain ops, spans, graph nodes
        self.times = array("Q")  # compacted events: signature id, t0, t1, thread

    def count(self) -> int:  # not __len__: the hooks test the recorder for truth (`PROFILER and ...`)
        """Events recorded so far."""
        self.compact()
        return len(self.times) // 4

    def clear(self) -> None:
        self._log.clear()
        del self.times[:]

    def trim(self) -> None:
        """Compact when the log has grown past :data:`COMPACT_AT` entries (``profile.step()`` calls it, so a
        forward-only loop without autograd nodes or spans stays bounded too)."""
        if len(self._log) > COMPACT_AT:
            self.compact()

    # ---- hooks -------------------------------------------------------------------------------------
    def op(self, op: Any, t0: int, args: tuple, attrs: Any, result: Any) -> None:
        t1 = _clock()
        if not self.shapes:
            self._extend((op, t0, t1, get_ident()))
            return
        # The key is a flat temporary tuple, freed at once (kept shape tuples would make the garbage collector
        # run more often, and each run promotes ember's live temporaries towards its costly full passes).
        # Attributes join it only for ops whose own FLOP/byte rules read them (category defaults look at shapes
        # alone; fused kernels count their member ops), as a small interned int. ``attrs is None`` is dispatch's elementwise fast path (binary, and
        # unary without attributes), whose output follows from the op and its inputs: the key leaves it out.
        aid = self._attrs_id(op, attrs) if attrs and (op.flops is not None or op.bytes_moved is not None
                                                      or op.category == "fused") else None
        # One to three tensors in and one tensor out (most calls) take a straight path (no exceptions: raising
        # one costs more than the whole event).
        n = len(args)
        key = None
        if n == 2:
            x, y = args
            dx, dy = getattr(x, "_data", None), getattr(y, "_data", None)
            if dx is not None and dy is not None:
                if attrs is None:
                    key = (op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype)
                elif (data := getattr(result, "_data", None)) is not None:
                    key = (op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype, -1, data.shape, data.dtype)
        elif n == 1 and (dx := getattr(args[0], "_data", None)) is not None:
            if attrs is None:
                key = (op, aid, dx.shape, dx.dtype)
            elif (data := getattr(result, "_data", None)) is not None:
                key = (op, aid, dx.shape, dx.dtype, -1, data.shape, data.dtype)
        elif n == 3 and attrs is not None and (data := getattr(result, "_data", None)) is not None:  # linear, where
            x, y, z = args
            dx, dy, dz = getattr(x, "_data", None), getattr(y, "_data", None), getattr(z, "_data", None)
            if dx is not None and dy is not None and dz is not None:
                key = (op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype, dz.shape, dz.dtype, -1, data.shape, data.dtype)
        if key is None:  # Python scalars, three or more inputs, several outputs
            key = (op, aid, *_key_metas(args))
            if attrs is not None:
                key += (-1, *_key_metas(result if type(result) is tuple else (result,)))
        sid = self._keys.get(key)
        if sid is None:
            outs = tuple([_meta(r) for r in result]) if type(result) is tuple else (_meta(result),)
            sid = self._new_signature(key, (OP, op, tuple([_meta(a) for a in args]), outs,
                                            None if aid is None else self._attrs[aid]))
        self._extend((sid, t0, t1, get_ident()))

    def node(self, node: Any, t0: int, grads: Any) -> None:
        t1 = _clock()
        # Nodes are named by what names them (their op, their Function class, else their type); the name is
        # built once per kind of node (node.name() rebuilds an op's backward name on every call).
        ident = getattr(node, "op", None) or getattr(node, "fn_class", None) or type(node)
        if not self.shapes:
            if ident not in self._node_names:
                self._node_names[ident] = node.name()
            self._extend((NODE, ident, t0, t1, get_ident()))
        else:
            if len(grads) == 1 and (data := getattr(grads[0], "_data", None)) is not None:
                key = (NODE, ident, data.shape, data.dtype)
            else:
                key = (NODE, ident, *_key_metas(grads))
            sid = self._keys.get(key)
            if sid is None:
                sid = self._new_signature(key, (NODE, node.name(), tuple([_meta(g) for g in grads]), (), None))
            self._extend((sid, t0, t1, get_ident()))
        if len(self._log) > COMPACT_AT:
            self.compact()

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        t1 = _clock()
        kind = ("H" if source.type == "cpu" else "D") + "to" + ("H" if target.type == "cpu" else "D")
        key = (COPY, kind, data.shape, data.dtype)
        sid = self._keys.get(key)
        if sid is None:
            meta = (data.shape, data.dtype)
            sid = self._new_signature(key, (COPY, f"Memcpy {kind}", (meta,), (meta,), None))
        self._extend((sid, t0, t1, get_ident()))

    def span(self, kind: str, name: str, t0: int, t1: int | None = None) -> None:
        end = _clock() if t1 is None else t1
        self._extend((kind, name, t0, end, get_ident()))
        if len(self._log) > COMPACT_AT:
            self.compact()

    def graph_node(self, node: Any, t0: int, t1: int) -> None:
        self._extend((GRAPH, node, t0, t1, get_ident()))

    def run_program(self, executable: Any, env: list) -> None:
        """The graph executor's loop, one clock reading per node: a node ends where the next one starts
        (what lies between them is appending the previous node's event, ~0.05 us)."""
        extend, tid = self._extend, get_ident()
        start = t0 = _clock()
        for (fn, ins, out), node in zip(executable.program, executable.program_nodes):
            env[out] = fn(*[env[i] for i in ins])
            t1 = _clock()
            if node is not None:
                extend((GRAPH, node, t0, t1, tid))
            t0 = t1
        self.span(RUN, "graph::run", start)

    # ---- interning ---------------------------------------------------------------------------------
    def _new_signature(self, key: Any, entry: tuple) -> int:
        sid = self._keys[key] = len(self.signatures)
        self.signatures.append(entry)
        return sid

    def _sid(self, key: Any, entry: tuple) -> int:
        sid = self._sig_ids.get(key)
        if sid is None:
            sid = self._sig_ids[key] = len(self.signatures)
            self.signatures.append(entry)
        return sid

    def _attrs_id(self, op: Any, attrs: dict) -> int:
        """A small int naming one distinct attributes dict of ``op`` (a copy is kept in ``self._attrs``).
        Unhashable attributes and tensors in attributes are keyed by :func:`_freeze` (tensors by shape and
        dtype, never by identity: a profile keeps no user tensor alive)."""
        frozen = _freeze(attrs) if op in self._frozen_attrs else tuple(attrs.items())
        try:
            aid = self._attr_ids.get((op, frozen))
        except TypeError:  # an attribute holds a list or another unhashable value
            self._frozen_attrs.add(op)
            return self._attrs_id(op, attrs)
        if aid is None:
            if op not in self._frozen_attrs and _holds_array(attrs):
                self._frozen_attrs.add(op)
                return self._attrs_id(op, attrs)
            aid = self._attr_ids[(op, frozen)] = len(self._attrs)
            # the kept copy holds tensors by shape and dtype too (cost rules read only plain attributes)
            self._attrs.append({k: _freeze(v) if _holds_array(v) else v for k, v in attrs.items()})
        return aid

    def compact(self) -> list:
        """Move the log into ``times`` (four integers per event), interning what was not interned while
        recording (plain ops, autograd nodes without shapes, spans, graph nodes). Returns, per event moved,
        the log position where it started (the device recorder maps its launches with it).

        Log entries: ``(signature id, t0, t1, thread)`` for ops, nodes and copies interned when recorded;
        ``(op record, t0, t1, thread)`` for ops without shapes; ``(kind, what, t0, t1, thread)`` otherwise.
        """
        log = self._log
        if not log:
            return []
        # A fresh log first: an event another thread appends while this runs goes to the new one.
        self._log = []
        self._extend = self._log.extend
        push = self.times.append
        positions = []
        i = 0
        while i < len(log):
            positions.append(i)
            head = log[i]
            kind = type(head)
            if kind is int:
                sid = head
                i += 1
            elif kind is str:
                what = log[i + 1]
                i += 2
                if head == NODE:
                    sid = self._sid((NODE, what), (NODE, self._node_names[what], (), (), None))
                elif head == GRAPH:
                    key = (GRAPH, id(what))
                    sid = self._sig_ids.get(key)
                    if sid is None or self.signatures[sid][1] is not what:
                        sid = self._sig_ids[key] = len(self.signatures)
                        self.signatures.append((GRAPH, what, None, None, None))
                else:
                    sid = self._sid((head, what), (head, what, (), (), None))
            else:  # an op record, recorded without shapes
                sid = self._sid(head, (OP, head, None, None, None))
                i += 1
            push(sid)
            push(log[i])
            push(log[i + 1])
            push(log[i + 2])
            i += 3
        return positions

    def records(self) -> Iterator[tuple]:
        """``(kind, what, t0, t1, thread, input metas, output metas, attrs)`` per event, in recording order."""
        self.compact()
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
        self._launches: list = []  # (position of the host event in the flat log, start, end, index, stream)
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
        position = len(self._log)
        super().op(op, t0, args, attrs, result)
        if pair is not None:
            self._launches.append((position, *pair))

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        pair = self._end(t0, target if target.type == self.device_type else source)
        position = len(self._log)
        super().copy(t0, data, source, target)
        if pair is not None:
            self._launches.append((position, *pair))

    def compact(self) -> list:
        """As :meth:`Recorder.compact`, and each launch's log position becomes its host event's number."""
        base = len(self.times) // 4
        launches, self._launches = self._launches, []
        positions = super().compact()
        if launches:
            number = {p: base + k for k, p in enumerate(positions)}
            self.device.extend((number[p], *rest) for p, *rest in launches)
        return positions

    def clear(self) -> None:
        super().clear()
        self.device.clear()
        self._launches.clear()

    def device_times(self) -> list:
        """``(host event number, start ns, end ns, device index, stream id)`` per device event, on the host
        clock (after waiting for the device)."""
        if self.origin is None:
            return []
        self.compact()
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
