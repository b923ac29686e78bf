"""``torch.autograd.profiler``: the older spelling of the profiler, which many scripts still use.

``profile(use_cuda=..., record_shapes=..., with_flops=..., profile_memory=...)`` is
:class:`ember.profiler.profile` with torch's legacy arguments (``enabled=False`` records nothing and, as
torch's, binds ``None`` in ``with ... as prof``;
``use_cuda=True`` or ``use_device="cuda"`` adds device activity), and ``function_events`` /
``self_cpu_time_total`` as torch's legacy object has them. ``record_function`` is the same range as
``ember.profiler.record_function``.

Example:
    >>> import ember
    >>> from ember.autograd.profiler import profile, record_function
    >>> with profile(record_shapes=True) as prof:
    ...     with record_function("double"):
    ...         _ = ember.ones(3) * 2
    >>> [e.name for e in prof.function_events]
    ['double', 'mul']
"""
from __future__ import annotations

from typing import Any

from ember.profiler.events import EventList
from ember.profiler.profiler import ProfilerActivity, record_function
from ember.profiler.profiler import profile as _profile

__all__ = ["profile", "record_function"]


class profile(_profile):
    """torch.autograd.profiler.profile (see the module docstring)."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: str | None = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True, experimental_config: Any = None, acc_events: bool = False) -> None:
        device = use_cuda or str(use_device or "").startswith("cuda")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device else [])
        super().__init__(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack, with_flops=with_flops, with_modules=with_modules,
                         experimental_config=experimental_config, acc_events=acc_events)
        self.enabled = enabled

    def __enter__(self) -> "profile | None":
        if not self.enabled:
            return None  # as torch: `with profile(enabled=False) as prof` binds None
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.stop()

    def __str__(self) -> str:
        """As torch's legacy profiler: printing it prints its table."""
        if self._events is None:
            return "<unfinished torch.autograd.profile>"
        return str(self.function_events)

    @property
    def function_events(self) -> EventList:
        """Every recorded event (torch's legacy name for ``events()``)."""
        return self.events()

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds of CPU time over all events, each counted once (its own time, children excluded)."""
        return sum(e.self_cpu_time_total for e in self.events())

    def table(self, *args: Any, **kwargs: Any) -> str:
        """``key_averages().table(...)``, as the legacy object offers directly."""
        return self.key_averages().table(*args, **kwargs)

    def total_average(self) -> Any:
        return self.events().total_average()
