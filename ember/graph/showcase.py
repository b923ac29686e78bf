"""Show the gain of ``ember.compile`` on the lectures' two-layer-net training step.

``showcase()`` times the same step eagerly and compiled and prints both (the CLI wires it in as
``ember bench``); it returns the timings so callers can format them their own way.

Example:
    >>> result = showcase(steps=3, verbose=False)
    >>> sorted(result)
    ['compiled_mfu', 'compiled_us', 'cpu_share', 'eager_mfu', 'eager_us', 'max_weight_difference', 'speedup', 'trace_seconds']
"""
from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
from ember import hardware
from ember.profiler import profile
import ember


def _setup(seed: int = 0, n: int = 64, d_in: int = 1000, hidden: int = 100, d_out: int = 10) -> tuple:
    rng = np.random.RandomState(seed)
    x = ember.tensor(rng.randn(n, d_in).astype(np.float32))
    y = ember.tensor(rng.randn(n, d_out).astype(np.float32))
    w1 = ember.tensor(rng.randn(d_in, hidden).astype(np.float32), requires_grad=True)
    w2 = ember.tensor(rng.randn(hidden, d_out).astype(np.float32), requires_grad=True)
    return x, y, w1, w2


def two_layer_step(lib: Any, w1: Any, w2: Any, lr: float = 1e-6) -> Any:
    """The lectures' two-layer-net training step (autograd + manual SGD) as a closure over the weights.

    ``lib`` is ``ember`` or ``torch``: the same code runs on both (benchmarks compare them with it).

    Example:
        >>> import ember
        >>> w1 = ember.ones(3, 2, requires_grad=True); w2 = ember.ones(2, 1, requires_grad=True)
        >>> step = two_layer_step(ember, w1, w2, lr=0.01)
        >>> round(step(ember.ones(4, 3), ember.zeros(4, 1)).item(), 3)
        144.0
    """

    def step(x: Any, y: Any) -> Any:
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with lib.no_grad():
            w1.sub_(lr * w1.grad)  # the lectures' `w1 -= ...`, spelled for a closure
            w2.sub_(lr * w2.grad)
            w1.grad.zero_()
            w2.grad.zero_()
        return loss

    return step


def _interleaved_medians_us(runs: dict, steps: int, burst: int = 5) -> dict:
    """Median microseconds per step of each ``name: (fn, args)``, timed in alternating bursts of ``burst``
    steps (A, B, A, B, ...): on a machine shared with other work, a slow stretch hits both alike instead
    of whichever happened to run then (timing all of A, then all of B, once read 0.002x on a busy machine)."""
    times: dict = {name: [] for name in runs}
    for _ in range(max(1, steps // burst)):
        for name, (fn, args) in runs.items():
            for _ in range(burst):
                start = time.perf_counter()
                fn(*args)
                times[name].append(time.perf_counter() - start)
    return {name: float(np.median(t) * 1e6) for name, t in times.items()}


def showcase(steps: int = 100, verbose: bool = True) -> dict:
    """Time eager vs compiled for the same training step; print and return the numbers."""
    x, y, w1, w2 = _setup()
    eager = two_layer_step(ember, w1, w2)
    xc, yc, w1c, w2c = _setup()
    compiled = ember.compile(two_layer_step(ember, w1c, w2c))
    compiled(xc, yc)
    eager(x, y)
    compiled(xc, yc)  # traced here
    eager(x, y)
    wall, cpu = time.perf_counter(), time.process_time()
    medians = _interleaved_medians_us({"eager": (eager, (x, y)), "compiled": (compiled, (xc, yc))}, steps)
    cpu_share = (time.process_time() - cpu) / max(time.perf_counter() - wall, 1e-9)  # all threads, BLAS's too
    eager_us, compiled_us = medians["eager"], medians["compiled"]
    diff = float(np.abs(w1.detach().numpy() - w1c.detach().numpy()).max())
    result = {"eager_us": eager_us, "compiled_us": compiled_us, "speedup": eager_us / compiled_us,
              "trace_seconds": compiled.last.trace_seconds, "max_weight_difference": diff, "cpu_share": cpu_share}
    lines = _rooflines(eager, compiled, x, y, xc, yc, eager_us, compiled_us)
    result.update({f"{k}_mfu": r.mfu for k, r in lines.items()})
    if verbose:
        print("two-layer net training step (N=64, D_in=1000, H=100, D_out=10, float32)")
        print(f"  eager     {eager_us:9.1f} us/step   {_line(lines['eager'])}")
        print(f"  compiled  {compiled_us:9.1f} us/step   {_line(lines['compiled'])}")
        print(f"            ({result['speedup']:.2f}x faster; trace + passes {result['trace_seconds'] * 1000:.0f} ms once)")
        print(f"  a step is {lines['eager'].flops / 1e6:.1f} MFLOP; peak of this machine: {hardware.peak()}")
        print(f"  weights agree to {diff:.1e} after {max(1, steps // 5) * 5 + 2} steps each")
        print(f"  compiled graph: {compiled.graph.summary()}")
        if cpu_share < 0.5:
            print(f"  note: this process got the CPU for only {cpu_share:.0%} of the time it was timed{_load()}: other "
                  f"work was running, so these times are the busy machine's; run again on a quiet machine")
    return result


def _rooflines(eager: Any, compiled: Any, x: Any, y: Any, xc: Any, yc: Any, eager_us: float,
               compiled_us: float) -> dict:
    """Achieved FLOP/s, MFU, bandwidth and bound of each step: FLOPs are the model's (counted on the eager
    step), bytes each run's own (fusion moves less), over the measured step time."""

    def work(fn: Any, a: Any, b: Any) -> tuple:
        with profile(with_flops=True) as prof:
            fn(a, b)
        events = prof.events().work_events()
        return sum(e.flops for e in events), sum(e.bytes for e in events)

    flops, eager_bytes = work(eager, x, y)
    _, compiled_bytes = work(compiled, xc, yc)
    return {"eager": hardware.roofline(flops, eager_bytes, eager_us * 1e-6),
            "compiled": hardware.roofline(flops, compiled_bytes or eager_bytes, compiled_us * 1e-6)}


def _load() -> str:
    try:
        return f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    except (AttributeError, OSError):  # not on every platform
        return ""


def _line(r: Any) -> str:
    return (f"{r.flops_per_s / 1e9:6.2f} GFLOP/s = {r.mfu:5.1%} MFU, {r.bytes_per_s / 1e9:5.2f} GB/s, "
            f"{r.bound}-bound ({r.attained:.0%} of that roof)")


if __name__ == "__main__":
    showcase()
