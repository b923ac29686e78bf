"""Formatting the profiler's table (PyTorch's columns, plus the roofline ones).

Example:
    >>> import ember
    >>> from ember.profiler import profile
    >>> with profile() as prof:
    ...     _ = ember.ones(4) * 2
    >>> "Self CPU time total" in prof.key_averages().table()
    True
"""
from __future__ import annotations

from typing import Any
from ember import hardware


def _time(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3f}s"
    if abs(us) >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def _mem(b: float) -> str:
    for unit, size in (("Gb", 2**30), ("Mb", 2**20), ("Kb", 2**10)):
        if abs(b) >= size:
            return f"{b / size:.2f} {unit}"
    return f"{int(b)} b"


def _rate(x: float, unit: str) -> str:
    return f"{x / 1e9:.2f}" if x else "--"


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def format_table(rows: list, events: Any, header: str | None, name_width: int, shapes_width: int,
                 with_shapes: bool) -> str:
    peak = hardware.peak()
    source = getattr(events, "source", events)  # the events behind averaged rows
    total_self = sum(r.self_cpu_time_total for r in rows) or 1.0
    all_self = sum(getattr(e, "self_cpu_time_total", 0.0) for e in events) or total_self
    columns = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    # torch's footer: device time is the sum over device-side events (kernels, copies) only
    all_device = sum(getattr(e, "self_device_time_total", 0.0) for e in events if getattr(e, "device_type", "CPU") != "CPU")
    with_device = all_device > 0
    device_peak = None
    if with_device:
        columns += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
        if events.with_flops:
            try:
                device_peak = hardware.peak(source.device_name())
            except RuntimeError:  # the device is gone (a table printed after the stand-in was switched off)
                device_peak = None
    if events.profile_memory:
        columns += ["CPU Mem", "Self CPU Mem"]
    columns += ["# of Calls"]
    if with_shapes:
        columns += ["Input Shapes"]
    if events.with_flops:
        columns += ["Total MFLOPs", "GFLOP/s", "MFU", "GB/s", "Bound"]
    lines = []
    for r in rows:
        name = _shorten(r.key, name_width)
        cells = [name, f"{100 * r.self_cpu_time_total / all_self:.2f}%", _time(r.self_cpu_time_total),
                 f"{100 * r.cpu_time_total / all_self:.2f}%", _time(r.cpu_time_total), _time(r.cpu_time)]
        if with_device:
            cells += [_time(r.self_device_time_total), f"{100 * r.self_device_time_total / all_device:.2f}%",
                      _time(r.device_time_total), _time(r.device_time)]
        if events.profile_memory:
            cells += [_mem(r.cpu_memory_usage), _mem(r.self_cpu_memory_usage)]
        cells += [str(r.count)]
        if with_shapes:
            cells += [_shorten(str(r.input_shapes), shapes_width)]
        if events.with_flops:
            on_device = device_peak is not None and r.device_time_total > 0 and r.device_type == "CPU"
            if (r.flops or r.bytes) and (r.cpu_time_total > 0 or on_device):
                # Work that ran on the device is measured against the device's roofs over its device time.
                roof, seconds = (device_peak, r.device_time_total / 1e6) if on_device else (peak, r.cpu_time_total / 1e6)
                line = hardware.Roofline(r.flops, r.bytes, seconds, roof.flops_for(r.dtype or "float32"), roof.bandwidth)
                # Tiny calls far below their roof spend their time in Python dispatch (or kernel launches), not
                # in the kernel.
                overhead = line.attained < 0.1 and seconds / max(r.count, 1) < 50e-6
                bound = "overhead" if overhead else f"{line.bound} {min(line.attained, 9.99):.0%}"
                cells += [f"{r.flops / 1e6:.3f}", _rate(line.flops_per_s, "F"), f"{line.mfu:.2%}",
                          _rate(line.bytes_per_s, "B"), bound]
            else:
                cells += ["--", "--", "--", "--", "--"]
        lines.append(cells)
    widths = [max(len(c), *(len(row[i]) for row in lines)) if lines else len(c) for i, c in enumerate(columns)]
    sep = "  ".join("-" * w for w in widths)

    def fmt(cells: list) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = []
    if header:
        out.append(header)
    out += [sep, fmt(columns), sep] + [fmt(cells) for cells in lines] + [sep]
    out.append(f"Self CPU time total: {_time(all_self)}")
    if with_device:
        out.append(f"Self CUDA time total: {_time(all_device)}")
    if events.with_flops:
        summary = source.summary()
        out.append(f"Machine: {peak}")
        out.append(f"Achieved: {summary}")
        if device_peak is not None:
            out.append(f"Device: {device_peak}")
            device = source.device_summary()
            if device is not None:
                out.append(f"Achieved on the device (over its busy time): {device}")
        out.append("Bound: the roof (compute or memory) that caps each row's FLOPs/byte, and the share of it reached; "
                   "'overhead' = calls under 50 us reaching <10% of it (time in Python dispatch, not in the kernel)")
    return "\n".join(out) + "\n"
