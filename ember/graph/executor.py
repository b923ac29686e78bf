"""The one executor for traced and define-then-run graphs.

An :class:`Executable` is built for a set of *fetches*: it keeps only the nodes those values (and,
for compiled functions, the state updates) need - so an ``assign`` that nothing fetched never runs
- optionally fuses elementwise chains and plans buffers, then flattens the rest into a list of
``(callable, input slots, output slot)``. A run is: copy the slot template (constants already in
it), drop in the inputs and the current state arrays, call each entry, copy state updates into
their tensors' buffers (after every node ran: reads see start-of-run values), return the fetches.
A graph that samples reads no seed from memory: each run draws a fresh one from its generator
(or takes ``seed=``), see :mod:`ember.graph.rng`.

Example:
    >>> import numpy as np, ember
    >>> from ember.graph.ir import Graph
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); x = g.add_input((3,), ember.float64)
    >>> (y,) = g.add_node(OPS["mul"], (x, 2.0), {})
    >>> Executable(g, [y]).run([np.arange(3.0)])[0]
    array([0., 2., 4.])
"""
from __future__ import annotations

import bisect
import operator
from functools import partial
from typing import Any, Sequence

import numpy as np

from ember.backends import cpu_hot_ufuncs
from ember.graph.ir import Graph, Node, Value, device_xp
from ember.graph.passes import index_grads, relu_pool, share_scalar  # module attributes: tests switch passes off by patching
from ember.graph.rng import is_seed


# The profiler's hook (ember/profiler): None unless a profile is recording; then runs time each node.
PROFILER: Any = None


def needed_nodes(graph: Graph, roots: Sequence[Value]) -> list[Node]:
    """The nodes ``roots`` depend on, in graph (topological) order."""
    wanted: set[int] = set()
    stack = [v for v in roots if v.node is not None]
    while stack:
        node = stack.pop().node
        if id(node) in wanted:
            continue
        wanted.add(id(node))
        stack.extend(i for i in node.inputs if isinstance(i, Value) and i.node is not None)
    return [n for n in graph.nodes if id(n) in wanted]


def _node_callable(node: Node, xp: Any) -> tuple[Any, list]:
    """A callable taking only the Value inputs' arrays, plus the Values it takes."""
    impl = node.op.impl
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")} if node.op.category != "fused" else {}
    if "_out" in node.attrs:
        attrs["out"] = node.attrs["_out"]
    args = node.inputs
    values = [a for a in args if isinstance(a, Value)]
    if len(values) == len(args):
        fn = partial(impl, xp, **attrs) if attrs else partial(impl, xp)
    else:
        positions = tuple(k for k, a in enumerate(args) if isinstance(a, Value))
        template = list(args)

        def fn(*arrays: Any, _t: list = template, _p: tuple = positions, _impl: Any = impl, _a: dict = attrs) -> Any:
            full = list(_t)
            for k, arr in zip(_p, arrays):
                full[k] = arr
            return _impl(xp, *full, **_a)

    if len(node.outputs) == 1 and node.outputs[0].shape == () and node.op.category not in ("fused", "control"):
        inner = fn
        fn = lambda *arrays: xp.asarray(inner(*arrays))  # noqa: E731  (NumPy reductions return scalars)
    return fn, values


