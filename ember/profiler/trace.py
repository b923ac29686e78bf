"""Chrome trace export: the JSON ``chrome://tracing`` and https://ui.perfetto.dev open.

Host events are complete events (``"ph": "X"``) on this process, one track per thread, with their
start and duration in microseconds, their category (``cpu_op``, ``autograd``, ``graph_node``,
``user_annotation``, ``dataloader``, ``memcpy``) and ``args`` holding the input shapes and dtypes,
FLOPs and bytes. Device events (``kernel``, ``gpu_memcpy``; ``ProfilerActivity.CUDA``) sit on a
process per device (pid = device index, as torch writes them), one track per stream, each linked to
the host event that launched it by a flow arrow (``"ph": "s"`` / ``"f"``, category ``ac2g``, torch's
names). Slices on one track nest exactly (times are whole nanoseconds), which Perfetto requires.
Written atomically.

Example:
    >>> import ember, json, tempfile, os
    >>> from ember.profiler import profile
    >>> with profile() as prof:
    ...     _ = ember.ones(3) + 1
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json"); prof.export_chrome_trace(path)
    >>> [e["name"] for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"][-1]
    'add'
"""
from __future__ import annotations

import gzip
import json
import os
from typing import Any


def _us(value: float) -> float:
    return round(value, 3)  # whole nanoseconds: child slices stay inside their parents after parsing


def _args(e: Any) -> dict:
    args: dict[str, Any] = {}
    if e.input_shapes:
        args["Input Dims"] = e.input_shapes
        args["Input type"] = e.input_dtypes
    if e.flops:
        args["FLOPs"] = e.flops
    if e.bytes:
        args["Bytes"] = e.bytes
    return args


def chrome_trace(events: list) -> dict:
    pid = os.getpid()
    host = [e for e in events if e.device_type == "CPU"]
    device = [e for e in events if e.device_type != "CPU"]
    tid_of = {t: i for i, t in enumerate(sorted({e.thread for e in host}))}
    trace: list = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "ember (host)"}},
                   {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "args": {"sort_index": -1}}]
    for t, i in tid_of.items():
        trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": f"thread {i} ({t})"}})
    streams = sorted({(e.device_index, e.stream) for e in device})
    stream_tid = {key: n for n, key in enumerate(streams)}
    for index in sorted({i for i, _ in streams}):
        trace.append({"name": "process_name", "ph": "M", "pid": index, "tid": 0,
                      "args": {"name": f"{device[0].device_type} device {index}"}})
    for (index, stream), n in stream_tid.items():
        label = f"stream {stream:#x}" if stream else "stream 0 (default)"
        trace.append({"name": "thread_name", "ph": "M", "pid": index, "tid": n, "args": {"name": label}})
    for e in host:
        trace.append({"name": e.name, "cat": e.category, "ph": "X", "ts": _us(e.start_us), "dur": _us(e.duration_us),
                      "pid": pid, "tid": tid_of[e.thread], "args": _args(e)})
    for flow, e in enumerate(device, start=1):
        tid = stream_tid[(e.device_index, e.stream)]
        args = dict(_args(e), device=e.device_index, stream=e.stream, correlation=flow)
        trace.append({"name": e.name, "cat": e.category, "ph": "X", "ts": _us(e.start_us), "dur": _us(e.duration_us),
                      "pid": e.device_index, "tid": tid, "args": args})
        launch = e.correlation
        if launch is not None:  # an arrow from the host op to its kernel, as torch draws it
            trace.append({"name": "ac2g", "cat": "ac2g", "ph": "s", "id": flow, "ts": _us(launch.start_us),
                          "pid": pid, "tid": tid_of[launch.thread]})
            trace.append({"name": "ac2g", "cat": "ac2g", "ph": "f", "bp": "e", "id": flow, "ts": _us(e.start_us),
                          "pid": e.device_index, "tid": tid})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace}


def write_chrome_trace(events: list, path: str, use_gzip: bool | None = None) -> None:
    """Write ``events`` as a Chrome trace to ``path`` (gzipped when it ends in ``.gz``), atomically."""
    path = os.fspath(path)
    data = json.dumps(chrome_trace(events)).encode()
    if use_gzip or (use_gzip is None and path.endswith(".gz")):
        data = gzip.compress(data)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
