"""One training loop profiled as a user would: every kind of event in one trace, with shapes and bytes, nested,
and a Chrome trace that a viewer accepts (checked against the Trace Event Format and Perfetto's nesting rules)."""
from __future__ import annotations

import gzip
import json
import os

import pytest

import ember
import ember.nn as nn
from ember.profiler import ProfilerActivity, profile, record_function, schedule, tensorboard_trace_handler
from chrome_trace_check import check_chrome_trace


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _training(prof=None, steps=4):
    # GELU: a node whose ember-op rule runs (no array rule), so the vjp ops nest in it (checked below)
    model = nn.Sequential(nn.Linear(6, 5), nn.GELU(), nn.Linear(5, 3))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    @ember.compile
    def compiled_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    data = ember.data.TensorDataset(ember.randn(4 * steps, 6), ember.randint(0, 3, (4 * steps,)))
    for i, (x, y) in enumerate(ember.data.DataLoader(data, batch_size=4)):
        with record_function(f"step{i}"):
            if i < 2:  # eager steps (the compiled function also runs eagerly on its first call)
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            else:
                compiled_step(x, y)
            (x.to("cuda") * 2).sum().to("cpu")
        if prof is not None:
            prof.step()


def test_every_kind_of_event_with_shapes_bytes_and_a_valid_trace(tmp_path):
    with ember.testing.standin_cuda(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                                               record_shapes=True, profile_memory=True, with_flops=True) as prof:
        _training()
    events = prof.events()
    by_category: dict = {}
    for e in events:
        by_category.setdefault(e.category, []).append(e)
    assert set(by_category) == {"user_annotation", "dataloader", "cpu_op", "autograd", "graph", "graph_node",
                                "memcpy", "kernel", "gpu_memcpy"}
    assert len(by_category["dataloader"]) == 4
    runs_in = {e.cpu_parent.name for e in by_category["graph"] if e.cpu_parent is not None}
    assert {"step2", "step3"} <= runs_in  # the compiled steps (the optimizer's fused update may add runs)
    linear = [e for e in by_category["cpu_op"] if e.name == "linear" and e.input_shapes[0] == [4, 6]]
    assert linear and all(e.input_shapes == [[4, 6], [5, 6], [5]] for e in linear)
    # 2 FLOPs per multiply-add + the bias; bytes = inputs read + output written once, float32
    assert linear[0].flops == 2 * 4 * 5 * 6 + 4 * 5
    assert linear[0].bytes == 4 * (4 * 6 + 5 * 6 + 5 + 4 * 5)
    assert linear[0].cpu_memory_usage == 4 * 4 * 5
    htod = [e for e in by_category["memcpy"] if e.name == "Memcpy HtoD"]
    assert len(htod) == 4 and all(e.input_shapes == [[4, 6]] and e.bytes == 2 * 4 * 4 * 6 for e in htod)
    for e in by_category["graph_node"]:
        assert e.cpu_parent.name == "graph::run" and e.cpu_parent.cpu_parent.name.startswith("step")
    nodes = by_category["autograd"]
    assert any(c.category == "cpu_op" for n in nodes for c in n.cpu_children)  # vjp ops nest in their node
    for e in events:  # children inside parents, everywhere
        if e.cpu_parent is not None:
            assert e.cpu_parent.start_us <= e.start_us <= e.end_us <= e.cpu_parent.end_us
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    check_chrome_trace(trace)
    args = [e["args"] for e in trace["traceEvents"] if e.get("name") == "linear" and e["ph"] == "X"]
    assert args[0]["Input Dims"] == [[4, 6], [5, 6], [5]] and args[0]["FLOPs"] == 2 * 4 * 5 * 6 + 4 * 5


def test_schedule_with_tensorboard_trace_handler_writes_one_valid_trace_per_window(tmp_path):
    with ember.testing.standin_cuda(), profile(
            schedule=schedule(wait=1, warmup=1, active=1, repeat=2), record_shapes=True,
            on_trace_ready=tensorboard_trace_handler(str(tmp_path), worker_name="rank0", use_gzip=True)) as prof:
        _training(prof, steps=6)
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 2 and all(f.startswith("rank0.") and f.endswith(".pt.trace.json.gz") for f in files)
    for name, step in zip(files, ("step2", "step5")):
        trace = json.loads(gzip.decompress((tmp_path / name).read_bytes()))
        check_chrome_trace(trace)
        annotations = [e["name"] for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
        assert annotations == [step]  # wait, warmup dropped; the active step only


def test_the_checker_rejects_what_viewers_reject():
    good = {"traceEvents": [{"name": "a", "ph": "X", "ts": 0.0, "dur": 5.0, "pid": 1, "tid": 0},
                            {"name": "b", "ph": "X", "ts": 1.0, "dur": 2.0, "pid": 1, "tid": 0}]}
    check_chrome_trace(good)
    misnested = json.loads(json.dumps(good))
    misnested["traceEvents"][1]["dur"] = 4.5  # b ends after a
    with pytest.raises(AssertionError, match="overlaps its parent"):
        check_chrome_trace(misnested)
    with pytest.raises(AssertionError, match="pid/tid"):
        check_chrome_trace({"traceEvents": [{"name": "a", "ph": "X", "ts": 0, "dur": 1, "pid": "x", "tid": 0}]})
    with pytest.raises(ValueError):
        check_chrome_trace({"traceEvents": [{"name": "a", "ph": "X", "ts": float("nan"), "dur": 1, "pid": 1, "tid": 0}]})
