"""``ember.compile``: trace a function (or module) into a graph, optimize it, run it as one plan.

Decisions (and why):

* **What is traced.** Tensor arguments (anywhere in args/kwargs lists, tuples, dicts) become graph
  inputs. Tensors the function reaches otherwise - parameters, ``.grad``, optimizer buffers - are
  lifted to graph *state*: read at the start of each run, and, when the step writes them
  (``p -= lr * p.grad``, ``zero_grad``, momentum buffers, BatchNorm statistics), written back in
  place after each run. A whole training step (forward, ``loss.backward()``, ``optimizer.step()``,
  ``zero_grad()``) therefore compiles into one graph.
* **Cache key.** Input shapes, dtypes, devices and requires_grad, non-tensor arguments (by value,
  or identity when unhashable), grad mode, and the ``training`` flag, changed attributes and hooks of every
  module reachable from the function (its closure and globals, what namespaces there hold, or the module
  itself), and the Python values its code reads (:mod:`ember.graph.guards`: globals and closure variables of
  the function and the user functions it calls, two levels into containers and plain objects). A new key
  retraces; a trace that changes those values (a Python side effect) runs that signature eagerly.
* **Warm-up.** Each new key first runs eagerly ``warmup`` times (default 1), then traces. Lazily
  created state (momentum buffers, ``p.grad``) is made by Python ``if`` statements on the first
  step; tracing the second step sees it and records the steady-state step.
* **Data-dependent control flow.** ``.item()``, ``bool(x)``, ``if x > 0`` and ``x.numpy()``
  raise :class:`~ember.graph.ir.TracingError` while tracing. With ``fallback="eager"`` (default)
  the trace is abandoned (every lifted tensor restored), a warning is printed once and that key
  always runs eagerly; with ``fallback="raise"`` the error propagates.
* **Random ops.** ``rand``/``randn``/``randint``/``randperm``/``bernoulli``/``multinomial`` and
  dropout (every Transformer) become ``random_*`` nodes (:mod:`ember.graph.rng`): each call of the
  compiled function draws one fresh seed from ember's default generator (or the ``generator=``
  the code passed) and each node samples from ``(seed, node stream)``. So successive calls differ,
  ``ember.manual_seed(s)`` makes compiled runs reproducible, and a dropout mask is one value that
  forward and backward share. Compiled samples follow the same distributions as eager but are not
  the same numbers (as with ``torch.compile``): see :mod:`ember.graph.rng` for why. In-place fills
  (``normal_``, ``uniform_``...) and ``ember.nn.init`` still raise TracingError (eager fallback).
* **Never slower than eager.** A compiled whole step (one that calls ``backward()`` itself, or has
  no autograd outputs) is timed against eager on real calls: pairs of compiled and eager calls,
  each on the wall and the CPU clock, decided by the median ratio over the pairs, re-checked after
  50 and 500 more calls (:mod:`ember.graph.speed_trial` says why each of these). When the graph is
  slower on both clocks, or does not beat eager by 2% on either (a tie: nothing to win), that signature
  runs eagerly until a re-check says otherwise;
  ``eager_reason`` (also the first line of ``explain()``) says so with the figures, and the first
  such decision is logged once as a WARNING on the ``ember.compile`` logger. Why measure instead of
  predicting: whether a graph wins depends on the machine (cores, BLAS, numba present) and on how
  much of the step is a few big GEMMs that no graph pass can speed up, so a cost model would be
  wrong in exactly the cases that matter. Graphs with random nodes skip the trial (eager and
  compiled draw different numbers, so alternating would change what a seeded run sees), as do
  autograd-node calls (their backward runs later, outside the call). ``ember.compile(fn,
  measure=False)`` always runs the graph.
* **What is baked.** Python numbers computed during the trace (a learning rate, a step count
  read as a Python int) are constants of the graph; the cache key guards where they come from (an
  optimizer's hyperparameters, module attributes, the globals :mod:`ember.graph.guards` watches).
* **Autograd.** When grad mode is on and a result requires grad (it depends on an argument or a
  parameter that does) and the function did not consume its graph itself (no ``backward()``
  inside), the call becomes one autograd node, as with ``torch.compile``: the forward graph also
  returns the values backward needs, and a backward graph, built from the trace by the ops' vjp
  rules and optimized with it, runs when ``loss.backward()`` reaches the node
  (:mod:`ember.graph.compiled_autograd`). Under ``no_grad`` (its own cache key) the plain forward
  runs. A training step that calls ``backward()`` compiles whole and returns results without
  history, as before. Freezing or unfreezing a parameter later retraces. A compiled function
  called while another one is traced is inlined into that trace.

Example:
    >>> import ember
    >>> w = ember.ones(3, requires_grad=True)
    >>> @ember.compile
    ... def step(x):
    ...     loss = (x * w).sum()
    ...     loss.backward()
    ...     with ember.no_grad():
    ...         w.sub_(0.1 * w.grad)
    ...         w.grad = None
    ...     return loss
    >>> [round(step(ember.ones(3)).item(), 3) for _ in range(3)]
    [3.0, 2.7, 2.4]
"""
from __future__ import annotations