class Executable:
    """A run plan for ``fetches`` (and, with ``include_updates``, the graph's state updates)."""

    def __init__(self, graph: Graph, fetches: Sequence[Value], include_updates: bool = True,
                 fuse: bool = False, memory: bool = False) -> None:
        self.graph = graph
        fetches = list(fetches)
        updates = list(graph.updates) if include_updates else []
        nodes = needed_nodes(graph, fetches + [v for _, v in updates])
        # assign nodes that run (because something fetched needs them) write their variable.
        for node in nodes:
            if node.op.side_effect:
                updates.append((node.inputs[0], node.outputs[0]))
        keep = {v.id for v in fetches} | {v.id for _, v in updates}
        device = next((v.device for v in graph.values() if v.device is not None), None)
        xp = device.xp if device is not None else np
        if fuse:
            from ember.graph.passes.fuse import fuse_nodes

            nodes = index_grads.merge_index_grads(nodes, keep)  # q/k/v slices' gradients into one buffer
            if xp is np:  # relu over the pooled map, not the whole one (bits checked on the host: CPU only)
                nodes = relu_pool.swap_relu_pool(nodes, keep)

            nodes = fuse_nodes(nodes, keep, xp)
            # Adam's bias corrections: one scalar kernel per step, not one per parameter (equal step counts)
            # (whole chains of them as one node: ember/graph/passes/scalar_chains.py)
            nodes = share_scalar.share_scalar_kernels(nodes, lambda n: _node_callable(n, device_xp(n, xp))[0], keep=keep)
        filled: set = set()
        if memory:
            from ember.graph.passes.memory import plan_buffers, plan_fills

            self.memory_stats = plan_buffers(nodes, keep, xp, updates)
            if xp is np:  # constant new values (``p.grad.zero_()``) stored by the kernel that reads the state last
                filled = plan_fills(nodes, keep, updates)
                if filled:
                    self.memory_stats["fills"] = len(filled)
        self.nodes = nodes
        read = {i.id for n in nodes for i in n.inputs if isinstance(i, Value)} | {v.id for v in fetches}
        slots: dict[int, int] = {}

        def slot(v: Value) -> int:
            s = slots.get(v.id)
            if s is None:
                s = slots[v.id] = len(slots)
            return s

        self.input_slots = [slot(v) for v in graph.inputs]
        self.state_reads = [(slot(v), v.tensor) for v in graph.states if not is_seed(v)]
        # Seeds of random nodes: drawn per run, and only when a node that runs reads them (a plan
        # without random nodes leaves the generator alone).
        self.seed_reads = [(slot(v), v.tensor) for v in graph.states if is_seed(v) and v.id in read]
        const_slots = [(slot(v), v.data) for v in graph.consts]
        program = []
        items: dict[int, int] = {}  # program entry -> the tuple item it reads (a multi-output node's outputs)
        self.program_nodes: list = []  # the node behind each program entry (None: a tuple item), for the profiler
        for node in nodes:
            fn, values = _node_callable(node, device_xp(node, xp))
            ins = tuple(slot(v) for v in values)
            self.program_nodes.append(node)
            if len(node.outputs) == 1:
                program.append((fn, ins, slot(node.outputs[0])))
            else:
                holder = len(slots)
                slots[-holder - 1] = holder  # an anonymous slot for the tuple
                program.append((fn, ins, holder))
                for k, out in enumerate(node.outputs):
                    program.append((operator.itemgetter(k), (holder,), slot(out)))
                    self.program_nodes.append(None)
                    items[len(program) - 1] = k
        self.program = program
        self.template = [None] * len(slots)
        for s, data in const_slots:
            self.template[s] = data
        self.fetch_slots = [slot(v) for v in fetches]
        self.writes = [(slot(new), state.tensor) for state, new in updates]
        bumps = graph.update_bumps
        self.write_bumps = [bumps.get(state.id, 1) for state, _ in updates]  # in-place ops per tensor per run
        # Escaped states nothing reads (``p.grad`` after ``zero_grad(); backward()``) may take the run's
        # new array instead of a copy into their old buffer: eager hands ``p.grad`` a new tensor each step
        # too, and the copy cost a ResNet-18 step 45 MB of memory traffic.
        self.rebind = [state.id in graph.escaped and state.id not in read for state, _ in updates]
        # States a kernel filled during the run (memory.plan_fills): nothing to write after it, a version to count.
        self.filled = [state.id in filled for state, _ in updates]
        # Versions to add per written tensor: the in-place ops the step made on it (_bump's count, at once).
        self.bump_plan = [(tensor, count) for (_, tensor), count in zip(self.writes, self.write_bumps)]
        # When every write is planned in place (the value is the state's own buffer) or filled by a kernel, a
        # run's write-back is a check that each value still is its state's buffer, and the version counts.
        self.in_place_only = bool(self.writes) and not any(self.rebind) and all(
            f or _planned_in_place(nodes, new) for f, (_, new) in zip(self.filled, updates))
        self.in_place_checks = [(s, tensor) for (s, tensor), f in zip(self.writes, self.filled) if not f]
        self.given = [s for s in self.input_slots] + [s for s, _ in const_slots] + [s for s, _ in self.state_reads]
        self._straight: Any = None  # the program as one generated function (made on the first run)
        self._items = items

    def _make_straight(self) -> Any:
        """The program as straight-line Python: ``v9 = f0(v0, v2)`` per entry, values in local variables, a
        multi-output node's items read by subscript, and only what the run returns or writes back stored into
        ``env``. The same calls in the same order as the entry-by-entry loop, without its per-entry tuple unpack,
        argument list and ``*`` call (~1 us an entry in a training step, where the interpreter's objects are
        cold). The source is made of slot numbers only; the callables are bound by name in its namespace."""
        def checked(slot: Any) -> int:
            # Only plain ints reach the source text: a graph read from a file can never place its own text in it.
            if type(slot) is not int or slot < 0:
                raise TypeError(f"executor: program slot {slot!r} is not a non-negative int; refusing to generate code")
            return slot

        for _, ins, out in self.program:
            for i in ins:
                checked(i)
            checked(out)
        for s in self.fetch_slots:
            checked(s)
        namespace: dict = {}
        loaded: set = set()
        made: set = set()
        lines = ["def straight(env):"]
        body: list = []
        for k, (fn, ins, out) in enumerate(self.program):
            for i in ins:
                if i not in made and i not in loaded:
                    loaded.add(i)
                    lines.append(f"    v{i} = env[{i}]")
            if k in self._items and ins[0] in made:
                body.append(f"    v{out} = v{ins[0]}[{int(self._items[k])}]")  # the tuple's item
            else:
                namespace[f"f{k}"] = fn
                body.append(f"    v{out} = f{k}({', '.join(f'v{i}' for i in ins)})")
            made.add(out)
        wanted = sorted((set(self.fetch_slots) | {s for s, _ in self.writes}) & made)
        body += [f"    env[{s}] = v{s}" for s in wanted]
        source = "\n".join(lines + body + ["    return None"])
        exec(compile(source, "<ember program>", "exec"), namespace)  # noqa: S102 - generated from slot numbers
        self._straight = namespace["straight"]
        return self._straight

    def run(self, inputs: Sequence[Any], seed: int | None = None, before_writes: Any = None) -> list:
        """Execute with ``inputs`` (arrays, in ``graph.inputs`` order); return the fetched arrays.

        Random nodes get a fresh seed from their generator, or ``seed`` (an int >= 0) when given.
        ``before_writes()``, when given, is called after the last node and before state buffers are
        written (a distributed run waits there for sends that may still read a Variable's buffer).
        """
        env = self.template[:]
        for s, array in zip(self.input_slots, inputs):
            env[s] = array
        for s, tensor in self.state_reads:
            env[s] = tensor._data
        if self.seed_reads:
            if seed is not None and not 0 <= int(seed) < 2**63:
                raise ValueError(f"graph run: seed must be an int in [0, 2**63), got {seed!r}")
            for s, tensor in self.seed_reads:
                env[s] = tensor.draw() if seed is None else np.asarray(seed, dtype=np.int64)
        if PROFILER is None:
            (self._straight or self._make_straight())(env)
        else:
            PROFILER.run_program(self, env)
        results = [env[s] for s in self.fetch_slots]
        for k, r in enumerate(results):
            if isinstance(r, np.generic):  # NumPy gives 0-d arithmetic as a scalar (1 + a0d); a Tensor holds arrays
                results[k] = np.asarray(r)
        if before_writes is not None:
            before_writes()
        if self.writes:
            self._write_back(env, results)
        return results

    def _write_back(self, env: list, results: list) -> None:
        if self.in_place_only:
            for s, tensor in self.in_place_checks:
                if env[s] is not tensor._data:
                    break
            else:  # nothing to write: the kernels wrote every state (reads saw start-of-run values, as planned)
                for tensor, count in self.bump_plan:
                    vc = tensor._vc
                    if vc is None:
                        tensor._vc = [count]
                    else:
                        vc[0] += count
                return
        targets = [tensor._data for _, tensor in self.writes]
        backend = _BoundsMemo(self.writes[0][1]._device.backend)
        # One bounds check per value against all targets at once (sorted, merged intervals): a training
        # step writes back hundreds of parameters and buffers, and asking may_share_memory for every
        # (value, target) pair cost a ResNet-18 step ~35,000 calls.
        overlaps = _Overlaps(backend, targets)
        handed = self._handed_over(env, results, targets, backend) if any(self.rebind) else ()
        values = []
        for k, ((s, _), target) in enumerate(zip(self.writes, targets)):
            value = env[s]
            if value is target or k in handed or self.filled[k]:  # computed in place or filled (memory planning),
                # or handed over below
                values.append(None)
                continue
            if overlaps(value):
                value = value.copy()  # a swap or a view of another state: read before anything is written
            values.append(value)
        for k, r in enumerate(results):
            if overlaps(r):  # False for non-arrays (Python numbers)
                results[k] = r.copy()  # a fetched state must show its value from before the writes
        for target, value in zip(targets, values):
            # (a large one in halves on the hot worker while it spins after the step's products: w1hot21)
            if value is not None and not cpu_hot_ufuncs.copy_into(target, value):
                target[...] = value
        for k in handed:
            self.writes[k][1]._data = env[self.writes[k][0]]
        for (_, tensor), count in zip(self.writes, self.write_bumps):
            tensor._bump()
            if count > 1:
                tensor._vc[0] += count - 1

    def _handed_over(self, env: list, results: list, targets: list, backend: Any) -> set:
        """Writes (indices) whose tensor may take the run's array itself: an escaped state's new value
        that shares memory with nothing else the run was given, wrote or returns (bounds test), and is
        writeable (not an expanded view)."""
        candidates = {k: env[self.writes[k][0]] for k, ok in enumerate(self.rebind) if ok}
        others = [env[s] for s in self.given] + targets + results
        others += [env[self.writes[k][0]] for k, ok in enumerate(self.rebind) if not ok]
        by_owner = self._handed_by_owner(candidates, others, backend)
        if by_owner is not None:
            return by_owner
        intervals = []  # (low, high, write index or -1)
        for k, value in candidates.items():
            bounds = backend.memory_bounds(value)
            if bounds is not None and backend.is_writeable(value):
                intervals.append((*bounds, k))
        if not intervals:
            return set()
        intervals += [(*b, -1) for b in map(backend.memory_bounds, others) if b is not None]
        intervals.sort()
        handed: set = set()
        end, group = None, []
        for low, high, k in intervals + [(None, None, -1)]:  # clusters of overlapping intervals
            if low is None or end is None or low >= end:
                if len(group) == 1 and group[0] >= 0:
                    handed.add(group[0])
                end, group = high, [k]
            else:
                end = max(end, high)
                group.append(k)
        return handed


    @staticmethod
    def _handed_by_owner(candidates: dict, others: list, backend: Any) -> set | None:
        """``_handed_over``'s answer from memory owners (``backend.memory_owner``, ~0.1 us an array, against
        ~1-3 us for bounds): a candidate whose allocation holds no other array of the run shares memory with
        none of them (allocations are disjoint). None when some array's owner is unknown (memory maps,
        foreign buffers, other backends): then the bounds test decides. Two views of one allocation count as
        sharing even where their bytes do not meet (the value is then copied, as any shared one is). The
        bounds test cost a W2 step ~100 of its ~150 us of write-back (one thread)."""
        owner_of = backend.memory_owner
        uses: dict[int, int] = {}
        for array in (*candidates.values(), *others):
            if array is None or isinstance(array, (np.generic, int, float, complex)):
                continue  # numbers (a fetched loss, a 0-d result NumPy gave as a scalar): no memory to share
            owner = owner_of(array)
            if owner is None:
                return None
            uses[id(owner)] = uses.get(id(owner), 0) + 1
        handed = set()
        for k, value in candidates.items():
            owner = None if isinstance(value, (np.generic, int, float, complex)) else owner_of(value)
            if owner is not None and uses[id(owner)] == 1 and value.size and backend.is_writeable(value):
                handed.add(k)
        return handed


