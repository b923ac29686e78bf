"""Whole chains of identical scalar computations as one node (a lowering pass, before ``share_scalar``'s rounds).

A compiled Adam step keeps one step count per parameter, and its bias corrections are a chain of 0-d kernels
per parameter: the count's ``add+to_dtype``, a host ``pow`` per beta, ``sub+div+neg``, ``sub``, a ``pow`` of
0.5 and casts (seven nodes). :func:`ember.graph.passes.share_scalar.share_scalar_kernels` runs each *node* once
per distinct input, which still left seven program entries a step, each comparing every member's input bytes
and copying the results to the rest: ~210 us of a W2 step at one thread (one run each of ~8 NumPy calls on 0-d
arrays, cold in cache after the GEMMs), and for a GPT step (~50 parameters) seven times 50 byte compares and
copies. Here each *connected* group of scalar nodes (every input and output 0-d, pure: the nodes that
``share_scalar`` may group) is one unit: units with the same computation (the same nodes' keys, wired the same
way) become one node that compares each member's external inputs (the step count) once, runs the chain once
per distinct set of input bytes and copies only the values the rest of the graph reads (or keeps) to the other
members. The same kernels run in the same order on the same inputs, so every bit is as before.

A unit joins its group only when every external input it reads is made before the group's place (the first
node of the group's first unit), so moving its nodes there reads nothing early.

Example:
    >>> import numpy as np, ember
    >>> from ember.graph.ir import Graph
    >>> from ember.graph.executor import _node_callable
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); a = g.add_input((), ember.float64); b = g.add_input((), ember.float64)
    >>> outs = [g.add_node(OPS["exp"], (g.add_node(OPS["add"], (s, 1.0), {})[0],), {})[0] for s in (a, b)]
    >>> from ember.graph.passes.share_scalar import node_key
    >>> nodes = merge_scalar_chains(g.nodes, lambda n: _node_callable(n, np)[0], {o.id for o in outs}, node_key)
    >>> [n.attrs["ops"] for n in nodes]
    ['shared(chain add, exp) x2']
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.graph.ir import Node, Value
from ember.graph.passes.scalar_eval import node_steps, scalar_program
from ember.ops.registry import OpDef


class ScalarChainKernel:
    """``kernel(xp, *inputs_of_member_0, *inputs_of_member_1, ...)``: each member's wanted values, in order. The
    chain runs once per distinct set of input bytes; members with the same bytes get copies (a later kernel may
    write into a value it reads). ``program``: ``(callable, input slots, first output slot, outputs)`` per node,
    slots ``0..n_inputs-1`` being one member's inputs."""

    def __init__(self, program: list, n_inputs: int, wanted: list[int], members: int,
                 fast: Callable[[Sequence[Any]], list] | None = None) -> None:
        self.program, self.n_inputs, self.wanted, self.members = program, n_inputs, wanted, members
        self.n_slots = n_inputs + sum(p[3] for p in program)
        # The chain on NumPy scalars (ember/graph/passes/scalar_eval.py), trusted after its first run matched the
        # kernels bit for bit; None: the kernels only.
        self.fast, self.checked, self.as_array = fast, False, []

    def run(self, ins: Sequence[Any]) -> list:
        env = list(ins) + [None] * (self.n_slots - self.n_inputs)
        for fn, slots, first, n_out in self.program:
            out = fn(*[env[s] for s in slots])
            if n_out == 1:
                env[first] = out
            else:
                env[first:first + n_out] = out
        return [env[s] for s in self.wanted]

    def __call__(self, xp: Any, *arrays: Any) -> tuple:
        if self.fast is not None and all(a.__class__ is np.ndarray and a.dtype in _FLOATS for a in arrays):
            if self.checked:
                return self._run_fast(arrays)
            slow = run_per_distinct_inputs(arrays, self.n_inputs, self.members, self.run)
            # The kernels give some results as NumPy scalars (a ufunc on 0-d arrays), others as 0-d arrays: so will
            # the scalar form, so that later nodes see the same types (a Numba kernel is compiled per type).
            self.as_array = [r.__class__ is np.ndarray for r in slow[:len(self.wanted)]]
            try:
                fast = self._run_fast(arrays)
            except Exception:  # noqa: BLE001  (a scalar form that cannot run: the kernels, for good)
                fast = None
            self.checked = fast is not None and all(
                a.__class__ is b.__class__ and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
                for a, b in zip(slow, fast))
            if not self.checked:
                self.fast = None
            return slow
        return run_per_distinct_inputs(arrays, self.n_inputs, self.members, self.run)

    def _run_fast(self, arrays: Sequence[Any]) -> tuple:
        """Every member's outputs as new 0-d arrays, the scalar chain run once per distinct input bytes."""
        results: list = []
        seen: dict = {}
        n, fast, asarray, as_array = self.n_inputs, self.fast, np.asarray, self.as_array
        for j in range(self.members):
            ins = arrays[j * n:(j + 1) * n]
            key = tuple(a.tobytes() for a in ins)
            values = seen.get(key)
            if values is None:
                values = seen[key] = fast(ins)
            # a new 0-d array each where the kernels made arrays (a later kernel may write into one)
            results.extend(asarray(v) if a else v for v, a in zip(values, as_array))
        return tuple(results)


