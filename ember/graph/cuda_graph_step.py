"""Compiled steps replayed as CUDA graphs: ``ember.compile(step, mode="reduce-overhead")``.

A compiled signature's :class:`~ember.graph.executor.Executable` has static shapes (the cache key
holds them), so its kernels can be captured once and replayed with one launch per step, the launch
overhead of hundreds of small kernels gone (PyTorch's ``reduce-overhead`` mode does the same).
:class:`GraphedExecutable` wraps an executable with the same ``run``:

1. the first run goes kernel by kernel (warm-up: fused kernels compile, cuBLAS makes its handles,
   lazily created buffers exist before anything is captured);
2. the second run copies the arguments into *static input buffers* and captures ``run(static
   inputs)`` on the device's capture stream (nothing executes), then launches the graph once;
3. later runs copy the arguments into the static buffers, launch the graph, bump the version
   counters of the states the step writes, and return copies of the results (the graph's own
   outputs are overwritten by the next launch; PyTorch hands them out and warns, ember copies).

A graph reads its states' memory as it was at capture: when a state tensor is given a new array
(``opt.zero_grad(set_to_none=True)`` outside the step, ``p.data = ...``), the graph is captured
again (at most :data:`RECAPTURES` times, then kernel by kernel). Random numbers (dropout) are
captured too: each random node's kernel reads its seed from a 0-d device array, which the host fills
before every launch from the generator the code named (so each replay samples anew, ``manual_seed``
reproduces a run, and a replay draws the numbers a kernel-by-kernel run would). Capture is not possible,
and the step runs kernel by kernel with the reason in :attr:`GraphedExecutable.reason` (warned once),
when the device cannot capture
(the CPU: torch does not graph CPU code either), an argument is not C-contiguous, or an operation
refuses to be captured (a host sync such as ``.item()``, a data-dependent shape, a host-to-device
copy: the device's error is quoted).

Example (stand-in device):
    >>> import ember
    >>> from ember.testing import standin_cuda
    >>> with standin_cuda():
    ...     w = ember.ones(3, device="cuda", requires_grad=True)
    ...     def step(x):
    ...         loss = (x * w).sum(); loss.backward()
    ...         with ember.no_grad():
    ...             w.sub_(0.1 * w.grad); w.grad = None
    ...         return loss
    ...     f = ember.compile(step, mode="reduce-overhead")
    ...     [round(f(ember.ones(3, device="cuda")).item(), 3) for _ in range(4)]
    [3.0, 2.7, 2.4, 2.1]
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

RECAPTURES = 4  # state arrays replaced this often: the step runs kernel by kernel


class GraphedExecutable:
    """An :class:`~ember.graph.executor.Executable` whose runs replay one captured CUDA graph."""

    def __init__(self, executable: Any, name: str = "compiled step") -> None:
        self.executable = executable
        self.name = name
        self.graph: Any = None
        self.static_inputs: list = []
        self.results: list = []
        self.identity: list = []  # the state arrays the graph captured (read and written)
        self.runs = 0
        self.captures = 0
        self.replays = 0
        self.reason: str | None = None
        self.device = next((v.device for v in executable.graph.values() if v.device is not None), None)
        if self.device is None or self.device.type != "cuda":
            self.reason = f"CUDA graphs replay CUDA work only; this graph runs on {self.device or 'the CPU'}"
            self.backend = None
        else:
            self.backend = self.device.backend
            if not hasattr(self.backend, "capture_begin"):
                self.reason = f"the {self.backend.name} backend cannot capture graphs"
        if self.reason is None and executable.seed_reads and not getattr(self.backend, "device_seeded_rng", False):
            self.reason = (f"the step draws random numbers and the {self.backend.name} backend cannot read seeds "
                           "from device memory (a replay would repeat one sample)")
        self.seeds: list = []  # one 0-d int64 device array per seed the graph reads (written before each launch)

    def __getattr__(self, name: str) -> Any:  # writes, nodes, memory_stats...: the executable's
        executable = self.__dict__.get("executable")
        if executable is None:  # (copy/pickle probe an instance before __init__ ran)
            raise AttributeError(name)
        return getattr(executable, name)

    @property
    def status(self) -> str:
        """One line: replaying a graph, or kernel by kernel and why."""
        if self.reason is not None:
            return f"CUDA graph: off ({self.reason}); kernel by kernel"
        if self.graph is None:
            return "CUDA graph: not captured yet (captured on the second run)"
        return (f"CUDA graph: replayed {self.replays} time(s), captured {self.captures} time(s) "
                f"({len(self.static_inputs)} static inputs)")

    def _states(self) -> list:
        ex = self.executable
        return [t._data for _, t in ex.state_reads] + [t._data for _, t in ex.writes]

    def _off(self, reason: str) -> None:
        self.reason = reason
        self.graph, self.static_inputs, self.results, self.identity = None, [], [], []
        warnings.warn(f"ember.compile({self.name}, mode='reduce-overhead'): {reason}; this signature runs kernel "
                      "by kernel", RuntimeWarning, stacklevel=4)

    def run(self, inputs: Sequence[Any], seed: int | None = None, before_writes: Any = None) -> list:
        ex = self.executable
        self.runs += 1
        if self.reason is not None or seed is not None or before_writes is not None or self.runs == 1:
            return ex.run(inputs, seed, before_writes)
        if self.graph is not None:
            states = self._states()
            if len(states) != len(self.identity) or any(a is not b for a, b in zip(states, self.identity)):
                if self.captures >= RECAPTURES:
                    self._off(f"state tensors were given new arrays between calls {self.captures} times (e.g. "
                              "zero_grad(set_to_none=True) or p.data = ... outside the step)")
                    return ex.run(inputs)
                self.graph = None
        if self.graph is None:
            return self._capture(inputs)
        for static, new in zip(self.static_inputs, inputs):
            if static is not new:
                static[...] = new
        self._fresh_seeds()
        self.graph.replay()
        self.replays += 1
        self._bump()
        return [r.copy() if self.backend.is_array(r) else r for r in self.results]

    def _capture(self, inputs: Sequence[Any]) -> list:
        ex, backend = self.executable, self.backend
        if any(backend.is_array(a) and not a.flags.c_contiguous for a in inputs):
            self._off("an argument is not C-contiguous (the static input buffers are)")
            return ex.run(inputs)
        xp = backend.xp
        static = [xp.empty(a.shape, dtype=a.dtype) if backend.is_array(a) else a for a in inputs]
        for s, a in zip(static, inputs):
            if backend.is_array(a):
                s[...] = a
        # Random nodes read their seed from device memory during the capture (their kernels then read it at
        # each replay); the host writes a fresh seed from the same generator before every launch.
        self.seeds = [xp.zeros((), dtype=np.int64) for _ in ex.seed_reads]
        for (_, tensor), seed in zip(ex.seed_reads, self.seeds):
            tensor.draw = (lambda s: lambda: s)(seed)  # (an instance attribute: the class's draw is restored)
        backend.synchronize(None)
        backend.capture_begin()
        try:
            results = ex.run(static)
        except Exception as error:  # noqa: BLE001 - a refused operation: report it, run this call kernel by kernel
            backend.capture_abort()
            self._unpatch_seeds()
            self._off(f"capture failed: {type(error).__name__}: {error}")
            return ex.run(inputs)
        self._unpatch_seeds()
        try:
            graph = backend.capture_end()
        except Exception as error:  # noqa: BLE001 - the device invalidated the capture
            self._off(f"capture failed: {type(error).__name__}: {error}")
            return ex.run(inputs)
        # The capture ran the step's host side once (the version bumps, p.grad handed its new array): the
        # launch below is its device side.
        self.graph, self.static_inputs, self.results = graph, static, list(results)
        self.identity = self._states()
        self.captures += 1
        self._fresh_seeds()
        graph.replay()
        return [r.copy() if backend.is_array(r) else r for r in self.results]

    def _unpatch_seeds(self) -> None:
        for _, tensor in self.executable.seed_reads:
            tensor.__dict__.pop("draw", None)

    def _fresh_seeds(self) -> None:
        """This launch's seeds, drawn on the host from each seed's generator as a kernel-by-kernel run draws them
        (so ``manual_seed`` reproduces a replayed step, and each replay samples anew), copied into the device
        memory the captured random kernels read."""
        for (_, tensor), seed in zip(self.executable.seed_reads, self.seeds):
            seed[...] = self.backend.asarray(np.asarray(tensor.draw(), dtype=np.int64))

    def _bump(self) -> None:
        """The version counters a run bumps (Executable._write_back does it on kernel-by-kernel runs)."""
        for (_, tensor), count in zip(self.executable.writes, self.executable.write_bumps):
            tensor._bump()
            if count > 1:
                tensor._vc[0] += count - 1