def _planned_in_place(nodes: Sequence[Node], new: Value) -> bool:
    """Whether ``new`` (a state's new value) is an output the memory plan writes into its state's own buffer
    (fusion leaves ``new.node`` on the traced node, so the fused node is found by its outputs)."""
    for node in nodes:
        if node.op.category == "fused":
            for k, out in enumerate(node.outputs):
                if out is new:
                    names = getattr(node.op.impl, "outputs", ())
                    return k < len(names) and names[k] in getattr(node.op.impl, "out_into", {})
    return False


class _BoundsMemo:
    """The backend's ``memory_bounds`` and ``is_writeable`` for one write-back, each array's bounds computed once:
    states are both read and written, and one write-back asks for them several times (a W2 step ~100 times for
    ~50 arrays; each NumPy address lookup costs ~1-3 us). Keyed by ``id``: every array asked about is held by the
    run (its environment, the states, the results) until the write-back ends, so no id is reused meanwhile."""

    __slots__ = ("backend", "known", "memory_owner")

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.known: dict[int, Any] = {}
        self.memory_owner = backend.memory_owner  # cheap: nothing to remember

    def memory_bounds(self, array: Any) -> tuple[int, int] | None:
        key = id(array)
        if key in self.known:
            return self.known[key]
        bounds = self.known[key] = self.backend.memory_bounds(array)
        return bounds

    def is_writeable(self, array: Any) -> bool:
        return self.backend.is_writeable(array)


