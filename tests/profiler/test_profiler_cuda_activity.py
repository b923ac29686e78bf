"""ProfilerActivity.CUDA: device-side events for ops and host<->device copies, timed with the backend's events.

Run on the stand-in CUDA device (a synchronous device whose events read the host clock), and on a stand-in
whose events read a virtual device clock, to show the device times come from the backend's events.
"""
from __future__ import annotations

import json

import pytest

import ember
from ember.backends import standin
from ember.profiler import ProfilerActivity, profile, record_function
from chrome_trace_check import check_chrome_trace


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _step(x, w):
    with record_function("step"):
        xd = x.to("cuda")
        loss = (xd @ w).relu().sum()
        loss.backward()
        return w.grad.to("cpu")


def _profile_step(**kwargs):
    with ember.testing.standin_cuda():
        w = ember.randn(16, 8, device="cuda", requires_grad=True)
        x = ember.randn(4, 16)
        host = ember.randn(3, 3)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], **kwargs) as prof:
            _step(x, w)
            host @ host  # stays on the CPU: no device event
    return prof


def test_every_device_op_and_copy_has_one_device_event_inside_it():
    prof = _profile_step(record_shapes=True)
    events = prof.events()
    host = [e for e in events if e.device_type == "CPU"]
    device = [e for e in events if e.device_type == "CUDA"]
    ops_on_device = [e for e in host if e.category == "cpu_op" and e.name not in ("reshape", "expand", "permute")
                     and e.input_shapes != [[3, 3], [3, 3]]]
    assert {e.name for e in ops_on_device} == {"matmul", "relu", "sum", "relu_grad"}
    for op in ops_on_device:
        (kernel,) = op.kernels
        assert kernel.category == "kernel" and kernel.name == f"{op.name} (kernel)" and kernel.correlation is op
        # a synchronous device: the work happens inside the host call
        assert op.start_us <= kernel.start_us <= kernel.end_us <= op.end_us
        assert op.self_device_time_total == kernel.duration_us > 0
    views = [e for e in host if e.name in ("reshape", "expand", "permute")]
    assert views and all(not e.kernels for e in views)  # views launch nothing
    (cpu_mm,) = [e for e in host if e.input_shapes == [[3, 3], [3, 3]]]
    assert cpu_mm.kernels == [] and cpu_mm.device_time_total == 0
    copies = [e for e in device if e.category == "gpu_memcpy"]
    assert sorted(e.name for e in copies) == ["Memcpy DtoH (Device -> Host)", "Memcpy HtoD (Host -> Device)"]
    htod = [e for e in copies if "HtoD" in e.name][0]
    assert htod.bytes == 2 * 4 * 16 * 4 and htod.correlation.name == "Memcpy HtoD"
    assert htod.input_shapes == [[4, 16]]
    (step,) = [e for e in host if e.name == "step"]
    assert step.device_time_total == pytest.approx(sum(e.duration_us for e in device))


def test_table_has_cuda_columns_and_sorts_by_device_time():
    prof = _profile_step(with_flops=True)
    averages = prof.key_averages()
    table = averages.table(sort_by="self_cuda_time_total", row_limit=50)
    for column in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"):
        assert column in table
    assert "Self CUDA time total:" in table
    rows = [line.split("  ")[0].strip() for line in table.splitlines()[3:] if line and not line.startswith("-")]
    by_device = sorted(averages, key=lambda r: r.self_device_time_total, reverse=True)
    assert rows[: len(by_device)][:5] == [r.key for r in by_device][:5]
    total = sum(r.self_device_time_total for r in averages if r.device_type == "CUDA")
    kernels = [e for e in prof.events() if e.device_type == "CUDA"]
    assert total == pytest.approx(sum(e.duration_us for e in kernels))


def test_device_times_come_from_the_backends_events(monkeypatch):
    """Events of a device whose clock advances exactly 1 ms per record: every kernel lasts 1 ms."""

    class TickEvent:
        clock = [0.0]

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.enable_timing, self.t = enable_timing, None

        def record(self, stream=None):
            TickEvent.clock[0] += 1.0
            self.t = TickEvent.clock[0]

        def elapsed_time(self, end):
            return end.t - self.t

    monkeypatch.setattr(standin.BACKEND, "new_event", lambda *a, **k: TickEvent(*a, **k), raising=False)
    with ember.testing.standin_cuda():
        a = ember.randn(8, 8, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            (a @ a).exp()
    kernels = [e for e in prof.events() if e.device_type == "CUDA"]
    assert [e.name for e in kernels] == ["matmul (kernel)", "exp (kernel)"]
    assert [e.duration_us for e in kernels] == [pytest.approx(1000.0), pytest.approx(1000.0)]
    # placed on the device clock: origin + elapsed; exp's start event was recorded after matmul's end
    assert kernels[1].start_us - kernels[0].start_us == pytest.approx(2000.0)


def test_without_cuda_activity_or_device_there_are_no_device_events():
    with ember.testing.standin_cuda():
        a = ember.randn(4, 4, device="cuda")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            a @ a
    assert all(e.device_type == "CPU" for e in prof.events())
    assert "Self CUDA" not in prof.key_averages().table()
    a = ember.randn(4, 4)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        a @ a  # a CPU-only program: the CUDA activity finds nothing to time
    assert all(e.device_type == "CPU" for e in prof.events())
    # sort keys written for a GPU fall back to CPU time when there is no device time
    assert prof.key_averages().table(sort_by="cuda_time_total")


def test_chrome_trace_has_device_tracks_and_flow_arrows(tmp_path):
    prof = _profile_step(record_shapes=True)
    path = tmp_path / "cuda_trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    check_chrome_trace(trace)
    kernels = [e for e in trace["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy")]
    assert kernels and all(e["pid"] == 0 and e["args"]["device"] == 0 for e in kernels)
    starts = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"]: e for e in trace["traceEvents"] if e["ph"] == "f"}
    assert set(starts) == set(ends) == {k["args"]["correlation"] for k in kernels}
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert names[0] == "CUDA device 0"


def test_device_rows_are_measured_against_the_device_peak_over_device_time(monkeypatch):
    """With a device clock of exactly 1 ms per kernel, a 64x64 matmul reaches 2*64^3 FLOPs / 1 ms."""

    class TickEvent:
        clock = [0.0]

        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.t = None

        def record(self, stream=None):
            TickEvent.clock[0] += 1.0
            self.t = TickEvent.clock[0]

        def elapsed_time(self, end):
            return end.t - self.t

    from ember import hardware

    peaks = []

    def fake_measure(device="cpu", **kw):
        peaks.append(str(device))
        return hardware.Peak(str(device), f"test {device}", {"float32": 1e10}, 1e10)

    monkeypatch.setattr(hardware, "measure", fake_measure)
    monkeypatch.setattr(standin.BACKEND, "new_event", lambda *a, **k: TickEvent(*a, **k), raising=False)
    with ember.testing.standin_cuda():
        a = ember.randn(64, 64, device="cuda")
        with profile(activities=[ProfilerActivity.CUDA], with_flops=True) as prof:
            a @ a
        table = prof.key_averages().table()
    assert "cuda:0" in peaks  # the device's own peak was looked up (measured once, then cached)
    row = [line for line in table.splitlines() if line.startswith("matmul ")][0]
    rate = 2 * 64**3 / 1e-3
    assert f"{rate / 1e9:.2f}" in row.split() and f"{rate / 1e10:.2%}" in row.split()
    assert "Device: test cuda:0" in table and "Achieved on the device" in table