def run_per_distinct_inputs(arrays: Sequence[Any], n_inputs: int, members: int,
                            compute: Callable[[Sequence[Any]], Sequence[Any]]) -> tuple:
    """Every member's outputs, in order, from ``arrays`` (``n_inputs`` per member): ``compute(ins)`` runs once per
    distinct set of input bytes, and members with the same bytes get copies (a later kernel may write into a
    value it reads). Shared by this pass's chains and ``share_scalar``'s single nodes."""
    results: list = []
    seen: dict = {}  # input bytes -> that member's outputs
    for j in range(members):
        ins = arrays[j * n_inputs:(j + 1) * n_inputs]
        key = tuple(a.tobytes() for a in ins) if all(type(a) is np.ndarray for a in ins) else None
        done = seen.get(key) if key is not None else None
        if done is not None:
            results.extend(r.copy() if isinstance(r, (np.ndarray, np.generic)) else r for r in done)
            continue
        out = compute(ins)
        if key is not None:
            seen[key] = out
        results.extend(out)
    return tuple(results)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _fast_form(unit_nodes: list[Node], program: list, n_in: int, wanted: list[int]) -> Callable | None:
    """The chain on NumPy scalars (``scalar_eval``), or None when some node is not translatable."""
    parts = []
    for node, (_, slots, first, n_out) in zip(unit_nodes, program):
        steps = node_steps(node)
        if steps is None:
            return None
        parts.append((steps, slots, first, n_out))
    return scalar_program(parts, n_in, wanted)


def _units(nodes: Sequence[Node], scalar: list[int]) -> list[list[int]]:
    """The connected groups (node indices, ascending) of the scalar nodes, linked through the values they pass."""
    parent = {k: k for k in scalar}

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    made_by = {o.id: k for k in scalar for o in nodes[k].outputs}
    for k in scalar:
        for v in nodes[k].inputs:
            if isinstance(v, Value) and v.id in made_by:
                a, b = find(k), find(made_by[v.id])
                if a != b:
                    parent[max(a, b)] = min(a, b)
    units: dict[int, list[int]] = {}
    for k in scalar:
        units.setdefault(find(k), []).append(k)
    return list(units.values())


