"""ember.profiler: torch.profiler's names over ember's dispatch, autograd and graph executor.

Every op dispatch, autograd node, compiled-graph node, DataLoader wait and host<->device copy is an
event with its input shapes, FLOPs and bytes (from the op records). Tables and reports state the
achieved FLOP/s, the fraction of this machine's measured peak (MFU), the achieved bandwidth and the
bound that applies (:mod:`ember.hardware`). Off, it costs one global read per op.

Example:
    >>> import ember
    >>> from ember.profiler import profile, ProfilerActivity
    >>> with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
    ...     _ = ember.randn(32, 32) @ ember.randn(32, 32)
    >>> [e.name for e in prof.events() if e.category == "cpu_op"][-1]
    'matmul'
"""
from ember.profiler.events import EventList, FunctionEvent, FunctionEventAvg
from ember.profiler.profiler import (ProfilerAction, ProfilerActivity, profile, record_function, schedule,
                                     tensorboard_trace_handler)

__all__ = ["profile", "record_function", "schedule", "tensorboard_trace_handler", "ProfilerActivity",
           "ProfilerAction", "EventList", "FunctionEvent", "FunctionEventAvg"]
