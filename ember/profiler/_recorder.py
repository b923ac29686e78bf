"""The profiler's hot path: what runs per op, per autograd node and per graph node while recording.

Dispatch, the autograd engine, the graph executor and device transfers each hold a module global
``PROFILER`` that is ``None`` unless something records; they read it once per call and, when set,
take the start time with ``PROFILER.clock()`` and call one of the methods below at the end.

A :class:`Recorder` appends each event to one flat ``list`` with a single ``list.extend`` of a tuple (one
C call, so events from several threads never interleave): start ns, end ns, thread and what the event
is. Without shapes that is the op record itself (nothing is looked up); with shapes it is references
only: the inputs' (and output's) shape tuples and dtypes as NumPy hands them out, laid out as the event's
signature key behind a count of its elements. Nothing is hashed or looked up per event (attributes, on
the few ops whose cost rules read them, are the exception); :meth:`Recorder.compact` interns the keys into
signatures and the log into four integers per event in an ``array('Q')``, when the trace is asked for and
whenever the log passes :data:`COMPACT_AT` entries (checked at autograd nodes, spans and profile steps,
never per op). The kept shape tuples hold only ints, so the garbage collector untracks them the first
time it sees them; attribute dicts, which it would promote towards its costly full passes, are never kept.
FLOPs and bytes are computed later still, once per signature when the trace is built
(:mod:`ember.profiler.events`), from the op record's rules.

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

import dis
import time
from array import array
from threading import get_ident
from typing import Any, Iterator
import numpy as np

from ember.autograd import engine
from ember.graph import executor
from ember.nn.parameter import Parameter
from ember.ops import dispatch
from ember.tensor import Tensor
from ember.profiler.backward_cost import ArrayRule

# Kinds of raw events.
OP, NODE, GRAPH, RUN, USER, LOADER, COPY = "cpu_op", "autograd", "graph_node", "graph", "user_annotation", \
    "dataloader", "memcpy"
ARRAY_NODE = "autograd_arrays"  # a log key's head only: an autograd node run by array rules becomes a NODE event

_clock = time.perf_counter_ns
_LISTENERS: list = []
# The profile whose context is open (recording or not: a schedule may be waiting); DataLoader reads it.
CURRENT: Any = None
_PLAIN = (int, float, str, bool, type(None))
_NUMBERS = frozenset((int, float, bool, complex))
_TENSORS = frozenset((Tensor, Parameter))  # classes whose ._data is the array (others take the general path)
# op record -> whether its own FLOP or byte rule reads its attributes (only then are they part of its signature)
_READS_ATTRS: dict = {}
_ndarray = np.ndarray
# Entries of the flat log after which the next autograd node, span or profile step compacts it (~100k events of a
# training step with shapes, ~30 MB: references, the kept shape tuples and the two timestamps' ints).
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


def _reads_attrs(op: Any) -> bool:
    """Whether ``op``'s FLOP or byte rule reads its ``attrs`` argument (fused kernels' default rule does: it
    counts the member ops). Looked at once per op, in the rule's bytecode; anything unclear counts as read."""
    if op.category == "fused":
        return True
    for rule in (op.flops, op.bytes_moved):
        if rule is None:
            continue
        code = getattr(rule, "__code__", None)
        if code is None or code.co_argcount < 3 or code.co_flags & 0x0C:  # not a plain function, or *args/**kw
            return True
        name = code.co_varnames[2]
        if name in code.co_cellvars or any(ins.argval == name for ins in dis.get_instructions(code)
                                           if ins.opname.startswith("LOAD_")):
            return True
    return False


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


def _metas(key: tuple, start: int, stop: int) -> tuple:
    """The (shape, dtype) pairs (``None`` for a non-tensor) laid out flat in ``key[start:stop]``."""
    out = []
    j = start
    while j < stop:
        if key[j] is None:
            out.append(None)
            j += 1
        else:
            out.append((key[j], key[j + 1]))
            j += 2
    return tuple(out)