def _signature(nodes: Sequence[Node], unit: list[int], key_of: Callable) -> tuple[tuple, list[Value]]:
    """What the unit computes (each node's key and where each of its inputs comes from) and its external inputs."""
    inside = {o.id: (i, j) for i, k in enumerate(unit) for j, o in enumerate(nodes[k].outputs)}
    external: list[Value] = []
    position: dict[int, int] = {}
    sig = []
    for k in unit:
        refs = []
        for v in nodes[k].inputs:
            if not isinstance(v, Value):
                continue  # literals are part of the node's key
            if v.id in inside:
                refs.append(("made",) + inside[v.id])
            else:
                if v.id not in position:
                    position[v.id] = len(external)
                    external.append(v)
                refs.append(("in", position[v.id]))
        sig.append((key_of(nodes[k]), tuple(refs)))
    return tuple(sig), external


def merge_scalar_chains(nodes: Sequence[Node], callable_of: Callable[[Node], Any], keep: set,
                        key_of: Callable[[Node], Any]) -> list[Node]:
    """``nodes`` with each set of two or more identical units of scalar nodes (see the module notes) replaced by
    one node at the place of the first unit's first node. ``keep``: ids of values fetched or written back (they
    stay outputs, as do values read by nodes outside the unit); ``key_of``: a node's computation key, None for a
    node that cannot take part (``share_scalar``'s)."""
    scalar = [k for k, n in enumerate(nodes) if key_of(n) is not None]
    if len(scalar) < 2:
        return list(nodes)
    made_at = {o.id: k for k, n in enumerate(nodes) for o in n.outputs}
    readers: dict[int, set[int]] = {}
    for k, n in enumerate(nodes):
        for v in n.inputs:
            if isinstance(v, Value):
                readers.setdefault(v.id, set()).add(k)
    groups: dict[tuple, list] = {}
    for unit in _units(nodes, scalar):
        sig, external = _signature(nodes, unit, key_of)
        groups.setdefault(sig, []).append((unit, external))
    replace: dict[int, Node] = {}
    dropped: set[int] = set()
    for sig, members in groups.items():
        if len(members) < 2:
            continue
        members.sort(key=lambda m: m[0][0])
        at = members[0][0][0]
        members = [m for m in members if all(made_at.get(v.id, -1) < at for v in m[1])]
        if len(members) < 2:
            continue
        wanted: list[tuple[int, int]] = []  # (node in unit, output) read outside its unit or kept, by any member
        for unit, _ in members:
            own = set(unit)
            for i, k in enumerate(unit):
                for j, o in enumerate(nodes[k].outputs):
                    if (o.id in keep or not readers.get(o.id, set()) <= own) and (i, j) not in wanted:
                        wanted.append((i, j))
        wanted.sort()
        lead_unit, lead_external = members[0]
        n_in = len(lead_external)
        first_slot, program, slot_of = n_in, [], {}
        for i, (k, (_, refs)) in enumerate(zip(lead_unit, sig)):
            slots = tuple(r[1] if r[0] == "in" else slot_of[(r[1], r[2])] for r in refs)
            n_out = len(nodes[k].outputs)
            program.append((callable_of(nodes[k]), slots, first_slot, n_out))
            for j in range(n_out):
                slot_of[(i, j)] = first_slot + j
            first_slot += n_out
        wanted_slots = [slot_of[w] for w in wanted]
        kernel = ScalarChainKernel(program, n_in, wanted_slots, len(members),
                                   _fast_form([nodes[k] for k in lead_unit], program, n_in, wanted_slots))
        names = ", ".join(str(nodes[k].attrs.get("ops", nodes[k].op.name)) for k in lead_unit)
        label = f"shared(chain {names}) x{len(members)}"
        doc = "\n".join([label] + [nodes[k].op.doc or nodes[k].op.name for k in lead_unit])
        op = OpDef(name="fused", category="fused", impl=kernel, doc=doc)
        inputs = tuple(v for _, external in members for v in external)
        outputs = tuple(nodes[unit[i]].outputs[j] for unit, _ in members for i, j in wanted)
        replace[at] = Node(op, inputs, {"ops": label}, outputs)
        dropped.update(k for unit, _ in members for k in unit)
    if not replace:
        return list(nodes)
    return [replace[k] if k in replace else n for k, n in enumerate(nodes) if k not in dropped or k in replace]
