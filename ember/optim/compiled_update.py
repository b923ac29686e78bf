"""An optimizer group's update as one compiled graph: the eager fast path, with no second copy of the math.

The update of a group is ``apply_updates(update, params, grads, states, hp)`` (:mod:`ember.optim.hyper`),
the very function the op-by-op path runs. Here it is traced once with :class:`ember.compile
<ember.graph.compile.CompiledFunction>` and then run as a graph each step:

* **What is an input, what is baked.** The gradients and the group's numeric options (``lr``,
  ``betas``, ``weight_decay``, ...) are graph inputs (the options as 0-d float64 tensors refilled each
  step), so a scheduler's new ``lr`` or fresh ``.grad`` tensors after ``zero_grad()`` run the same
  graph. Parameters and state buffers are lifted graph state: read at each run, written back in
  place. The cache key holds what the graph bakes: which tensors it updates, the entries of each
  state, and the options' *decisions* (booleans, ``None``, which numbers are zero: ``if
  hp.nonzero("weight_decay")`` in an update). Options in the class's ``static_options`` (a loop count)
  are baked and keyed by value. When every parameter of the group counts the same step, the new count
  is one more input (``Hyper.next_step``) and the host writes it into each ``state['step']``: the
  step-dependent scalars are then computed once per group (CSE) rather than once per parameter.
* **Why it is fast.** Fusion turns each parameter's elementwise update into one loop and its bias
  corrections (tensor ops on ``state['step']``) into one small kernel; inside this module fusion
  compiles every group with Numba when it is installed (:class:`~ember.graph.passes.fuse_numba.every_group`),
  because an update runs the same kernels every step and the kernel source does not depend on shapes
  (one compile per dtype and option set). Adam over a 784x512 weight is one pass over memory.
* **When it does not apply.** The first step of each key runs op by op (lazily created state, such as
  SGD's momentum buffer, exists before tracing); an update that reads values (``.item()``) cannot be
  traced: its class sets ``compile_update = False``, and a ``TracingError`` found at trace time makes
  that key run op by op from then on. Parameters off the CPU run op by op for now.

Example:
    >>> import ember
    >>> w = ember.ones(3, requires_grad=True)
    >>> opt = ember.optim.Adam([w], lr=0.1)
    >>> for _ in range(3):
    ...     w.grad = ember.ones(3); opt.step()       # the third step runs the compiled graph
    >>> round(float(w[0]), 4)
    0.7
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from ember import dtypes, interpreters
from ember.creation import tensor
from ember.graph.compile import CompiledFunction
from ember.graph.ir import TracingError
from ember.graph.passes import fuse_numba
from ember.optim import numpy_step
from ember.optim.hyper import Hyper, apply_updates, to_scalar
from ember.tensor import Tensor

#: Compiled group updates kept per optimizer (a key changes when state or option decisions change).
CACHE_LIMIT = 8
_SKIP = ("params", "param_names")


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) or (isinstance(value, Tensor) and value.numel() == 1)


def _decision(value: Any) -> Any:
    """What a graph bakes about an option: booleans/None/strings as they are, numbers as zero or not."""
    if _is_number(value):
        return ("nonzero", to_scalar(value) != 0)
    if isinstance(value, (tuple, list)):
        return tuple(_decision(v) for v in value)
    if value is None or isinstance(value, (bool, str)):
        return value
    return ("id", id(value))


class _Entry:
    """One compiled group update: the traced function and its option inputs."""

    def __init__(self, update: Callable, group: dict, params: list, states: list, static: tuple = (),
                 shared_step: Any = None) -> None:
        # layout: (option, None) for a number, (option, pattern) for a tuple of numbers and Nones (pattern:
        # which places hold numbers); one input per number. Options in ``static`` stay Python values.
        self.layout: list[tuple[str, tuple | None]] = []
        for key, value in group.items():
            if key in _SKIP or key in static:
                continue
            if _is_number(value):
                self.layout.append((key, None))
            elif (isinstance(value, (tuple, list)) and any(_is_number(v) for v in value)
                  and all(v is None or _is_number(v) for v in value)):
                self.layout.append((key, tuple(_is_number(v) for v in value)))
        count = sum(1 if n is None else sum(n) for _, n in self.layout)
        self.inputs = [tensor(0.0, dtype=dtypes.float64) for _ in range(count)]  # CPU, as state['step']
        # The group's step count, when every parameter counts the same one (``shared_step``: its dtype):
        # one input holding the new count, which the host writes into each ``state['step']``, so the
        # step-dependent scalars (Adam's bias corrections) are one expression CSE computes once per group.
        self.step_input = None if shared_step is None else tensor(0.0, dtype=shared_step)
        if self.step_input is not None:
            self.inputs.append(self.step_input)
        self.arrays = [t._data for t in self.inputs]
        self.ran_eagerly = False
        self.kernel: Any = None  # the NumPy-only step that runs instead of the graph (set by CompiledUpdates.run)
        layout, n_inputs, entry = self.layout, len(self.inputs), self

        def compiled_update(*args: Tensor) -> None:
            grads = list(args[n_inputs:])
            if not interpreters.tracing():
                # ember.compile's eager warm-up call: exactly the op-by-op path (it counts the steps too).
                entry.ran_eagerly = True
                apply_updates(update, params, grads, states, Hyper(group))
                return
            values: dict[str, Any] = {}
            k = 0
            for key, pattern in layout:
                if pattern is None:
                    values[key] = args[k]
                    k += 1
                else:
                    items = []
                    for is_number in pattern:
                        items.append(args[k] if is_number else None)
                        k += is_number
                    values[key] = tuple(items)
            step = args[count] if n_inputs > count else None
            apply_updates(update, params, grads, states, Hyper(group, values, step))

        self.fn: CompiledFunction | None = CompiledFunction(
            compiled_update, fallback="raise", measure=False, name=f"{getattr(update, '__qualname__', 'update')}")
        # Once traced, the executable runs directly: this entry's key already pins everything
        # ember.compile's own key checks (the tensors, their shapes and dtypes, grad mode off).
        self.executable: Any = None

    def fill(self, group: dict) -> list:
        """The option inputs, refilled with the group's current numbers."""
        k = 0
        for key, pattern in self.layout:
            value = group[key]
            for v in ((value,) if pattern is None else value):
                if v is not None:
                    self.arrays[k][()] = to_scalar(v)
                    k += 1
        return self.inputs

    def run(self, group: dict, params: list, steps: list) -> bool:
        inputs = self.fill(group)
        new_step = None
        if self.step_input is not None:
            new_step = steps[0]._data + 1  # what state['step'].add_(1) computes, in the step's dtype
            self.arrays[-1][()] = new_step
        if self.executable is not None:  # the key pinned the tensors, shapes and dtypes: run the plan
            self.executable.run(self.arrays + [p.grad._data for p in params])
            if new_step is not None:
                _count_step(steps, new_step)
            return True
        self.ran_eagerly = False
        try:
            with fuse_numba.every_group():
                self.fn(*inputs, *[p.grad for p in params])
        except TracingError:
            self.fn = None  # reads a value while tracing: this key runs op by op (the trace changed nothing)
            return False
        if new_step is not None and not self.ran_eagerly:
            _count_step(steps, new_step)
        last = self.fn.last
        if last is not None and hasattr(last, "executable"):
            self.executable = last.executable
        return True


