"""``ember.profiler.profile``: torch.profiler's API over ember's hooks.

Example:
    >>> import ember
    >>> from ember.profiler import profile, record_function, ProfilerActivity
    >>> with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
    ...     with record_function("step"):
    ...         loss = (ember.randn(16, 8, requires_grad=True) @ ember.randn(8, 4)).sum()
    ...         loss.backward()
    >>> print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=5))  # doctest: +SKIP
"""
from __future__ import annotations

import enum
import functools
import os
import socket
import time
from typing import Any, Callable, Iterable

from ember.backends import get_backend
from ember.profiler import _recorder as R
from ember.profiler.events import EventList, build_events


class ProfilerActivity(enum.Enum):
    """What to record: ``CPU`` host events; ``CUDA`` also the device side of every op and copy that runs
    on the ``cuda`` device, timed with the backend's events (CUDA events on CuPy, the host clock on the
    stand-in device). ``XPU`` and ``MTIA`` are accepted and record host events only."""

    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"


class ProfilerAction(enum.Enum):
    """What a :func:`schedule` asks for at one step."""

    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """torch.profiler.schedule: skip ``skip_first`` steps, then cycles of ``wait`` idle steps, ``warmup``
    steps recorded and thrown away, ``active`` steps recorded (the trace is handed to
    ``on_trace_ready`` after the last); ``repeat`` cycles (0: until the profile ends).

    Example:
        >>> s = schedule(wait=1, warmup=1, active=2)
        >>> [s(i).name for i in range(4)]
        ['NONE', 'WARMUP', 'RECORD', 'RECORD_AND_SAVE']
    """
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError(f"schedule: need wait, warmup, repeat, skip_first >= 0 and active > 0, got wait={wait}, "
                         f"warmup={warmup}, active={active}, repeat={repeat}, skip_first={skip_first}")
    cycle = wait + warmup + active

    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        phase = step % cycle
        if phase < wait:
            return ProfilerAction.NONE
        if phase < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if phase < cycle - 1 else ProfilerAction.RECORD_AND_SAVE

    return action