import logging
import time
import warnings
from typing import Any, Callable, Sequence

from ember import dtypes, interpreters
from ember.amp.state import STATE as _AUTOCAST
from ember.autograd import grad_mode
from ember.graph.builder import Tracer
from ember.graph.cuda_graph_step import GraphedExecutable
from ember.graph.compiled_autograd import STALE, CompiledAutograd, build_backward, split
from ember.graph.executor import Executable, _Overlaps
from ember.graph import compile_options, grad_binding, guards
from ember.graph.dynamo_errors import FailOnRecompileLimitHit, Unsupported
from ember.graph.ir import Graph, TracingError
from ember.graph.passes import ALL_PASSES, fuse as fuse_pass, run_passes
from ember.graph import speed_trial
from ember.graph.speed_trial import SpeedTrial
from ember.nn.modules.module import HOOK_CHANGES as _HOOK_CHANGES
from ember.tensor import LAYOUT_CHANGES as _LAYOUT_CHANGES, Tensor

_EAGER = object()
_FLAT_STRUCTURES: dict[int, Any] = {}


# ---- pytrees of arguments and results --------------------------------------------------------------
def flatten(obj: Any, leaves: list) -> Any:
    """Collect tensors of ``obj`` into ``leaves``; return a hashable structure to rebuild it."""
    if isinstance(obj, Tensor):
        if obj.is_sparse:  # a sparse COO tensor (ember/sparse/coo.py): its indices and values are the leaves
            return ("S", type(obj), obj.shape, obj.is_coalesced(), flatten(obj._indices(), leaves),
                    flatten(obj._values(), leaves))
        leaves.append(obj)
        return ("T",)
    if type(obj) is tuple or type(obj) is list:
        return (type(obj).__name__,) + tuple(flatten(o, leaves) for o in obj)
    if isinstance(obj, tuple) and hasattr(type(obj), "n_sequence_fields"):  # ``max(dim)``'s return type: kept
        return ("N", type(obj)) + tuple(flatten(o, leaves) for o in obj)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__,) + tuple(flatten(o, leaves) for o in obj)
    if isinstance(obj, dict):
        return ("dict",) + tuple((k, flatten(v, leaves)) for k, v in obj.items())
    if hasattr(obj, "training") and hasattr(obj, "modules"):
        return ("M", id(obj), tuple(m.training for m in obj.modules()))
    if type(obj) is float or type(obj) is complex:  # -0.0 == 0.0 and nan != nan: key them by their repr
        return ("C", type(obj), repr(obj))
    try:
        hash(obj)
        return ("C", type(obj), obj)  # the type too: 1, 1.0 and True are equal and hash alike
    except TypeError:
        return ("O", id(obj))


def unflatten(structure: Any, leaves: list, objects: dict | None = None) -> Any:
    it = iter(leaves)

    def build(s: Any) -> Any:
        tag = s[0]
        if tag == "T":
            return next(it)
        if tag == "S":
            indices = build(s[4])
            return s[1]._from_parts(indices, build(s[5]), s[2], s[3])
        if tag in ("list", "tuple"):
            items = [build(c) for c in s[1:]]
            return items if tag == "list" else tuple(items)
        if tag == "N":
            return s[1]([build(c) for c in s[2:]])
        if tag == "dict":
            return {k: build(c) for k, c in s[1:]}
        if tag == "C":
            return float(s[2]) if s[1] is float else complex(s[2]) if s[1] is complex else s[2]
        return objects[s[1]] if objects else None

    return build(structure)


def _reachable(fn: Any) -> list:
    """Objects a function can reach: itself, its bound instance, closure cells and named globals."""
    candidates = [fn, getattr(fn, "__self__", None)]
    code = getattr(fn, "__code__", None)
    if code is not None:
        candidates += [c.cell_contents for c in (fn.__closure__ or ()) if guards.cell_filled(c)]
        globs = getattr(fn, "__globals__", {})
        candidates += [globs[n] for n in code.co_names if n in globs]
    # (and what those hold: a model or optimizer kept in a namespace or a trainer object: ember/graph/guards.py)
    return [c for c in guards.inside([c for c in candidates if c is not None]) if c is not None]


def _modules_of(fn: Any) -> list:
    """Every module (and submodule) a function can reach."""
    found: dict = {}
    for c in _reachable(fn):
        if hasattr(c, "training") and hasattr(c, "modules"):
            for m in c.modules():
                found.setdefault(id(m), m)
    return list(found.values())


