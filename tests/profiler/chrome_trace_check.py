"""A checker for Chrome trace JSON as Perfetto's and chrome://tracing's importers read it.

Written from the Trace Event Format document (the JSON object form, complete ``X`` events, metadata
``M`` events, flow ``s``/``f`` events) and the constraints Perfetto's JSON importer puts on slices:
timestamps in microseconds, whole pids and tids, slices on one track (pid, tid) strictly nested
(a slice that ends after its parent is reported as a misnested import error), a flow's ends bound
to a slice that encloses their timestamp on their track. Used by the profiler tests.
"""
from __future__ import annotations

import json
import math

_METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
             "thread_sort_index": "sort_index", "process_labels": "labels"}


def _ns(us: float) -> int:
    return round(us * 1000)


def check_chrome_trace(trace: dict) -> None:
    """Raise AssertionError naming the first event that a trace viewer would reject or misplace."""
    json.dumps(trace, allow_nan=False)  # NaN / Infinity are not JSON: viewers refuse the file
    assert isinstance(trace, dict) and isinstance(trace.get("traceEvents"), list), "need {'traceEvents': [...]}"
    assert trace.get("displayTimeUnit", "ms") in ("ms", "ns")
    tracks: dict = {}
    flows: dict = {}
    for i, e in enumerate(trace["traceEvents"]):
        where = f"event {i} {e!r:.200}"
        assert isinstance(e, dict) and isinstance(e.get("ph"), str), where
        assert isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), f"{where}: pid/tid must be ints"
        assert isinstance(e.get("name"), str), f"{where}: name must be a string"
        if "args" in e:
            assert isinstance(e["args"], dict), where
        ph = e["ph"]
        if ph == "M":
            key = _METADATA.get(e["name"])
            assert key is not None and key in e.get("args", {}), f"{where}: unknown metadata or missing args.{key}"
        elif ph == "X":
            for field in ("ts", "dur"):
                assert isinstance(e.get(field), (int, float)) and math.isfinite(e[field]), f"{where}: {field}"
            assert e["ts"] >= 0 and e["dur"] >= 0, f"{where}: negative time"
            if "cat" in e:
                assert isinstance(e["cat"], str), where
            tracks.setdefault((e["pid"], e["tid"]), []).append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]))
        elif ph in ("s", "t", "f"):
            assert "id" in e and isinstance(e.get("cat"), str) and isinstance(e.get("ts"), (int, float)), where
            if ph == "f":
                assert e.get("bp") == "e", f"{where}: a flow end binds to its enclosing slice with bp='e'"
            flows.setdefault((e["cat"], e["id"]), []).append(e)
        else:
            raise AssertionError(f"{where}: phase {ph!r} not produced by the profiler")
    for track, slices in tracks.items():
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack: list = []
        for start, end, name in slices:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack:
                assert end <= stack[-1][1], (f"track {track}: {name!r} [{start}, {end}] ns overlaps its parent "
                                             f"{stack[-1][2]!r} [{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((start, end, name))
    for key, ends in flows.items():
        phases = sorted(e["ph"] for e in ends)
        assert phases[0] == "f" and phases[-1] == "s" and len(phases) == 2, f"flow {key}: needs one s and one f"
        for e in ends:
            slices = tracks.get((e["pid"], e["tid"]), [])
            t = _ns(e["ts"])
            assert any(s <= t <= f for s, f, _ in slices), f"flow {key}: {e['ph']} at {t} ns is in no slice of its track"
