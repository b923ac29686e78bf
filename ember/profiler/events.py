"""Profiler events: raw hook records turned into nested events, averages and PyTorch's table.

:func:`build_events` nests the raw records per thread by their time intervals (a child starts and
ends inside its parent), and computes each compute event's FLOPs and bytes from its op record
(:mod:`ember.ops.cost`). :class:`EventList` has ``key_averages()`` and ``table(sort_by=...)`` as in
``torch.autograd.profiler_util``, with four more columns: achieved GFLOP/s, MFU (fraction of this
machine's measured peak, :mod:`ember.hardware`), achieved GB/s and the bound that applies.

Example:
    >>> import ember
    >>> from ember.profiler import profile
    >>> with profile(with_flops=True) as prof:
    ...     _ = ember.ones(8, 8) @ ember.ones(8, 8)
    >>> prof.key_averages()[0].key, prof.key_averages()[0].flops
    ('matmul', 1024)
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ember.ops.cost import op_bytes, op_flops
from ember.ops.registry import OPS, Spec
from ember.profiler import _recorder as R
from ember.profiler.backward_cost import ArrayRule, backward_cost
from ember import hardware
from ember.graph.ir import Value

_COMPUTE = (R.OP, R.GRAPH)


@dataclass(eq=False)
class FunctionEvent:
    """One recorded interval. Times are in microseconds from the start of the profile (PyTorch's unit)."""

    id: int
    name: str
    category: str
    start_us: float
    end_us: float
    thread: int
    input_shapes: list = field(default_factory=list)
    input_dtypes: list = field(default_factory=list)
    flops: int = 0  # own FLOPs for ops and graph nodes; for the others, the sum over their subtree
    bytes: int = 0
    cpu_memory_usage: int = 0  # bytes allocated for outputs (views allocate nothing)
    dtype: str = ""
    cpu_parent: "FunctionEvent | None" = None
    cpu_children: list = field(default_factory=list)
    count: int = 1
    device_type: str = "CPU"  # "CUDA" for the device side of an op or copy (ProfilerActivity.CUDA)
    device_index: int = 0
    stream: int = 0
    kernels: list = field(default_factory=list)  # device events of this host event (ops and copies)
    correlation: "FunctionEvent | None" = None  # for a device event: the host event that launched it

    @property
    def duration_us(self) -> float:
        return self.end_us - self.start_us

    @property
    def cpu_time_total(self) -> float:
        return self.end_us - self.start_us if self.device_type == "CPU" else 0.0

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_device_time_total(self) -> float:
        """Device time of this event's own kernels (for a device event: its own duration)."""
        if self.device_type != "CPU":
            return self.duration_us
        return sum(k.duration_us for k in self.kernels)

    @property
    def device_time_total(self) -> float:
        """Device time of this event's kernels and of its children's, as torch's ``device_time_total``."""
        if self.device_type != "CPU":
            return self.duration_us
        return self.self_device_time_total + sum(c.device_time_total for c in self.cpu_children)

    cuda_time_total = device_time_total  # torch's older names
    self_cuda_time_total = self_device_time_total

    @property
    def self_cpu_memory_usage(self) -> int:
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    @property
    def key(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return (f"<FunctionEvent {self.name} cat={self.category} cpu_time={self.cpu_time_total:.1f}us "
                f"shapes={self.input_shapes} flops={self.flops}>")


def _spec(meta: Any) -> Any:
    return None if meta is None else Spec(tuple(meta[0]), meta[1])


def _first_float(metas: Any) -> str:
    for m in metas:
        if m is not None and getattr(m[1], "kind", "") in "fV":
            return str(m[1])
    return ""


def _describe(raw: tuple, with_flops: bool) -> dict:
    kind, what, _, _, _, ins, outs, attrs = raw
    if kind == R.OP and ins is None:  # recorded without shapes (Recorder(shapes=False))
        return dict(name=what.name, shapes=[], dtypes=[], flops=0, bytes=0, memory=0, dtype="")
    if kind == R.OP:
        in_specs, out_specs = [_spec(m) for m in ins], [_spec(m) for m in outs]
        flops = op_flops(what, in_specs, out_specs, attrs or {}) if with_flops else 0
        nbytes = op_bytes(what, in_specs, out_specs, attrs or {})
        alloc = 0 if getattr(what, "view", False) else sum(_nbytes(s) for s in out_specs if s is not None)
        return dict(name=what.name, shapes=[list(m[0]) if m else [] for m in ins],
                    dtypes=[str(m[1]) if m else "Scalar" for m in ins], flops=flops, bytes=nbytes, memory=alloc,
                    dtype=_first_float(ins) or _first_float(outs))
    if kind == R.GRAPH:
        values = [v for v in what.inputs if isinstance(v, Value)]
        in_specs = [Spec(v.shape, v.dtype) if isinstance(v, Value) else None for v in what.inputs]
        out_specs = [Spec(v.shape, v.dtype) for v in what.outputs]
        attrs = {k: v for k, v in what.attrs.items() if not k.startswith("_")}
        label = what.attrs.get("ops") if what.op.category == "fused" else what.op.name
        flops = op_flops(what.op, in_specs, out_specs, attrs) if with_flops else 0
        metas = [(v.shape, v.dtype) for v in values] + [(v.shape, v.dtype) for v in what.outputs]
        return dict(name=f"graph::{label}", shapes=[list(v.shape) for v in values],
                    dtypes=[str(v.dtype) for v in values], flops=flops,
                    bytes=op_bytes(what.op, in_specs, out_specs, attrs), memory=0, dtype=_first_float(metas))
    if kind == R.NODE:
        flops = nbytes = memory = 0
        dtype = ""
        if isinstance(attrs, ArrayRule):  # run by array rules: no child events; its rule's ops, costed
            flops, nbytes, memory = backward_cost(attrs)
            flops = flops if with_flops else 0
            dtype = str(attrs.dtype)
        return dict(name=f"autograd::engine::evaluate_function: {what}",
                    shapes=[list(m[0]) if m else [] for m in ins], dtypes=[str(m[1]) if m else "" for m in ins],
                    flops=flops, bytes=nbytes, memory=memory, dtype=dtype)
    if kind == R.COPY:
        nbytes = _nbytes(_spec(ins[0]))
        return dict(name=what, shapes=[list(ins[0][0])], dtypes=[str(ins[0][1])], flops=0, bytes=2 * nbytes,
                    memory=nbytes, dtype="")
    return dict(name=what, shapes=[], dtypes=[], flops=0, bytes=0, memory=0, dtype="")


def _nbytes(spec: Any) -> int:
    n = 1
    for s in spec.shape:
        n *= s
    return n * spec.dtype.itemsize


_DEVICE_COPY = {"Memcpy HtoD": "Memcpy HtoD (Host -> Device)", "Memcpy DtoH": "Memcpy DtoH (Device -> Host)",
                "Memcpy DtoD": "Memcpy DtoD (Device -> Device)"}


def build_events(raw: list, origin_ns: int, with_flops: bool = True, device: list = ()) -> "EventList":
    """Nested :class:`FunctionEvent` s from raw records (sorted by start; children inside parents).

    ``device``: ``(record number, start ns, end ns, device index, stream)`` per device-side interval
    (:meth:`DeviceRecorder.device_times`); each becomes a ``kernel`` or ``gpu_memcpy`` event with
    ``device_type="CUDA"``, listed in its host event's ``kernels``.
    """
    order = sorted(range(len(raw)), key=lambda i: (raw[i][4], raw[i][2], -raw[i][3]))
    by_record: dict = {}
    events = []
    stacks: dict = {}
    described: dict = {}  # events of one signature share its objects: FLOPs, bytes, names computed once each
    for i, number in enumerate(order):
        record = raw[number]
        kind, what, t0, t1, tid, ins, outs, attrs = record
        signature = (kind, id(what), id(ins), id(outs), id(attrs))
        info = described.get(signature)
        if info is None:
            info = described[signature] = _describe(record, with_flops)
        event = FunctionEvent(id=i, name=info["name"], category=kind, start_us=(t0 - origin_ns) / 1e3,
                              end_us=(t1 - origin_ns) / 1e3, thread=tid, input_shapes=info["shapes"],
                              input_dtypes=info["dtypes"], flops=info["flops"], bytes=info["bytes"],
                              cpu_memory_usage=info["memory"], dtype=info["dtype"])
        stack = stacks.setdefault(tid, [])
        while stack and not (stack[-1].start_us <= event.start_us and event.end_us <= stack[-1].end_us):
            stack.pop()
        if stack:
            event.cpu_parent = stack[-1]
            stack[-1].cpu_children.append(event)
        stack.append(event)
        events.append(event)
        by_record[number] = event
    for number, t0, t1, index, stream in device:
        host = by_record.get(number)
        if host is None:
            continue
        copy = host.category == R.COPY
        kernel = FunctionEvent(id=len(events), name=_DEVICE_COPY.get(host.name, host.name) if copy
                               else f"{host.name} (kernel)", category="gpu_memcpy" if copy else "kernel",
                               start_us=(t0 - origin_ns) / 1e3, end_us=(t1 - origin_ns) / 1e3, thread=0,
                               input_shapes=host.input_shapes, input_dtypes=host.input_dtypes,
                               bytes=host.bytes if copy else 0, device_type="CUDA", device_index=index,
                               stream=stream, correlation=host)
        host.kernels.append(kernel)
        events.append(kernel)
    # Containers (user ranges, autograd nodes, graph runs, data-loader waits) sum their subtree's work.
    for event in reversed(events):  # children come after parents in start order
        if event.category not in _COMPUTE and event.cpu_children:
            event.flops = sum(c.flops for c in event.cpu_children)
            event.bytes = sum(c.bytes for c in event.cpu_children)
            event.cpu_memory_usage += sum(c.cpu_memory_usage for c in event.cpu_children)
            dtypes = [c.dtype for c in event.cpu_children if c.dtype]
            event.dtype = event.dtype or (max(set(dtypes), key=dtypes.count) if dtypes else "")
    return EventList(events)


@dataclass(eq=False)
class FunctionEventAvg:
    """Events of one name (and input shapes, when grouped so) summed: one row of the table."""

    key: str
    category: str = ""
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    flops: int = 0
    bytes: int = 0
    cpu_memory_usage: int = 0
    self_cpu_memory_usage: int = 0
    input_shapes: Any = None
    dtype: str = ""
    device_type: str = "CPU"
    device_time_total: float = 0.0
    self_device_time_total: float = 0.0

    @property
    def cpu_time(self) -> float:
        """Average time per call in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        """Average device time per call in microseconds."""
        return self.device_time_total / self.count if self.count else 0.0

    cuda_time = device_time  # torch's older names
    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)

    def add(self, event: FunctionEvent) -> None:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.device_time_total += event.device_time_total
        self.self_device_time_total += event.self_device_time_total
        self.device_type = event.device_type
        self.flops += event.flops
        self.bytes += event.bytes
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.dtype = self.dtype or event.dtype
        self.category = self.category or event.category

    def roofline(self) -> Any:
        """Achieved rates of these calls against the machine's peak (:class:`ember.hardware.Roofline`)."""
        return hardware.roofline(self.flops, self.bytes, self.cpu_time_total / 1e6, self.dtype or "float32")


_SORT_KEYS = {
    "cpu_time": "cpu_time", "cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
    "count": "count", "flops": "flops", "cpu_memory_usage": "cpu_memory_usage",
    "self_cpu_memory_usage": "self_cpu_memory_usage", "bytes": "bytes",
    "cuda_time": "device_time", "cuda_time_total": "device_time_total", "self_cuda_time_total": "self_device_time_total",
    "device_time": "device_time", "device_time_total": "device_time_total",
    "self_device_time_total": "self_device_time_total",
}
# A profile without device events (no ProfilerActivity.CUDA, or no device used) sorts device keys by CPU time,
# so scripts written for a GPU still print their most expensive ops first.
_HOST_FALLBACK = {"device_time": "cpu_time", "device_time_total": "cpu_time_total",
                  "self_device_time_total": "self_cpu_time_total"}


class EventList(list):
    """A list of :class:`FunctionEvent` (or of :class:`FunctionEventAvg` after ``key_averages``)."""

    def __init__(self, events: Any = (), wall_us: float | None = None, profile_memory: bool = False,
                 with_flops: bool = True, record_shapes: bool = False) -> None:
        super().__init__(events)
        self.wall_us = wall_us
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.record_shapes = record_shapes

    def _like(self, items: Any) -> "EventList":
        return EventList(items, self.wall_us, self.profile_memory, self.with_flops, self.record_shapes)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> "EventList":
        """One :class:`FunctionEventAvg` per event name (and per input shapes when asked)."""
        rows: "OrderedDict[Any, FunctionEventAvg]" = OrderedDict()
        for event in self:
            shapes = str(event.input_shapes) if group_by_input_shape else None
            key = (event.name, shapes)
            row = rows.get(key)
            if row is None:
                row = rows[key] = FunctionEventAvg(event.name, input_shapes=shapes)
            row.add(event)
        averaged = self._like(rows.values())
        averaged.grouped_by_shape = group_by_input_shape
        averaged.source = getattr(self, "source", self)  # the events, for the footer's whole-run figures
        return averaged

    def total_average(self) -> FunctionEventAvg:
        total = FunctionEventAvg("Total")
        for event in self:
            total.add(event)
        return total

    def work_events(self) -> list:
        """The events that did the work, each counted once: ops, graph nodes and the autograd nodes the
        engine ran by array rules (no children; their own FLOPs and bytes), not the containers summing them."""
        compute = [e for e in self if isinstance(e, FunctionEvent) and (e.category in _COMPUTE or (
            e.category == R.NODE and not e.cpu_children))]
        return compute or [e for e in self if getattr(e, "category", "") in _COMPUTE]

    def summary(self) -> Any:
        """The run against this machine's roofs: FLOPs and bytes of the work events over the wall time."""
        compute = self.work_events()
        flops = sum(e.flops for e in compute)
        nbytes = sum(e.bytes for e in compute)
        seconds = (self.wall_us or sum(getattr(e, "self_cpu_time_total", 0.0) for e in self)) / 1e6
        dtypes = [e.dtype for e in compute if e.dtype]
        dtype = max(set(dtypes), key=dtypes.count) if dtypes else "float32"
        return hardware.roofline(flops, nbytes, seconds, dtype)

    def device_name(self) -> str:
        """The device of the first device-side event (``'cuda:0'``), ``'cuda'`` if there is none."""
        for e in self:
            if isinstance(e, FunctionEvent) and e.device_type != "CPU":
                return f"{e.device_type.lower()}:{e.device_index}"
        return "cuda"

    def device_summary(self) -> Any:
        """The ops that ran on the device against its roofs, over the device's busy time (the sum of its
        kernels' and copies' durations); None without device events."""
        kernels = [e for e in self if isinstance(e, FunctionEvent) and e.device_type != "CPU"]
        if not kernels:
            return None
        launched = [k.correlation for k in kernels if k.correlation is not None and k.category == "kernel"]
        flops = sum(e.flops for e in launched)
        nbytes = sum(e.bytes for e in launched) + sum(k.bytes for k in kernels if k.category == "gpu_memcpy")
        dtypes = [e.dtype for e in launched if e.dtype]
        dtype = max(set(dtypes), key=dtypes.count) if dtypes else "float32"
        seconds = sum(k.duration_us for k in kernels) / 1e6
        return hardware.roofline(flops, nbytes, seconds, dtype, device=self.device_name())

    def __str__(self) -> str:
        return self.table()  # as torch's EventList

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_src_column_width: int = 75,
              max_name_column_width: int = 55, max_shapes_column_width: int = 80, header: str | None = None,
              top_level_events_only: bool = False) -> str:
        """PyTorch's profiler table, plus achieved GFLOP/s, MFU, GB/s and the bound per row."""
        from ember.profiler.table import format_table

        rows = self if not self or isinstance(self[0], FunctionEventAvg) else self.key_averages()
        if top_level_events_only and self and isinstance(self[0], FunctionEvent):
            rows = self._like([e for e in self if e.cpu_parent is None]).key_averages()
        if sort_by is not None:
            attr = _SORT_KEYS.get(sort_by)
            if attr is None:
                raise ValueError(f"table: unknown sort_by {sort_by!r}; use one of {sorted(_SORT_KEYS)}")
            if attr in _HOST_FALLBACK and not any(r.device_time_total for r in rows):
                attr = _HOST_FALLBACK[attr]
            rows = sorted(rows, key=lambda r: getattr(r, attr), reverse=True)
        return format_table(list(rows)[:row_limit], self, header, max_name_column_width,
                            max_shapes_column_width, getattr(rows, "grouped_by_shape", False)
                            or getattr(self, "grouped_by_shape", False))

    def export_chrome_trace(self, path: str) -> None:
        from ember.profiler.trace import write_chrome_trace

        write_chrome_trace([e for e in self if isinstance(e, FunctionEvent)], path)