def _hooks_of(modules: list) -> tuple:
    """The hooks and classes of the modules a function reaches (a trace bakes the hooks in; a parametrization
    changes the class): the handles' ids of every module that has any, with its class."""
    key = []
    for m in modules:
        d = m.__dict__
        hooks = tuple(d.get("_forward_pre_hooks", ())) + tuple(d.get("_forward_hooks", ())) + \
            tuple(d.get("_backward_hooks", ())) + tuple(d.get("_backward_pre_hooks", ()))
        if hooks or "_orig_class" in type(m).__dict__:
            key.append((id(m), type(m), hooks))
    return tuple(key)


def _optimizers_of(fn: Any) -> list:
    """Optimizers a function can reach."""
    return [c for c in _reachable(fn) if hasattr(c, "param_groups") and hasattr(c, "step")]


def _hyperparameter_guard(optimizers: list) -> tuple:
    """Python numbers a traced optimizer step reads (lr, betas, ...) become constants of the graph, so
    they are part of the cache key: a scheduler changing ``lr`` makes the next call retrace."""
    guard = []
    for opt in optimizers:
        for group in opt.param_groups:
            guard.append(tuple((k, _plain(v)) for k, v in group.items() if k != "params"))
    return tuple(guard)


def _plain(value: Any) -> Any:
    if isinstance(value, Tensor):
        return ("tensor", float(value.item())) if value.numel() == 1 else ("tensor", id(value))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    return value if isinstance(value, (int, float, str, bool, type(None))) else id(value)


CACHE_LIMIT = compile_options.DEFAULT_LIMIT  # (torch._dynamo.config.recompile_limit decides: compile_options.py)
_STANCE = compile_options.STANCE
_SEEN_LIMIT = 256  # signatures seen (warm-up calls included): a key that changes every call stops growing it
_STALE_LIMIT = 8  # retraces of one signature for stale state before it runs eagerly
_LOG = logging.getLogger("ember.compile")


class _Compiled:
    """One cache entry: the optimized graph, its executable and how to rebuild the result."""

    def __init__(self, graph: Graph, executable: Executable, out_structure: Any, history: list,
                 trace_seconds: float, mutated: Sequence[int] = (), identity: dict | None = None) -> None:
        self.graph = graph
        self.executable = executable
        self.out_structure = out_structure
        self.history = history
        self.trace_seconds = trace_seconds
        # Arguments the function writes in place (``x.add_(1)``, ``x[0] = 5``, a write through a view of x):
        # their final values are the graph's last outputs, written into the caller's tensors after each run.
        self.mutated = tuple(mutated)
        # Results that are argument objects themselves (``return x``): the caller's tensor is returned, as eagerly.
        self.identity = identity or {}
        self.n_results = len(graph.outputs) - len(self.mutated)
        # A run is only right when no argument shares memory with what it writes (arguments or state):
        # otherwise the graph would read a value eager code had already changed (checked per call).
        self.check_aliases = bool(self.mutated or executable.writes)
        self.copy_outputs = [v.kind != "node" for v in graph.outputs]
        self.devices = [v.device for v in graph.outputs]
        # The speed trial (ember/graph/speed_trial.py): None when skipped.
        random = any(getattr(n.op, "random", False) for n in graph.nodes)
        # (fusion happens when the executable is built: its nodes, not the graph's, hold the fused kernels)
        fused = sum(getattr(n.op, "category", None) == "fused" for n in getattr(executable, "nodes", graph.nodes))
        hint = f"{len(graph.nodes)} graph nodes, {fused} fused elementwise kernel{'s' if fused != 1 else ''}"
        self.trial: SpeedTrial | None = None if random else SpeedTrial(hint)
        self.grads: list = []  # grad_binding.GradBinding per parameter the step's backward writes
        # What a call checks and does besides the run, made at the first run (``grads`` is set after __init__):
        # (p, start) pairs whose ``p.grad`` must be ``start``, the ``p`` whose grad must be None, (p, final) pairs
        # to rebind after the run, whether the result is one plain tensor (no rebuild of a structure).
        self._call_plan: tuple | None = None
        # The write targets' arrays and the overlap test made from them, reused while every state still holds
        # the same array (``aliased``; only without handed-over writes, whose arrays change every run).
        self._overlaps_for: tuple | None = None
        self._reuse_overlaps = not any(getattr(executable, "rebind", (True,)))

    @property
    def speed_note(self) -> str:
        return "speed trial: skipped (random nodes)" if self.trial is None else self.trial.note

    def aliased(self, leaves: list) -> bool:
        """Whether an argument shares memory with another argument the graph writes, or with a state it
        writes (``step(model.weight)`` for a step that updates the weight; ``f(x, x)`` writing one of them)."""
        backend = leaves[0]._device.backend if leaves else None
        if self.mutated:
            for k in self.mutated:
                target = leaves[k]._data
                if any(j != k and backend.may_share_memory(target, t._data) for j, t in enumerate(leaves)):
                    return True
        writes = self.executable.writes
        if writes and leaves:
            targets = [tensor._data for _, tensor in writes]
            known = self._overlaps_for
            if known is not None and all(a is b for a, b in zip(targets, known[0])):
                overlaps = known[1]
            else:
                overlaps = _Overlaps(backend, targets)
                # kept only where the targets are the states' own long-lived buffers (no extra memory held)
                self._overlaps_for = (targets, overlaps) if self._reuse_overlaps else None
            for t in leaves:
                if overlaps(t._data):
                    return True
        return False

    def _make_call_plan(self) -> tuple:
        same = tuple((b.tensor, b.start) for b in self.grads if b.kind == "same")
        none = tuple(b.tensor for b in self.grads if b.kind == "none")
        # "same" leaves whose grad stays the tensor the graph reads need no rebinding after a run
        rebind = tuple((b.tensor, b.final) for b in self.grads if not (b.kind == "same" and b.final is b.start))
        single = self.out_structure == ("T",) and not self.identity and not self.mutated
        self._call_plan = plan = (same, none, rebind, single and not self.copy_outputs[0], self.devices[0] if single
                                  else None)
        return plan

    def run(self, leaves: list) -> Any:
        plan = self._call_plan or self._make_call_plan()
        same, none, rebind, single, device = plan
        for t, start in same:
            if t.grad is not start:
                return STALE  # p.grad is not what the traced call started from (ember/graph/grad_binding.py)
        for t in none:
            if t.grad is not None:
                return STALE
        results = self.executable.run([t._data for t in leaves])
        for t, final in rebind:
            if t.grad is not final:
                t.grad = final
        if single:  # one result, a node's value: the tensor itself (no structure to rebuild)
            return Tensor._make(results[0], device, False)
        if self.mutated:
            results = self._write_arguments(leaves, results)
        tensors = []
        for r, copy, dev in zip(results, self.copy_outputs, self.devices):
            tensors.append(Tensor._make(r.copy() if copy else r, dev, False))
        for i, k in self.identity.items():
            tensors[i] = leaves[k]
        return unflatten(self.out_structure, tensors)

    def _write_arguments(self, leaves: list, results: list) -> list:
        """Write the mutated arguments' final values into the caller's tensors (any layout); results that
        share memory with an argument keep the values they had when the graph returned them."""
        n = self.n_results
        results, news = list(results[:n]), list(results[n:])
        targets = [leaves[k]._data for k in self.mutated]
        overlaps = _Overlaps(leaves[0]._device.backend, targets)
        for j, r in enumerate(results):
            if overlaps(r):
                results[j] = r.copy()
        news = [v.copy() if overlaps(v) else v for v in news]
        for k, target, value in zip(self.mutated, targets, news):
            target[...] = value
            leaves[k]._bump()
        return results