class _Overlaps:
    """``overlaps(a)``: whether array ``a`` may share memory with any of ``targets`` (the bounds test of
    ``may_share_memory``, answered by a binary search over the targets' merged byte intervals). An array whose
    memory owner (``backend.memory_owner``: the allocation it is, or is a view of) owns no target's memory and
    meets no target of unknown owner is answered without addresses: a step over many small parameters spent
    ~28% of its time computing bounds (docs/cpu-performance.md)."""

    def __init__(self, backend: Any, targets: Sequence[Any]) -> None:
        self.bounds = backend.memory_bounds
        self.owner = backend.memory_owner
        self.owners: set[int] = set()  # ids of the targets' owners: each held by its target meanwhile
        unknown = []
        for target in targets:
            owner = self.owner(target)
            if owner is None:
                unknown.append(target)
            else:
                self.owners.add(id(owner))
        self.targets = targets
        self.unknown = self._intervals(unknown) if unknown else None
        self.all: tuple | None = None  # every target's intervals, made when first needed

    def _intervals(self, arrays: Sequence[Any]) -> tuple[list[int], list[int]]:
        merged: list[list[int]] = []
        for low, high in sorted(b for b in map(self.bounds, arrays) if b is not None):
            if merged and low < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        return [low for low, _ in merged], [high for _, high in merged]

    @staticmethod
    def _meets(intervals: tuple[list[int], list[int]], bounds: tuple[int, int] | None) -> bool:
        if bounds is None:  # not an array, or an empty one
            return False
        starts, ends = intervals
        k = bisect.bisect_left(starts, bounds[1]) - 1  # the last interval starting below our end
        return k >= 0 and ends[k] > bounds[0]

    def __call__(self, array: Any) -> bool:
        owner = self.owner(array)
        if owner is not None and id(owner) not in self.owners:  # no target of a known owner can overlap it
            return self.unknown is not None and self._meets(self.unknown, self.bounds(array))
        bounds = self.bounds(array)
        if bounds is None:
            return False
        if self.all is None:
            self.all = self._intervals(self.targets)
        return self._meets(self.all, bounds)
