"""Events and streams for backends that run synchronously (the CPU, the stand-in device).

``ember.cuda.Event``/``Stream`` delegate to the backend serving ``cuda``. The CuPy backend returns
CUDA events and streams; a backend whose work is done when its call returns uses these: an event
records the host clock (after :meth:`Backend.synchronize`), a stream is a name with nothing queued.
So code written for the GPU (timing with events, copies on a side stream) runs unchanged on the
stand-in device in tests.

Example:
    >>> start, end = HostEvent(enable_timing=True), HostEvent(enable_timing=True)
    >>> start.record(); end.record()
    >>> start.elapsed_time(end) >= 0.0
    True
"""
from __future__ import annotations

import time
from typing import Any


class HostStream:
    """A stream of a synchronous device: everything on it is already done."""

    def __init__(self, index: int = 0, priority: int = 0) -> None:
        self.device_index = index
        self.priority = priority

    def synchronize(self) -> None:
        return None

    def query(self) -> bool:
        return True

    def wait_event(self, event: Any) -> None:
        return None

    def wait_stream(self, stream: Any) -> None:
        return None

    def record_event(self, event: Any = None) -> "HostEvent":
        event = event if event is not None else HostEvent()
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<ember.cuda.Stream device={self.device_index} (synchronous)>"


class HostEvent:
    """A point in time on a synchronous device; ``elapsed_time`` in milliseconds, as CUDA events."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        self.enable_timing = enable_timing
        self._time: float | None = None
        self._ns: int | None = None

    def record(self, stream: Any = None) -> None:
        self._ns = time.perf_counter_ns()
        self._time = self._ns / 1e9

    def host_time_ns(self) -> int | None:
        """When the event was recorded on the host's ``perf_counter_ns`` clock: on a synchronous device that
        is the device time itself (the profiler places kernels with it, exactly inside their host call)."""
        return self._ns

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        return None

    def wait(self, stream: Any = None) -> None:
        return None

    def elapsed_time(self, end_event: "HostEvent") -> float:
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Event.elapsed_time: both events must be created with enable_timing=True")
        if self._time is None or end_event._time is None:
            raise RuntimeError("Event.elapsed_time: both events must be recorded first (call record())")
        return (end_event._time - self._time) * 1000.0