class CompiledFunction:
    """What ``ember.compile(fn)`` returns: call it like ``fn``; inspect ``graph``/``explain()``."""

    def __init__(self, fn: Callable, passes: Sequence[str] | None = None, fallback: str = "eager",
                 warmup: int | None = 1, name: str | None = None, measure: bool = True, cuda_graphs: bool = False,
                 fullgraph: bool = False, python_guards: bool = True) -> None:
        if fallback not in ("eager", "raise"):
            raise ValueError(f"ember.compile: fallback must be 'eager' or 'raise', got {fallback!r}")
        self.fn = fn
        self.passes = tuple(ALL_PASSES if passes is None else passes)
        unknown = [p for p in self.passes if p not in ALL_PASSES]
        if unknown:
            raise ValueError(f"ember.compile: unknown pass(es) {unknown}; choose from {list(ALL_PASSES)}")
        self.fallback = fallback
        # python_guards=False: torch.jit.trace's contract (ember.jit): Python state the function reads is baked into
        # the graph and its side effects happen once, at the trace; no guards, nothing undone
        self.python_guards = python_guards
        self.fullgraph = bool(fullgraph)  # a graph break raises torch's Unsupported (ember/graph/dynamo_errors.py)
        # warmup=None (compile(fullgraph=True) without warmup=): no warm-up unless an optimizer is reachable, so a
        # graph break raises at the first call as in torch (decided at the first call, see _refresh)
        self.warmup = 1 if warmup is None else warmup
        self._warmup_auto = warmup is None
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self._cache: dict = {}
        self._seen: dict = {}
        self._modules: list | None = None
        self._optimizers: list | None = None
        self._watched: list = []  # (dict, name) / (cell,) the code reads: ember/graph/guards.py
        self._names: frozenset = frozenset()
        self._hooks_seen: int | None = None  # HOOK_CHANGES when the modules' hooks were read into _hooks_key
        self._hooks_key: tuple = ()
        self._layouts_seen = _LAYOUT_CHANGES[0]
        self._warned_cache_limit = False
        self.last: _Compiled | CompiledAutograd | None = None
        self.measure = measure
        self.cuda_graphs = cuda_graphs  # mode="reduce-overhead": whole steps replay as CUDA graphs (cuda_graph_step.py)
        self.eager_reasons: dict = {}  # signature -> why it runs eagerly after the speed trial
        self.eager_reason: str | None = None  # the most recent call's reason, None when it ran compiled
        self._announced_eager = False  # the first speed-trial switch to eager is logged as a WARNING
        self._stale: dict = {}  # signature -> how often its graph went stale
        self._last_hit: tuple | None = None  # (key, entry) of the previous call: no hash when the key repeats
        compile_options.LIVE.add(self)

    def reset(self) -> None:
        """Forget every graph, warm-up count and guard (``torch._dynamo.reset()`` calls this on every function)."""
        self._cache.clear()
        self._seen.clear()
        self._stale.clear()
        self.eager_reasons.clear()
        self._modules = self._optimizers = None
        self._watched, self._names = [], frozenset()
        self._hooks_seen = None
        self._last_hit = self.last = self.eager_reason = None
        self._warned_cache_limit = False

    def _key(self, leaves: list, structure: Any) -> tuple:
        if self._modules is None:
            self._refresh()
        # The layout too: reshape()/contiguous() of an argument is a view or a copy by its strides (ember/graph/layout.py),
        # so a non-contiguous argument is keyed by its strides (a transpose and a column slice of one shape differ)
        signature = []
        for t in leaves:  # (a loop, not a generator: this runs on every call)
            data = t._data
            signature.append((data.shape, data.dtype, t._device, t._requires_grad,
                              True if data.flags.c_contiguous else data.strides))
        modules = self._modules
        if _LAYOUT_CHANGES[0] != self._layouts_seen:  # a tensor changed shape or dtype in place (``p.data = ...``)
            self._layouts_seen = _LAYOUT_CHANGES[0]
            self._drop_stale_states()
        if _HOOK_CHANGES[0] != self._hooks_seen:  # a hook added or removed anywhere: re-read the modules' hooks
            self._hooks_seen = _HOOK_CHANGES[0]
            self._hooks_key = _hooks_of(modules)
        return (structure, tuple(signature), grad_mode.STATE.enabled, self._hooks_key,
                tuple([(m.training, m.__dict__.get("_config_key", ())) for m in modules]) if modules else (),
                _hyperparameter_guard(self._optimizers) if self._optimizers else (),
                _AUTOCAST.key,  # the autocast casts are traced into the graph: another region, another graph
                dtypes.get_default_dtype(),  # ``ember.ones(3)`` inside is traced with the default dtype
                guards.values(self._watched, self._names) if self._watched else ())

    def _drop_stale_states(self) -> None:
        """Forget graphs that read a tensor (a parameter, a global) whose shape or dtype changed since the trace."""
        for key, entry in list(self._cache.items()):
            history = getattr(entry, "history", None)
            if history and any(v.tensor is not None and (v.tensor._data.shape != v.shape or v.tensor._data.dtype != v.dtype)
                               for v in history[0][1].states):
                del self._cache[key]
                self._seen.pop(key, None)
                self._last_hit = None
                if self.last is entry:
                    self.last = None

    def _refresh(self) -> bool:
        """Find the modules, optimizers and Python bindings the function reaches; True when they changed (a
        submodule swapped, a helper rebound): done at the first call and at each cache miss, never on a hit."""
        modules, optimizers = _modules_of(self.fn), _optimizers_of(self.fn)
        watched, names = guards.watched(self.fn, modules) if self.python_guards else ([], frozenset())
        same = (self._modules is not None and len(modules) == len(self._modules)
                and all(a is b for a, b in zip(modules, self._modules)) and names == self._names
                and len(watched) == len(self._watched) and all(a[0] == b[0] and a[1] is b[1] and a[2] == b[2]
                                                               for a, b in zip(watched, self._watched))
                and len(optimizers) == len(self._optimizers) and all(a is b for a, b in zip(optimizers, self._optimizers)))
        if self._warmup_auto:
            self.warmup = 1 if optimizers else 0
        if not same:
            self._modules, self._optimizers, self._watched, self._names = modules, optimizers, watched, names
            self._last_hit = self._hooks_seen = None
        return not same

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if interpreters.tracing() or _STANCE[0] == "force_eager":  # (inside another trace: inlined into it)
            return self.fn(*args, **kwargs)
        if not kwargs and all(type(a) is Tensor for a in args):  # the common case, without the tree walk
            leaves = list(args)
            structure = _FLAT_STRUCTURES.get(len(args))
            if structure is None:
                structure = _FLAT_STRUCTURES[len(args)] = flatten((args, kwargs), [])
        else:
            leaves = []
            structure = flatten((args, kwargs), leaves)
        key = self._key(leaves, structure)
        last = self._last_hit
        # The previous call's key, compared before hashing: equal parts are mostly the same objects (dtypes,
        # devices), which a comparison passes by identity where a hash calls the device's Python __hash__.
        if last is not None and last[0] == key:
            entry = last[1]
        else:
            entry = self._cache.get(key)
            if (entry is None and len(self._cache) < compile_options.recompile_limit() and len(self._seen) < _SEEN_LIMIT
                    and self._refresh()):
                # what the function reaches changed (a submodule swapped, a helper rebound): key it again
                # (not past the limits, where new signatures run eagerly anyway: ~90 us for a ResNet step)
                key = self._key(leaves, structure)
                entry = self._cache.get(key)
            if entry is None:
                if (self._cache or self._seen) and _STANCE[0] != "default":
                    if _STANCE[0] == "fail_on_recompile":
                        raise RuntimeError(f"Detected recompile when torch.compile stance is 'fail_on_recompile'. "
                                           f"function name: '{self.name}' (a new input signature or guarded "
                                           "Python value)")
                    if _STANCE[0] == "eager_on_recompile":
                        return self.fn(*args, **kwargs)
                limit = compile_options.recompile_limit()
                if len(self._cache) >= limit or (len(self._seen) >= _SEEN_LIMIT and key not in self._seen):
                    # Like torch.compile's recompile limit: a key that changes every call (an lr scheduled per
                    # step, shapes that always differ) would retrace forever, so run eagerly instead.
                    if self.fullgraph or compile_options.fail_on_limit():
                        why = "fullgraph=True" if self.fullgraph else "fail_on_recompile_limit_hit"
                        raise FailOnRecompileLimitHit(f"Hard failure due to {why}: "
                                                      f"ember.compile({self.name}) reached the recompile limit "
                                                      f"(torch._dynamo.config.recompile_limit = {limit})")
                    if not self._warned_cache_limit:
                        warnings.warn(f"ember.compile({self.name}): {limit} different input signatures or guarded "
                                      "values seen (torch._dynamo.config.recompile_limit); running further new ones "
                                      "eagerly", RuntimeWarning, stacklevel=2)
                        self._warned_cache_limit = True
                    return self.fn(*args, **kwargs)
                seen = self._seen.get(key, 0)
                if seen < self.warmup:
                    self._seen[key] = seen + 1
                    return self.fn(*args, **kwargs)
                entry = self._cache[key] = self._trace(args, kwargs, leaves, structure, key)
            self._last_hit = (key, entry)
        if entry is _EAGER:
            self.eager_reason = self.eager_reasons.get(key)
            return self.fn(*args, **kwargs)
        if type(entry) is _Compiled and entry.check_aliases and entry.aliased(leaves):
            # The graph reads its arguments as they were at the call; eager code sees a write to one argument
            # (or to a state) through another that shares its memory. Such a call runs eagerly.
            self.eager_reason = "arguments share memory with a tensor the function writes: this call ran eagerly"
            return self.fn(*args, **kwargs)
        self.last = entry
        self.eager_reason = None
        if self.measure and type(entry) is _Compiled and entry.trial is not None:
            return self._trial_call(key, entry, args, kwargs, leaves)
        out = entry.run(leaves)
        if out is STALE:  # a parameter was frozen or unfrozen, or p.grad differs from the trace's: trace again
            self._restale(key)
            return self(*args, **kwargs)
        return out

    def _restale(self, key: tuple) -> None:
        """Drop a stale entry; a signature that went stale too often runs eagerly (no retrace per call)."""
        del self._cache[key]
        self._last_hit = None
        self.last = None
        count = self._stale[key] = self._stale.get(key, 0) + 1
        if count > _STALE_LIMIT:
            self._cache[key] = _EAGER
            self._last_hit = None
            self.eager_reasons[key] = (f"p.grad or requires_grad changed between calls {count} times (e.g. "
                                       "zero_grad every few steps): this signature runs eagerly")

    def _trial_call(self, key: tuple, entry: "_Compiled", args: tuple, kwargs: dict, leaves: list) -> Any:
        """A call of a signature under the speed trial: the mode the trial asks for, timed on both clocks
        (see :mod:`ember.graph.speed_trial`); runs eagerly while the trial's decision says so."""
        trial = entry.trial
        mode = trial.next_mode()
        if mode == "run compiled" and (not trial.rechecks or trial.since_decision + 1 < trial.rechecks[0]):
            trial.since_decision += 1  # record()'s count of a decided call, which reads no clock
            self.eager_reason = None
            out = entry.run(leaves)
            if out is STALE:
                self._restale(key)
                return self(*args, **kwargs)
            return out
        eager = mode in ("eager", "run eager")
        wall_clock, cpu_clock = speed_trial.CLOCKS
        wall, cpu = wall_clock(), cpu_clock()
        out = self.fn(*args, **kwargs) if eager else entry.run(leaves)
        wall, cpu = wall_clock() - wall, cpu_clock() - cpu
        if out is STALE:  # a parameter was frozen or unfrozen, or p.grad differs from the trace's: trace again
            self._restale(key)
            return self(*args, **kwargs)
        if trial.record(mode, wall, cpu):
            if trial.eager:
                self.eager_reasons[key] = trial.reason
                level = logging.INFO if self._announced_eager else logging.WARNING
                self._announced_eager = True
                _LOG.log(level, "ember.compile(%s): %s", self.name, trial.reason)
            else:
                self.eager_reasons.pop(key, None)
                _LOG.info("ember.compile(%s): %s", self.name, trial.note)
        self.eager_reason = self.eager_reasons.get(key) if eager else None
        return out

    def _trace(self, args: tuple, kwargs: dict, leaves: list, structure: Any, key: tuple) -> Any:
        start = time.perf_counter()
        objects = {id(o): o for o in _objects(args, kwargs)}
        grads_before = grad_binding.snapshot(_reachable(self.fn))
        python_state = guards.snapshot(self._watched, self._modules)
        generators = guards.rng_states(self._watched)
        try:
            entry = self._trace_graph(args, kwargs, leaves, structure, objects, grads_before, start)
        finally:
            # Python state the key guards that the trace changed (``losses.append(loss)``, ``self.calls += 1``,
            # ``manual_seed`` inside the function): a graph cannot replay it, so undo the trace's change and run this
            # signature eagerly (as dynamo would replay it, the state then evolves as in eager code).
            changed = self._key(leaves, structure) != key
            if changed:
                guards.restore(python_state)
            changed = guards.rng_restore(generators) or changed
        if changed:
            if self.fallback == "raise":
                raise TracingError("the function changes Python state it reads (a global, a closure variable, a "
                                   "container or object they hold, a module attribute, a generator's state), which "
                                   "a graph cannot replay")
            warnings.warn(f"ember.compile({self.name}): running these input shapes eagerly: the function changes "
                          "Python state (a global, closure variable, container, object attribute, module "
                          "attribute or generator it uses), which a graph cannot replay", RuntimeWarning, stacklevel=3)
            self.eager_reasons[key] = "the function changes Python state a graph cannot replay: this signature runs eagerly"
            return _EAGER
        return entry

    def _trace_graph(self, args: tuple, kwargs: dict, leaves: list, structure: Any, objects: dict,
                     grads_before: Any, start: float) -> Any:
        try:
            with Tracer(self.name) as tracer:
                sym = [tracer.input(tuple(t.shape), t.dtype, t.device, t._requires_grad, name=f"arg{k}",
                                    contiguous=True if t._data.flags.c_contiguous else t._data)
                       for k, t in enumerate(leaves)]
                sym_args, sym_kwargs = unflatten(structure, sym, objects)
                originals = [t._data for t in sym]
                result = self.fn(*sym_args, **sym_kwargs)
                out_leaves: list = []
                out_structure = flatten(result, out_leaves)
                del result, sym_args, sym_kwargs
                identity = {i: k for i, o in enumerate(out_leaves) for k, t in enumerate(sym) if o is t}
                mutated = _mutated_arguments(sym, originals)
                del originals
                if any(t.grad is not None for t in sym):  # (the caller's tensor would never see it)
                    raise TracingError("backward() inside the function writes .grad of an argument; such calls run "
                                       "eagerly (make it a parameter or a global the function reaches)")
                grad_starts = grad_binding.starts(tracer.builder.lifted, grads_before)
                # Results that need history get a backward graph built now, from the trace's own record.
                plan = build_backward(tracer, out_leaves, sym) if grad_mode.STATE.enabled else None
                if plan is not None and mutated:
                    raise TracingError("the function writes into an argument in place and returns results that "
                                       "need gradients; such calls run eagerly")
                out_leaves.extend(sym[k] for k in mutated)
                del sym
                n_results = len(out_leaves)
                if plan is not None:
                    out_leaves.extend(plan.grads)
                    plan.grads = []
                tracer.builder.finish(out_leaves)
                del out_leaves
        except TracingError as error:
            if self.fullgraph and not isinstance(error, Unsupported):
                raise Unsupported(f"ember.compile({self.name}, fullgraph=True): the function needs a graph break: "
                                  f"{error}") from error
            if self.fallback == "raise" or self.fullgraph:
                raise
            warnings.warn(f"ember.compile({self.name}): falling back to eager mode for these input shapes: {error}",
                          RuntimeWarning, stacklevel=3)
            return _EAGER
        graph = tracer.graph
        history: list = [("trace", graph)]
        graph = run_passes(graph, self.passes, history)
        graph.validate()
        if plan is not None:
            forward, saved, backward = split(graph, len(leaves), n_results)
            kept = ", ".join(v.label() if v.name else f"state #{forward.states.index(v)}" for v in saved) or "nothing"
            history += [(f"split: forward (saves {kept} for backward)", forward),
                        ("split: backward", backward)]
            entry = CompiledAutograd(forward, saved, backward, plan, out_structure, history,
                                     time.perf_counter() - start, self.passes)
            entry.identity = identity
            if self.cuda_graphs:  # forward and backward each replay a graph (their results are copied out)
                entry.executable = GraphedExecutable(entry.executable, self.name)
                entry.backward_executable = GraphedExecutable(entry.backward_executable, self.name + " (backward)")
            return entry
        if "fuse" in self.passes:
            history.append(("fuse", fuse_pass(graph)))
        executable = Executable(graph, graph.outputs, include_updates=True, fuse="fuse" in self.passes,
                                memory="memory" in self.passes)
        if self.cuda_graphs:
            executable = GraphedExecutable(executable, self.name)
        entry = _Compiled(graph, executable, out_structure, history, time.perf_counter() - start, mutated, identity)
        entry.grads = grad_binding.bindings(grad_starts)
        return entry

    @property
    def _orig_mod(self) -> Any:
        """The compiled module (torch.compile's ``OptimizedModule._orig_mod``); plain functions have none."""
        if not (hasattr(self.fn, "training") and hasattr(self.fn, "modules")):  # a module, as _modules_of tells
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '_orig_mod' (it compiled a "
                                 f"function, not a module)")
        return self.fn

    def __getattr__(self, name: str) -> Any:
        # Like torch.compile's OptimizedModule: cm.parameters(), cm.train(), cm.state_dict() reach the module.
        fn = self.__dict__.get("fn")
        if fn is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(fn, name)

    # ---- inspection ---------------------------------------------------------------------------------
    @property
    def graph(self) -> Graph | None:
        """The optimized graph of the most recent call (None before the first trace)."""
        return self.last.graph if self.last is not None else None

    def explain(self) -> str:
        """The graph after tracing and after each pass, so each pass's effect can be read."""
        if self.last is None:
            return f"{self.name}: not traced yet (call it {self.warmup + 1} times)"
        parts = [f"{self.name}: {self.eager_reason or getattr(self.last, 'speed_note', 'speed trial: not run (an autograd-node call)')}"]
        for name, g in self.last.history:
            parts.append(f"==== after {name}: {g.summary()}\n{g}")
        return "\n".join(parts)

    def save(self, path: str) -> None:
        """Save the most recent graph (with its weights) for :func:`ember.graph.load`."""
        from ember.graph.serialize import save

        if self.last is None:
            raise RuntimeError(f"ember.compile({self.name}).save: nothing traced yet; call the function first")
        if getattr(self.last, "mutated", ()):
            raise RuntimeError(f"ember.compile({self.name}).save: the function writes into its arguments in place "
                               f"(arguments {list(self.last.mutated)}), which a saved graph cannot do to its caller's "
                               "tensors; return the new values instead")
        save(self.last.graph, path)


