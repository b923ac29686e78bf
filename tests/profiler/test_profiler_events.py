"""ember.profiler: events present and nested, shapes, schedule, chrome trace, table, trace handler."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.backends import register_backend
from ember.backends.cpu import CPUBackend
from ember.profiler import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,
                            tensorboard_trace_handler)
from ember.profiler import _recorder


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _named(events, name):
    return [e for e in events if e.name == name]


def test_ops_nest_under_record_function_with_shapes():
    x, w = ember.randn(8, 4), ember.randn(4, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        with record_function("my_block"):
            y = x @ w
            y.relu()
    events = prof.events()
    (block,) = _named(events, "my_block")
    (mm,) = _named(events, "matmul")
    assert mm.cpu_parent is block and mm in block.cpu_children
    assert mm.input_shapes == [[8, 4], [4, 3]] and mm.input_dtypes == ["float32", "float32"]
    assert mm.flops == 2 * 8 * 3 * 4
    assert block.start_us <= mm.start_us <= mm.end_us <= block.end_us
    assert block.flops == mm.flops + 8 * 3  # the container sums its subtree (relu: one per element)


def test_autograd_nodes_are_events_holding_their_ops():
    w = ember.randn(5, 3, requires_grad=True)
    x = ember.randn(2, 5)
    with profile(with_flops=True, backward_ops=True) as prof:  # the backward dispatches its ops, as torch's does
        (x @ w).sum().backward()
    events = prof.events()
    nodes = [e for e in events if e.category == "autograd"]
    names = {e.name for e in nodes}
    assert "autograd::engine::evaluate_function: MatmulBackward0" in names
    (mm_node,) = [e for e in nodes if e.name.endswith("MatmulBackward0")]
    child_ops = [c.name for c in mm_node.cpu_children]
    assert "matmul" in child_ops  # the weight gradient x^T @ g runs inside the node
    grad_mm = [c for c in mm_node.cpu_children if c.name == "matmul"][0]
    assert grad_mm.flops == 2 * 5 * 3 * 2


def test_autograd_nodes_run_by_array_rules_carry_their_cost():
    # By default the engine keeps its array rules under a profile (NumPy calls, no op dispatch): the node is one
    # event without children, costed as its ember-op rule's ops: here x^T @ g only (x needs no gradient).
    w = ember.randn(5, 3, requires_grad=True)
    x = ember.randn(2, 5)
    with profile(with_flops=True, profile_memory=True) as prof:
        (x @ w).sum().backward()
    (mm_node,) = [e for e in prof.events() if e.name.endswith("MatmulBackward0")]
    assert mm_node.cpu_children == []
    assert mm_node.flops == 2 * 5 * 3 * 2  # hand count: a (5x2) @ (2x3) product
    assert mm_node.cpu_memory_usage >= 5 * 3 * 4  # the weight gradient, float32
    assert mm_node in prof.events().work_events()


def test_compiled_graph_nodes_are_events():
    w = ember.randn(6, 6)

    def f(x):
        return (x @ w).relu().sum()

    step = ember.compile(f)
    x = ember.randn(4, 6)
    for _ in range(2):
        step(x)  # first call runs eagerly, the second traces
    with profile() as prof:
        step(x)
    events = prof.events()
    runs = _named(events, "graph::run")
    assert runs, [e.name for e in events]
    graph_nodes = [e for e in events if e.category == "graph_node"]
    assert graph_nodes and all(e.cpu_parent is not None and e.cpu_parent.name == "graph::run" for e in graph_nodes)
    mm = [e for e in graph_nodes if "matmul" in e.name]
    assert mm and mm[0].flops == 2 * 4 * 6 * 6


def test_dataloader_waits_and_device_copies_are_events():
    data = ember.data.TensorDataset(ember.randn(12, 3), ember.arange(12))
    if "fakegpu" not in ember.backends._BACKENDS:
        register_backend("fakegpu", type("FakeGPU", (CPUBackend,), {"name": "fakegpu"})())
    with profile() as prof:
        for xb, _ in ember.data.DataLoader(data, batch_size=4):
            moved = xb.to("fakegpu")
            moved.to("cpu")
    events = prof.events()
    waits = _named(events, "enumerate(DataLoader)#__next__")
    assert len(waits) == 3 and all(e.category == "dataloader" for e in waits)
    htod, dtoh = _named(events, "Memcpy HtoD"), _named(events, "Memcpy DtoH")
    assert len(htod) == 3 and len(dtoh) == 3
    assert htod[0].input_shapes == [[4, 3]] and htod[0].bytes == 2 * 4 * 3 * 4


def test_off_means_no_hook_and_nesting_is_refused():
    from ember.ops import dispatch

    assert dispatch.PROFILER is None
    with profile():
        assert dispatch.PROFILER is not None
        with pytest.raises(RuntimeError, match="already running"):
            profile().start()
    assert dispatch.PROFILER is None


def test_schedule_actions_match_torch():
    torch_profiler = pytest.importorskip("torch.profiler")
    ours = schedule(wait=1, warmup=2, active=3, repeat=2, skip_first=1)
    theirs = torch_profiler.schedule(wait=1, warmup=2, active=3, repeat=2, skip_first=1)
    assert [ours(i).name for i in range(16)] == [theirs(i).name for i in range(16)]


def test_schedule_records_only_active_steps_and_calls_handler(tmp_path):
    saved = []
    a = ember.randn(3)
    with profile(schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: saved.append(list(p.events()))) as prof:
        for step in range(6):
            with record_function(f"step{step}"):
                a + 1
            prof.step()
    assert len(saved) == 1
    names = [e.name for e in saved[0] if e.category == "user_annotation"]
    assert names == ["step2", "step3"]  # wait (0), warmup (1) dropped, active 2-3, then nothing


def test_table_and_chrome_trace(tmp_path):
    x = ember.randn(16, 16)
    with profile(record_shapes=True, profile_memory=True, with_flops=True) as prof:
        with record_function("outer"):
            for _ in range(3):
                x @ x
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    for column in ("Self CPU %", "CPU total", "# of Calls", "CPU Mem", "Total MFLOPs", "MFU", "GB/s", "Bound"):
        assert column in table
    row = [line for line in table.splitlines() if line.startswith("matmul")][0]
    assert " 3 " in row and f"{3 * 2 * 16**3 / 1e6:.3f}" in row
    assert "Achieved:" in table and "of peak (MFU)" in table
    grouped = prof.key_averages(group_by_input_shape=True).table()
    assert "[[16, 16], [16, 16]]" in grouped
    with pytest.raises(ValueError, match="unknown sort_by"):
        prof.key_averages().table(sort_by="nope")
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in xs} >= {"outer", "matmul"}
    outer = [e for e in xs if e["name"] == "outer"][0]
    for e in xs:
        if e["name"] == "matmul":
            assert outer["ts"] <= e["ts"] and e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1e-3
            assert e["args"]["Input Dims"] == [[16, 16], [16, 16]] and e["args"]["FLOPs"] == 2 * 16**3


def test_tensorboard_trace_handler_writes_trace(tmp_path):
    with profile(on_trace_ready=tensorboard_trace_handler(str(tmp_path), worker_name="w0")):
        ember.ones(2) * 3
    files = os.listdir(tmp_path)
    assert len(files) == 1 and files[0].startswith("w0.") and files[0].endswith(".pt.trace.json")
    data = json.loads((tmp_path / files[0]).read_text())
    assert any(e.get("name") == "mul" for e in data["traceEvents"])


def test_profile_of_a_training_step_has_forward_backward_and_optimizer():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x, y = ember.randn(5, 4), ember.tensor([0, 1, 0, 1, 1])
    with profile(with_flops=True) as prof:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    summary = prof.summary()
    linear_flops = 2 * 5 * 4 * 8 + 5 * 8 + 2 * 5 * 8 * 2 + 5 * 2
    assert summary.flops > linear_flops and summary.seconds > 0
    assert summary.bound in ("compute", "memory") and 0 < summary.mfu < 1
    assert np.isfinite(summary.bytes_per_s)