def _count_step(steps: list, new_step: Any) -> None:
    """Write the group's new step count into every parameter's ``state['step']`` (outside the graph)."""
    for t in steps:
        t._data[()] = new_step
        t._bump()


class CompiledUpdates:
    """The compiled group updates of one optimizer, by key (see the module notes)."""

    def __init__(self) -> None:
        self.cache: OrderedDict = OrderedDict()

    # A cache of traced graphs (closures over this process's buffers): pickled and deep-copied empty, so
    # ``torch.save({'optimizer': opt})`` and ``copy.deepcopy(opt)`` work as in PyTorch; the next step re-traces.
    def __getstate__(self) -> dict:
        return {}

    def __setstate__(self, state: dict) -> None:
        self.cache = OrderedDict()

    def run(self, update: Callable, group: dict, params: list, states: list, static: tuple = (),
            kernel: Any = None) -> bool:
        """Run the group's update compiled; False when it must run op by op instead (then nothing ran).

        ``static``: options whose values the update uses as Python values (``Muon``'s ``ns_steps``, a loop
        count): they are baked into the graph and are part of the key, not inputs. ``kernel``: the update's
        NumPy-only step (:mod:`ember.optim.numpy_kernels`), which runs instead of the graph when numba is not
        installed (decided when the key's entry is made, as the graph's kernels are chosen at trace time)."""
        key = [update, id(group)]
        steps = []
        for p, state in zip(params, states):
            if p._device.type != "cpu":
                return False
            data = p._data
            if data.dtype.kind == "c":  # complex: the optimizer steps its real view op by op
                return False
            key += (id(p), data.shape, data.dtype, p.grad._data.dtype)
            for name, value in state.items():
                key += (name, id(value), value._data.shape) if isinstance(value, Tensor) else (name, value)
            step = state.get("step")
            if isinstance(step, Tensor) and step._data.ndim == 0:
                steps.append(step)
        shared_step = None
        if steps and len(steps) == len(params):
            first = steps[0]._data
            count = float(first)
            if all(s._data.dtype == first.dtype and float(s._data) == count for s in steps):
                shared_step = steps[0].dtype
        key.append(shared_step)
        for name, value in group.items():
            kind = type(value)
            if name in static:
                key.append((name, value))
            elif kind is float or kind is int:
                key.append(value != 0)
            elif kind is bool or value is None:
                key.append(value)
            elif name not in _SKIP:
                key.append(_decision(value))
        key = tuple(key)
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = _Entry(update, group, params, states, static, shared_step)
            if kernel is not None and numpy_step.ENABLED and not fuse_numba.available():
                entry.kernel = kernel
            if len(self.cache) > CACHE_LIMIT:
                self.cache.popitem(last=False)
        if entry.kernel is not None and numpy_step.run(entry.kernel, params, states, group):
            return True
        return entry.fn is not None and entry.run(group, params, steps)