def _mutated_arguments(sym: list, originals: list) -> list:
    """Indices of the traced arguments whose value the function replaced (in-place writes, ``x.data = y``)."""
    mutated = []
    for k, (t, value) in enumerate(zip(sym, originals)):
        if t._data is value:
            continue
        now = t._data
        if getattr(now, "shape", None) != value.shape or getattr(now, "edtype", None) is not value.edtype:
            raise TracingError(f"argument {k} was given a value of another shape or dtype (``x.data = y``); "
                               "such calls run eagerly")
        mutated.append(k)
    return mutated


def _objects(*trees: Any) -> list:
    out = []

    def walk(o: Any) -> None:
        if isinstance(o, (list, tuple)):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)
        elif not isinstance(o, Tensor):
            out.append(o)

    for t in trees:
        walk(t)
    return out


def compile(fn: Callable | None = None, *, passes: Sequence[str] | None = None, fallback: str = "eager",
            warmup: int | None = None, measure: bool = True, fullgraph: bool = False, **options: Any) -> Any:  # noqa: A001
    """Compile ``fn`` (a function or module); usable as ``@ember.compile`` or ``ember.compile(fn, ...)``.

    ``passes`` picks graph passes from ``simplify, cse, fold, dce, fuse, memory`` (default: all;
    ``passes=[]`` runs the traced graph as is). PyTorch's keyword arguments are checked as torch.compile
    checks them (``mode``, ``backend``, ``options``: :mod:`ember.graph.compile_options`); ``fullgraph=True``
    raises ``torch._dynamo.exc.Unsupported`` where the function needs a graph break (ember otherwise runs
    that signature eagerly); with it, a function that reaches no optimizer traces at its first call (no eager
    warm-up), so the error comes where torch raises it. ``mode="reduce-overhead"``: as with torch.compile, compiled whole steps on a CUDA
    device then replay as CUDA graphs (no speed trial; ember/graph/cuda_graph_step.py). ``measure=False``
    skips the speed trial that otherwise runs a signature eagerly when its graph measured slower than eager.
    """
    compile_options.check(options)
    graphs = options.get("mode") == "reduce-overhead"

    if warmup is None and not fullgraph:
        warmup = 1

    def make(f: Callable) -> "CompiledFunction":
        return CompiledFunction(f, passes, fallback, warmup, measure=measure and not graphs, cuda_graphs=graphs,
                                fullgraph=fullgraph)

    return make if fn is None else make(fn)
