"""Chrome trace export: the JSON ``chrome://tracing`` and https://ui.perfetto.dev open.

Each event is a complete event (``"ph": "X"``) with its start and duration in microseconds, its
category (``cpu_op``, ``autograd``, ``graph_node``, ``user_annotation``, ``dataloader``, ``memcpy``)
and ``args`` holding the input shapes and dtypes, FLOPs and bytes. Written atomically.

Example:
    >>> import ember, json, tempfile, os
    >>> from ember.profiler import profile
    >>> with profile() as prof:
    ...     _ = ember.ones(3) + 1
    >>> path = os.path.join(tempfile.mkdtemp(), "t.json"); prof.export_chrome_trace(path)
    >>> json.load(open(path))["traceEvents"][-1]["name"]
    'add'
"""
from __future__ import annotations

import gzip
import json
import os
from typing import Any


def chrome_trace(events: list) -> dict:
    pid = os.getpid()
    threads = sorted({e.thread for e in events})
    tid_of = {t: i for i, t in enumerate(threads)}
    trace: list = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "ember"}}]
    for t, i in tid_of.items():
        trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": i, "args": {"name": f"thread {i} ({t})"}})
    for e in events:
        args: dict[str, Any] = {}
        if e.input_shapes:
            args["Input Dims"] = e.input_shapes
            args["Input type"] = e.input_dtypes
        if e.flops:
            args["FLOPs"] = e.flops
        if e.bytes:
            args["Bytes"] = e.bytes
        trace.append({"name": e.name, "cat": e.category, "ph": "X", "ts": round(e.start_us, 3),
                      "dur": round(e.cpu_time_total, 3), "pid": pid, "tid": tid_of[e.thread], "args": args})
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