def _broadcast(shapes: list) -> tuple:
    """NumPy's broadcast of ``shapes`` (an elementwise op's output shape)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for k, size in enumerate(s, ndim - len(s)):
            if size != 1:
                out[k] = size
    return tuple(out)


class Recorder:
    """Collects events; the methods are called from the hooks (see the module docstring).

    ``shapes=False`` records only which op ran when (no shapes, dtypes, FLOPs or bytes): the cheapest
    profile, what ``profile()`` uses unless ``record_shapes``, ``with_flops`` or ``profile_memory`` asks.
    """

    # The autograd engine keeps its array rules (``OpDef.array_vjp``: NumPy calls, no op dispatch) while a
    # listener whose ``backward_ops`` is false records: a profile shows the backward as it runs unprofiled, each
    # such node one event whose FLOPs and bytes come from ember.profiler.backward_cost. The FLOP counter sets it.
    backward_ops = False

    def __init__(self, shapes: bool = True, backward_ops: bool = False) -> None:
        self.shapes = shapes
        self.backward_ops = backward_ops
        self.clock = _clock  # an instance attribute: the hooks call PROFILER.clock() for the start time
        self._log: list = []  # events as recorded, several entries each (layouts: see compact())
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
        # References only: the inputs' shape tuples and dtypes (and the output's) go into the log as they are;
        # nothing is hashed, looked up or built per event. The head is the number of key elements that follow
        # the thread (see compact()). ``attrs is None`` is dispatch's elementwise fast path (binary, and unary
        # without attributes): its output's shape is the inputs' broadcast, so only its dtype is kept (-2).
        # Attributes join the key only for ops whose own FLOP/byte rules read them, as a small interned int.
        n = len(args)
        if attrs is None:
            if n == 2:
                x, y = args
                if x.__class__ in _TENSORS:
                    dx = x._data
                    if y.__class__ in _TENSORS:
                        dy = y._data
                        self._extend((8, t0, t1, get_ident(), op, None, dx.shape, dx.dtype, dy.shape, dy.dtype, -2,
                                      result._data.dtype))
                        return
                    if y.__class__ in _NUMBERS:
                        self._extend((7, t0, t1, get_ident(), op, None, dx.shape, dx.dtype, None, -2,
                                      result._data.dtype))
                        return
                elif x.__class__ in _NUMBERS and y.__class__ in _TENSORS:
                    dy = y._data
                    self._extend((7, t0, t1, get_ident(), op, None, None, dy.shape, dy.dtype, -2,
                                  result._data.dtype))
                    return
            elif n == 1:
                dx = args[0]._data
                self._extend((6, t0, t1, get_ident(), op, None, dx.shape, dx.dtype, -2, result._data.dtype))
                return
        aid = None
        if attrs:
            reads = _READS_ATTRS.get(op)
            if reads is None:
                reads = _READS_ATTRS[op] = _reads_attrs(op)
            if reads:
                aid = self._attrs_id(op, attrs)
        if result.__class__ in _TENSORS:
            dr = result._data
            if n == 1:
                x = args[0]
                if x.__class__ in _TENSORS:
                    dx = x._data
                    self._extend((7, t0, t1, get_ident(), op, aid, dx.shape, dx.dtype, -1, dr.shape, dr.dtype))
                    return
            elif n == 2:
                x, y = args
                if x.__class__ in _TENSORS and y.__class__ in _TENSORS:
                    dx, dy = x._data, y._data
                    self._extend((9, t0, t1, get_ident(), op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype, -1,
                                  dr.shape, dr.dtype))
                    return
            elif n == 3:  # linear, where, a loss's backward
                x, y, z = args
                if x.__class__ in _TENSORS and y.__class__ in _TENSORS and z.__class__ in _TENSORS:
                    dx, dy, dz = x._data, y._data, z._data
                    self._extend((11, t0, t1, get_ident(), op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype,
                                  dz.shape, dz.dtype, -1, dr.shape, dr.dtype))
                    return
        elif type(result) is tuple and len(result) == 2 and n == 2:  # cross_entropy: the loss and what it saves
            x, y = args
            r, q = result
            if x.__class__ in _TENSORS and y.__class__ in _TENSORS and r.__class__ in _TENSORS \
                    and q.__class__ in _TENSORS:
                dx, dy, dr, dq = x._data, y._data, r._data, q._data
                self._extend((11, t0, t1, get_ident(), op, aid, dx.shape, dx.dtype, dy.shape, dy.dtype, -1, dr.shape,
                              dr.dtype, dq.shape, dq.dtype))
                return
        # Python scalars beside attributes, four or more inputs, several outputs, tensor subclasses
        key = (op, aid, *_key_metas(args), -1, *_key_metas(result if type(result) is tuple else (result,)))
        self._extend((len(key), t0, t1, get_ident(), *key))

    def node(self, node: Any, t0: int, grads: Any) -> None:
        t1 = _clock()
        # Nodes are named by what names them (their op, their Function class, else their type); the name is
        # built once per kind of node (node.name() rebuilds an op's backward name on every call).
        ident = getattr(node, "op", None) or getattr(node, "fn_class", None) or type(node)
        if ident not in self._node_names:
            # an op's node is named by its record (one name per op; grad_fn printouts may use torch's per-call
            # names, ember/ops/torch_node_names.py, which would differ between nodes of one op)
            self._node_names[ident] = ident.backward_name if ident is getattr(node, "op", None) else node.name()
        if not self.shapes:
            self._extend((NODE, ident, t0, t1, get_ident()))
        elif len(grads) == 1 and (data := getattr(grads[0], "_data", None)) is not None:
            self._extend((4, t0, t1, get_ident(), NODE, ident, data.shape, data.dtype))
        elif len(grads) == 2 and grads[0].__class__ in _TENSORS and grads[1].__class__ in _TENSORS:
            a, b = grads[0]._data, grads[1]._data  # a node of two outputs (cross_entropy's)
            self._extend((6, t0, t1, get_ident(), NODE, ident, a.shape, a.dtype, b.shape, b.dtype))
        else:
            key = (NODE, ident, *_key_metas(grads))
            self._extend((len(key), t0, t1, get_ident(), *key))
        if len(self._log) > COMPACT_AT:
            self.compact()

    def array_node(self, node: Any, t0: int, grads: Any) -> None:
        """An autograd node (an ``OpNode``) whose gradients its op's array rules computed: with shapes, the key
        holds what :mod:`ember.profiler.backward_cost` needs to cost it later (references to the node's own
        tuples; the attributes interned as for ops)."""
        t1 = _clock()
        op = node.op
        if op not in self._node_names:
            self._node_names[op] = op.backward_name  # the record's name, as in node() above
        if not self.shapes:
            self._extend((NODE, op, t0, t1, get_ident()))
            return
        g = grads[0]
        if g.__class__ is not _ndarray:
            g = g._data
        attrs = node.attrs
        aid = self._attrs_id(op, attrs) if attrs else None
        meta = node.input_meta
        scalars = None
        if None in meta and node.saved is not None:  # Python scalar operands: rules may read their values
            scalars = tuple([s if s.__class__ in _NUMBERS else None for s in node.saved])
        self._extend((8, t0, t1, get_ident(), ARRAY_NODE, op, aid, meta, node.needs_input_grad, scalars, g.shape,
                      g.dtype))
        if len(self._log) > COMPACT_AT:
            self.compact()

    def copy(self, t0: int, data: Any, source: Any, target: Any) -> None:
        t1 = _clock()
        kind = ("H" if source.type == "cpu" else "D") + "to" + ("H" if target.type == "cpu" else "D")
        self._extend((4, t0, t1, get_ident(), COPY, kind, data.shape, data.dtype))

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

    def compact(self, positions: list | None = None) -> None:
        """Move the log into ``times`` (four integers per event), interning each event's signature; with
        ``positions``, append the log position where each moved event started (the device recorder maps its
        launches with them).

        Log entries: ``(k, t0, t1, thread, *key)`` with ``k`` key elements for events recorded with shapes
        (ops, autograd nodes, copies; see :meth:`_signature` for the key); ``(op record, t0, t1, thread)`` for
        ops without shapes; ``(kind, what, t0, t1, thread)`` for spans, graph nodes and nodes without shapes.
        """
        log = self._log
        if not log:
            return
        # A fresh log first: an event another thread appends while this runs goes to the new one.
        self._log = []
        self._extend = self._log.extend
        push = self.times.extend
        keys, plain = self._keys, self._sig_ids
        mark = positions.append if positions is not None else None
        i, end = 0, len(log)
        while i < end:
            if mark is not None:
                mark(i)
            head = log[i]
            kind = type(head)
            if kind is int:
                stop = i + 4 + head
                key = tuple(log[i + 4:stop])
                sid = keys.get(key)
                if sid is None:
                    sid = self._new_signature(key, self._signature(key))
                push((sid, log[i + 1], log[i + 2], log[i + 3]))
                i = stop
                continue
            if kind is str:
                what = log[i + 1]
                i += 1
                if head == NODE:
                    sid = self._sid((NODE, what), (NODE, self._node_names[what], (), (), None))
                elif head == GRAPH:
                    key = (GRAPH, id(what))
                    sid = plain.get(key)
                    if sid is None or self.signatures[sid][1] is not what:
                        sid = plain[key] = len(self.signatures)
                        self.signatures.append((GRAPH, what, None, None, None))
                else:
                    sid = self._sid((head, what), (head, what, (), (), None))
            else:  # an op record, recorded without shapes
                sid = plain.get(head)
                if sid is None:
                    sid = self._sid(head, (OP, head, None, None, None))
            push((sid, log[i + 1], log[i + 2], log[i + 3]))
            i += 4

    def _signature(self, key: tuple) -> tuple:
        """``(kind, what, input metas, output metas, attrs)`` from a recorded key: ``(op, attrs id, *inputs,
        -1, *outputs)`` or ``(op, None, *inputs, -2, output dtype)`` (an elementwise output: the inputs'
        broadcast shape), ``(NODE, identity, *gradients)`` or ``(COPY, "HtoD", shape, dtype)``; each tensor
        is its shape and dtype, anything else ``None``."""
        head, what = key[0], key[1]
        if head == ARRAY_NODE:
            _, op, aid, meta, needs, scalars, shape, dtype = key
            rule = ArrayRule(op, None if aid is None else self._attrs[aid], meta, needs, scalars, shape, dtype)
            return NODE, self._node_names[op], ((shape, dtype),), (), rule
        if head == NODE:
            return NODE, self._node_names[what], _metas(key, 2, len(key)), (), None
        if head == COPY:
            meta = (key[2], key[3])
            return COPY, f"Memcpy {what}", (meta,), (meta,), None
        marker = next(j for j in range(2, len(key)) if type(key[j]) is int)
        ins = _metas(key, 2, marker)
        if key[marker] == -2:
            shape = _broadcast([m[0] for m in ins if m is not None])
            outs = ((shape, key[marker + 1]),)
        else:
            outs = _metas(key, marker + 1, len(key))
        return OP, head, ins, outs, None if what is None else self._attrs[what]

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

    def compact(self, positions: list | None = None) -> None:
        """As :meth:`Recorder.compact`, and each launch's log position becomes its host event's number."""
        base = len(self.times) // 4
        launches, self._launches = self._launches, []
        moved: list = []
        super().compact(moved)
        if positions is not None:
            positions.extend(moved)
        if launches:
            number = {p: base + k for k, p in enumerate(moved)}
            self.device.extend((number[p], *rest) for p, *rest in launches)

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
            exact = getattr(start, "host_time_ns", None)
            if exact is not None and exact() is not None and end.host_time_ns() is not None:
                # A synchronous device's events carry the host clock itself: no origin offset to add (placing
                # by the origin put a kernel's end a few ns past its host call's end now and then)
                begin, finish = exact(), end.host_time_ns()
            else:
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
        self.backward_ops = any(getattr(listener, "backward_ops", True) for listener in self.listeners)

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

    def array_node(self, *args: Any) -> None:
        for listener in self.listeners:
            listener.array_node(*args)

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