def _always_record(step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class profile:
    """Record ops, autograd nodes, compiled-graph nodes, data-loader waits and device copies.

    Keyword arguments follow ``torch.profiler.profile``; ``with_stack`` and ``with_modules`` are
    accepted and ignored. Input shapes and dtypes are captured when ``record_shapes``, ``with_flops``
    or ``profile_memory`` asks (FLOPs, bytes and allocations are computed from them); without any of
    the three a profile records only which op ran when, the cheapest way. Nesting two profiles is an
    error, as in PyTorch.

    ``backward_ops`` (ember's own): the autograd engine computes most float32/float64 CPU backward nodes with
    array rules (NumPy calls, no op dispatch); a profile keeps that path, so such a node is one event (its
    FLOPs, bytes and allocations are those of its op's gradient rule, :mod:`ember.profiler.backward_cost`).
    ``backward_ops=True`` makes the backward dispatch its ops, each an event nested in its node as in torch,
    at the price of the slower path (~5-10% of a step of small ops).
    """

    def __init__(self, *, activities: Iterable[ProfilerActivity] | None = None,
                 schedule: Callable[[int], ProfilerAction] | None = None,
                 on_trace_ready: Callable[["profile"], Any] | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False, with_flops: bool = False,
                 with_modules: bool = False, experimental_config: Any = None, acc_events: bool = False,
                 use_cuda: bool | None = None, backward_ops: bool = False) -> None:
        self.activities = set(activities) if activities is not None else {ProfilerActivity.CPU}
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_flops = with_flops
        self.acc_events = acc_events
        self.backward_ops = backward_ops
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._recorder: R.Recorder | None = None
        self._origin = 0
        self._events: EventList | None = None
        self._running = False

    # ---- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def start(self) -> None:
        if R.CURRENT is not None:
            raise RuntimeError("profile: a profiler is already running on this process; "
                               "stop it before starting another (profiles do not nest)")
        R.CURRENT = self
        self._running = True
        self.step_num = 0
        self._transition(self.schedule(0))

    def stop(self) -> None:
        if not self._running:
            return
        if self.current_action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._save()
        self._stop_recording()
        self._running = False
        R.CURRENT = None

    def step(self) -> None:
        """Mark the end of a training step (advances the schedule)."""
        if not self._running:
            return
        previous = self.current_action
        self.step_num += 1
        if self._recorder is not None:
            self._recorder.trim()
        if previous == ProfilerAction.RECORD_AND_SAVE:
            self._save()
            self._stop_recording()
            self.current_action = ProfilerAction.NONE
        self._transition(self.schedule(self.step_num))

    def _transition(self, action: ProfilerAction) -> None:
        recording = action != ProfilerAction.NONE
        if recording and self._recorder is None:
            self._recorder = self._new_recorder()
            self._origin = time.perf_counter_ns()
            R.attach(self._recorder)
        elif not recording and self._recorder is not None:
            self._stop_recording()
        if self.current_action == ProfilerAction.WARMUP and action in (ProfilerAction.RECORD,
                                                                       ProfilerAction.RECORD_AND_SAVE):
            self._recorder.clear()  # warm-up steps are recorded only to be thrown away
            self._origin = time.perf_counter_ns()
        self.current_action = action

    def _new_recorder(self) -> R.Recorder:
        shapes = bool(self.record_shapes or self.with_flops or self.profile_memory)
        if ProfilerActivity.CUDA in self.activities:
            backend = _cuda_backend()
            if backend is not None:
                recorder = R.DeviceRecorder(backend, "cuda", shapes)
                recorder.backward_ops = self.backward_ops
                return recorder
        return R.Recorder(shapes, self.backward_ops)

    def _stop_recording(self) -> None:
        if self._recorder is not None:
            R.detach(self._recorder)
            self._recorder = None

    def _save(self) -> None:
        rec = self._recorder
        if rec is None:
            return
        wall_us = (time.perf_counter_ns() - self._origin) / 1e3
        device = rec.device_times() if isinstance(rec, R.DeviceRecorder) else ()
        events = build_events(list(rec.records()), self._origin, with_flops=True, device=device)
        events = EventList(events, wall_us, self.profile_memory, self.with_flops, self.record_shapes)
        if self.acc_events and self._events is not None:
            events = EventList(list(self._events) + list(events), (self._events.wall_us or 0) + wall_us,
                               self.profile_memory, self.with_flops, self.record_shapes)
        self._events = events
        rec.clear()
        self._origin = time.perf_counter_ns()
        if self.on_trace_ready is not None:
            self.on_trace_ready(self)

    # ---- results -----------------------------------------------------------------------------------
    def events(self) -> EventList:
        if self._events is None:
            raise RuntimeError("profile: no trace yet - results are available after the profile (or a scheduled "
                               "active window) ends")
        return self._events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0) -> EventList:
        return self.events().key_averages(group_by_input_shape or False, group_by_stack_n)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)

    def summary(self) -> Any:
        """Achieved FLOP/s, MFU, bandwidth and bound over the recorded window (:class:`ember.hardware.Roofline`)."""
        return self.events().summary()


def _cuda_backend() -> Any:
    """The backend serving ``cuda`` (CuPy or the stand-in device), or None when there is no such device."""
    try:
        backend = get_backend("cuda")
    except RuntimeError:
        return None
    return backend if backend.is_available() and backend.device_count() > 0 else None


class record_function:
    """A named range in the profile (context manager or decorator), as torch.profiler.record_function.

    Example:
        >>> with record_function("data prep"):
        ...     pass
    """

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self.args = args
        self._t0 = 0

    def __enter__(self) -> "record_function":
        self._t0 = R._clock() if R.active() is not None else 0
        return self

    def __exit__(self, *exc: Any) -> None:
        hook = R.active()
        if self._t0 and hook is not None:
            hook.span(R.USER, self.name, self._t0)

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name, self.args):
                return fn(*args, **kwargs)

        return wrapper


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False) -> Callable[[profile], None]:
    """An ``on_trace_ready`` that writes ``<dir>/<worker>.<time>.pt.trace.json[.gz]`` (what TensorBoard's
    profiler plugin and Perfetto read)."""
    def handler(prof: profile) -> None:
        name = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        suffix = ".pt.trace.json.gz" if use_gzip else ".pt.trace.json"
        path = os.path.join(dir_name, f"{name}.{time.time_ns() // 1_000_000}{suffix}")
        from ember.profiler.trace import write_chrome_trace

        write_chrome_trace([e for e in prof.events()], path, use_gzip=use_gzip)

    return handler
