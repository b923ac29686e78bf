"""Elementwise fusion: a chain (or DAG) of elementwise ops with one loop shape, optionally ending in
a ``sum``/``mean``, becomes one kernel node.

Eligibility and math come from the op records alone: an elementwise op fuses when its own ``impl``
runs on the symbolic namespace of :mod:`~ember.graph.passes.symbolic_xp`, which turns it into
three-address steps (so the kernel performs exactly the calls eager performs: no second copy of
the math to drift); a ``sum``/``mean``-style reduction may end a group the same way.

Kernels: the device backend's :meth:`~ember.backends.Backend.fuse` hook gets first try with the
kernel *source* - one line per step, ``name = fn(arg, ...)`` in NumPy ufunc names, inputs ``in0..``,
outputs listed in a ``# outputs:`` header - and may return a compiled callable
``kernel(*inputs) -> tuple of outputs`` (CuPy's ElementwiseKernel on GPU). Otherwise (CPU) the
steps run as NumPy ufunc calls with ``out=`` into scratch buffers kept by the kernel across runs
(temporaries reuse each other's buffers once dead), which measured faster here than numexpr-style
string evaluation for the small arrays of training steps and needs no compiler.

Example:
    >>> import ember
    >>> from ember.graph.ir import Graph
    >>> from ember.ops.registry import OPS
    >>> g = Graph(); x = g.add_input((4,), ember.float64)
    >>> (a,) = g.add_node(OPS["mul"], (x, 2.0), {}); (b,) = g.add_node(OPS["exp"], (a,), {})
    >>> [n.op.name for n in fuse_nodes(g.nodes, {b.id}, __import__("numpy"))]
    ['fused']
"""
from __future__ import annotations

import heapq
from typing import Any, Sequence

import numpy as np

from ember.backends import backend_for, native_kernel, special_function
from ember.backends.cpu_threads import parallel_for
from ember.graph.ir import Node, Value, device_xp
from ember.graph.passes import fuse_blocks, fuse_later, kernel_text
from ember.graph.passes.fuse_numba import PARALLEL_MIN_CHUNK
from ember.graph.passes.symbolic_xp import SPECIAL, Untraceable, trace_impl
from ember.ops.fma import fma_arrays
from ember.ops.registry import OpDef

_ELEMENTWISE = ("unary", "binary", "ternary", "cast")
_REDUCTIONS = ("sum", "mean")


def _trace(node: Node) -> tuple | None:
    """The steps of ``node``'s own ``impl`` run on the symbolic namespace (cached on the node's attrs
    dict under a private key), or None when it cannot be fused."""
    cached = _TRACES.get(id(node))
    if cached is not None and cached[0] is node:
        return cached[1]
    op = node.op
    result = None
    if len(node.outputs) == 1 and not (op.side_effect or op.random) and (
            op.category in _ELEMENTWISE or op.category == "reduction"):
        constants = [None if isinstance(i, Value) else i for i in node.inputs]
        dts = [i.dtype if isinstance(i, Value) else None for i in node.inputs]
        ranks = [len(i.shape) if isinstance(i, Value) else 0 for i in node.inputs]
        try:
            steps, out = trace_impl(op.impl, dts, ranks, node.attrs, constants)
        except Untraceable:
            steps = None
        if steps is not None:
            reductions = [k for k, s in enumerate(steps) if s[1] in _REDUCTIONS]
            if op.category == "reduction":
                # One reduction of the input, then at most casts of its result (float16's float32 sum).
                ok = len(reductions) == 1 and reductions[0] == 0 and steps[0][2] == ["x0"] and \
                    all(s[1] == "cast" for s in steps[1:])
            else:
                ok = not reductions
            result = (steps, out) if ok else None
    _TRACES[id(node)] = (node, result)
    return result


# id(node) -> (node, trace): a node is traced once per compile however often grouping asks.
_TRACES: dict[int, tuple] = {}


def fusable(node: Node) -> bool:
    """An elementwise node whose ``impl`` the symbolic namespace can replay."""
    return node.op.category in _ELEMENTWISE and _trace(node) is not None


def _reducer(node: Node) -> bool:
    """A ``sum``/``mean`` style reduction that can end a fused group."""
    return node.op.category == "reduction" and _trace(node) is not None


# ---- grouping ------------------------------------------------------------------------------------
def fuse_nodes(nodes: Sequence[Node], keep: set, xp: Any) -> list[Node]:
    """Replace fusable groups in ``nodes`` by fused nodes; values in ``keep`` stay materialized.
    (See :func:`_fuse_nodes`.)"""
    try:
        return _fuse_nodes(nodes, keep, xp)
    finally:
        _TRACES.clear()


def _fuse_nodes(nodes: Sequence[Node], keep: set, xp: Any) -> list[Node]:
    """Group and fuse (the work of :func:`fuse_nodes`).

    A node joins the group of one of its inputs (same loop shape, no cycle through an outside
    node); when its inputs come from several such groups, those groups merge into one (Adam's
    update reads the gradient's square and the moments from separate chains: one loop, not three).
    """
    group_of: dict[int, int] = {}  # id(node) -> group index (follow ``find`` after merges)
    groups: list[list[Node]] = []
    parent: list[int] = []  # union-find over group indices
    has_reducer: list[bool] = []
    reduced: set[int] = set()  # values made by a fused reduction
    deps: dict[int, frozenset] = {}  # value id -> groups it depends on (raw indices) when it was made
    # group -> groups its members read from (raw indices). A value's deps are fixed when it is made, but its
    # producer group may later take in a member that reads another group: the groups then depend on each other
    # as kernels, so dependence is followed through this map too (without it, two groups could each wait for
    # the other: a cyclic schedule).
    group_deps: list[set] = []
    producer_group: dict[int, int] = {}  # value id -> group index of its producer (raw)
    shape_of_group: list[tuple] = []
    order = {id(n): k for k, n in enumerate(nodes)}

    def find(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    def group(v: Value) -> int | None:
        g = producer_group.get(v.id)
        return None if g is None else find(g)

    def depends(v: Value, targets: set) -> bool:
        """Whether ``v`` needs a group of ``targets`` to run first, directly or through other groups."""
        todo = [find(d) for d in deps.get(v.id, ())]
        seen: set = set()
        while todo:
            g = todo.pop()
            if g in targets:
                return True
            if g in seen:
                continue
            seen.add(g)
            todo.extend(find(d) for d in group_deps[g])
        return False

    def can_merge(g: int, h: int, node: Node) -> bool:
        """No member of g, h or ``node`` reads a value made outside them that depends on g or h."""
        both = {g, h}
        for m in (*groups[g], *groups[h], node):
            for j in m.inputs:
                if isinstance(j, Value) and group(j) not in both and depends(j, both):
                    return False
        return True

    for node in nodes:
        ins = [i for i in node.inputs if isinstance(i, Value)]
        upstream = frozenset().union(*(deps.get(i.id, frozenset()) for i in ins)) if ins else frozenset()
        chosen = None
        if fusable(node) or _reducer(node):
            out_shape = _loop(node.outputs[0])
            if any(i.id in reduced for i in ins):
                ins_groups = []  # a reduced value is complete only after its kernel: start a new group
            else:
                # A group with a reduction takes in no other group (see the merge below), so a node joins a group
                # without one first: fma(a*b from the loss's group, g, beta2*v) must not strand beta2*v alone.
                ins_groups = sorted(ins, key=lambda v: group(v) is not None and has_reducer[group(v)])
            for i in ins_groups:
                g = group(i)
                if g is None:
                    continue
                if fusable(node) and shape_of_group[g] != out_shape:
                    continue
                if _reducer(node) and shape_of_group[g] != _loop(i):
                    continue
                # Joining g must not create a cycle through a node outside g.
                if all(group(j) == g or not depends(j, {g}) for j in ins):
                    chosen = g
                    break
            if chosen is not None and fusable(node):
                for i in ins_groups:
                    h = group(i)
                    if h is None or h == chosen or shape_of_group[h] != out_shape or has_reducer[h] \
                            or has_reducer[chosen] or not can_merge(chosen, h, node):
                        continue
                    parent[h] = chosen
                    groups[chosen] = sorted(groups[chosen] + groups[h], key=lambda n: order[id(n)])
                    groups[h] = []
                    group_deps[chosen] |= group_deps[h]
            if chosen is None and fusable(node):
                chosen = len(groups)
                groups.append([])
                parent.append(chosen)
                has_reducer.append(False)
                shape_of_group.append(out_shape)
                group_deps.append(set())
        if chosen is not None:
            groups[chosen].append(node)
            group_of[id(node)] = chosen
            group_deps[chosen] |= {find(d) for d in upstream} - {chosen}
            if _reducer(node):
                reduced.add(node.outputs[0].id)
                has_reducer[chosen] = True
            for out in node.outputs:
                producer_group[out.id] = chosen
                deps[out.id] = upstream | {chosen}
        else:
            for out in node.outputs:
                deps[out.id] = upstream
    # Members of a group read outside the group (or kept) become the fused node's outputs.
    used_outside: set[int] = set(keep)
    for node in nodes:
        g = group_of.get(id(node))
        g = None if g is None else find(g)
        for i in node.inputs:
            if isinstance(i, Value) and (g is None or group(i) != g):
                used_outside.add(i.id)
    units: list[Any] = []
    unit_of_group: dict[int, int] = {}
    for node in nodes:
        g = group_of.get(id(node))
        if g is None:
            units.append(node)
            continue
        g = find(g)
        if g not in unit_of_group:
            members = groups[g]
            unit_of_group[g] = len(units)
            units.append(members[0] if len(members) == 1 and not _reducer(members[0]) else
                         make_fused_node(members, used_outside, device_xp(members[0], xp)))
    return _toposort(units)


def _loop(v: Value) -> tuple:
    """What a fused loop runs over: a shape on one device (a group never spans two devices)."""
    return v.shape, str(v.device)


def _toposort(units: list[Node]) -> list[Node]:
    """Order units so each runs after its inputs' producers, preferring the original order."""
    produced_by: dict[int, int] = {}
    for k, u in enumerate(units):
        for out in u.outputs:
            produced_by[out.id] = k
    waiting = [0] * len(units)
    users: list[list[int]] = [[] for _ in units]
    for k, u in enumerate(units):
        srcs = {produced_by[i.id] for i in u.inputs if isinstance(i, Value) and i.id in produced_by}
        srcs.discard(k)
        waiting[k] = len(srcs)
        for s in srcs:
            users[s].append(k)
    ready = [k for k in range(len(units)) if waiting[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        k = heapq.heappop(ready)
        order.append(units[k])
        for u in users[k]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(units):
        raise RuntimeError("fusion produced a cyclic schedule (an ember bug); compile with passes=[] to avoid it")
    return order


# ---- code generation -----------------------------------------------------------------------------
def _steps_for(node: Node, names: dict, steps: list, counter: list) -> str:
    """Append the steps of ``node``'s traced ``impl``, renamed into the kernel; return the name holding
    its result. Trace inputs ``x0..`` map to the kernel's names for the node's inputs."""
    trace_steps, result = _trace(node)
    rename = {f"x{k}": names[i.id] for k, i in enumerate(node.inputs) if isinstance(i, Value)}
    for name, fn, operands, kwargs in trace_steps:
        counter[0] += 1
        rename[name] = f"t{counter[0]}"
        steps.append((rename[name], fn, [rename[o] if isinstance(o, str) else o for o in operands], kwargs))
    if isinstance(result, str) and result in rename and rename[result].startswith("t") and trace_steps:
        return rename[result]
    # The impl returned an input or a constant: the node's value still needs its own array.
    counter[0] += 1
    name = f"t{counter[0]}"
    steps.append((name, "copy", [rename.get(result, result) if isinstance(result, str) else result], {}))
    return name


# Namespace functions (not ufuncs) that accept ``out=``; any other non-ufunc step allocates its result.
_OUT_FUNCTIONS = ("clip", "round", "sum", "mean")


def _resolve(xp: Any, fn: str) -> tuple[Any, str]:
    """The callable a step runs on namespace ``xp`` and how: ``"ufunc"`` (called with ``out=``),
    ``"out"`` (a function taking ``out=``), ``"plain"`` (allocates), or a special handling name."""
    if fn in ("cast", "where", "copy"):
        return None, fn
    if fn == "fma":  # a * b + c rounded once (ember/ops/fma.py), on any array namespace
        # "out": writes into a scratch buffer or, in place, over an input (fma_arrays reads before it writes)
        return (lambda a, b, c, out=None: fma_arrays(xp, a, b, c, out=out)), "out"
    if fn in SPECIAL:
        return special_function(xp, fn), "plain"
    if fn == "sum" and xp is np:
        return _numpy_sum, "out"
    f = getattr(xp, fn)
    if isinstance(f, getattr(xp, "ufunc", np.ufunc)):
        return f, "ufunc"
    return f, ("out" if fn in _OUT_FUNCTIONS else "plain")


def _numpy_sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """``np.sum`` as the ufunc reduction it calls for an ndarray (the same call: the same bits), without
    ``np.sum``'s Python wrapper: W1's loss kernel spent 8 of its 19 us in the step's one ``sum`` of 640 values."""
    return np.add.reduce(a, axis, dtype, out, keepdims)


def _call(xp: Any, fn: str, operands: list, kwargs: Any, out: Any) -> Any:
    f, mode = _resolve(xp, fn)
    return _run(xp, f, mode, operands, kwargs or {}, out)


def _run(xp: Any, f: Any, mode: str, operands: list, kwargs: dict, out: Any) -> Any:
    if mode == "ufunc":
        return f(*operands, out=out, **kwargs)
    if mode == "cast":
        if out is None:
            return xp.asarray(operands[0]).astype(kwargs["dtype"])
        xp.copyto(out, operands[0], casting="unsafe")
        return out
    if mode == "where":
        result = _native_where(xp, *operands)
        return xp.where(*operands) if result is None else result
    if mode == "copy":
        return xp.array(operands[0])
    result = f(*operands, out=out, **kwargs) if mode == "out" and out is not None else f(*operands, **kwargs)
    return xp.asarray(result)  # NumPy's full reductions return scalars


def _native_where(xp: Any, cond: Any, x: Any, y: Any) -> Any:
    """``xp.where`` through the backend's vectorized native select when the operands allow, else None.

    Covers a bool ``cond`` and float ``x``/``y`` of one shape, contiguous, one of them possibly a
    Python number (``where(mask, g, 0)`` in relu's gradient); NumPy's result dtype rules hold there.
    """
    array = xp.ndarray
    if not (isinstance(cond, array) and cond.dtype == np.bool_ and cond.flags.c_contiguous):
        return None
    flip = not isinstance(x, array)
    arr, other = (y, x) if flip else (x, y)
    if not (isinstance(arr, array) and arr.shape == cond.shape and arr.dtype.kind == "f"
            and arr.dtype.itemsize >= 4 and arr.flags.c_contiguous):
        return None
    if isinstance(other, array):
        if flip or other.shape != arr.shape or other.dtype != arr.dtype or not other.flags.c_contiguous:
            return None
        name = "where_arrays"
    elif isinstance(other, (int, float)) and not isinstance(other, bool):
        name = "where_scalar"
    else:
        return None
    kernel = native_kernel(xp, name)
    if kernel is None:
        return None
    out = xp.empty(arr.shape, dtype=arr.dtype)
    if name == "where_arrays":
        kernel(cond.reshape(-1), arr.reshape(-1), other.reshape(-1), out.reshape(-1))
    else:
        kernel(cond.reshape(-1), arr.reshape(-1), arr.dtype.type(other), flip, out.reshape(-1))
    return out


def _is_zero(o: Any) -> bool:
    return isinstance(o, (int, float)) and not isinstance(o, bool) and o == 0


def _relu_grad_sum_rows_plan(steps: list, outputs: list) -> tuple[int, int] | None:
    """(g's input index, relu output's input index) when a kernel is exactly relu's gradient followed by the
    sum of its rows (``where(~(y <= 0), g, 0)`` then ``sum(axis=0)``: a dense layer's bias gradient under its
    relu, W2's ``relu_grad+sum``), else None. Four NumPy sweeps over the batch become one native pass."""
    if len(steps) != 4 or not set(outputs) <= {steps[2][0], steps[3][0]} or steps[3][0] not in outputs:
        return None
    (n1, f1, o1, k1), (n2, f2, o2, k2), (n3, f3, o3, k3), (_, f4, o4, k4) = steps
    if (f1, f2, f3, f4) != ("less_equal", "invert", "where", "sum") or k1 or k2 or k3:
        return None
    if not (len(o1) == 2 and _is_zero(o1[1]) and o2 == [n1] and len(o3) == 3 and o3[0] == n2 and _is_zero(o3[2])
            and o4 == [n3] and k4.get("keepdims") is False and _leading_axes(k4.get("axis"))):
        return None
    y, g = o1[0], o3[1]
    if not (isinstance(y, str) and isinstance(g, str) and y.startswith("in") and g.startswith("in")):
        return None
    return int(g[2:]), int(y[2:])


def _leading_axes(axis: Any) -> bool:
    """Whether a sum's ``axis`` is 0 or the leading axes ``(0, 1, ...)`` (a 3-D batch of rows: a Transformer's MLP)."""
    if axis == 0 and not isinstance(axis, bool):
        return True
    return isinstance(axis, tuple) and len(axis) >= 1 and axis == tuple(range(len(axis)))


def _relu_grad_sum_rows(xp: Any, g: Any, y: Any, axis: Any = 0) -> tuple | None:
    """(relu's gradient, its row sum) by the backend's native kernel, or None when it has none or the operands
    are not two C-contiguous float32/float64 matrices of one shape and dtype (``axis`` the leading axes of a
    contiguous N-D batch: its rows, reshaped to a matrix; NumPy sums them in the same order). Split over ember's threads by
    columns (each column's sum keeps its order, so the bits do not depend on the threads)."""
    array = xp.ndarray
    if isinstance(axis, tuple) and isinstance(g, array) and g.ndim >= 2 and axis == tuple(range(g.ndim - 1)) \
            and g.flags.c_contiguous \
            and isinstance(y, array) and y.shape == g.shape and y.flags.c_contiguous:
        # leading axes of contiguous arrays: NumPy sums them as one axis of rows, in order (the same bits)
        shape = g.shape
        done = _relu_grad_sum_rows(xp, g.reshape(-1, shape[-1]), y.reshape(-1, shape[-1]))
        return None if done is None else (done[0].reshape(shape), done[1])
    if not (isinstance(g, array) and isinstance(y, array) and g.ndim == 2 and g.shape == y.shape
            and g.dtype == y.dtype and g.dtype in (np.float32, np.float64) and g.flags.c_contiguous
            and y.flags.c_contiguous):
        return None
    kernel = native_kernel(xp, "relu_grad_sum_rows")
    if kernel is None:
        return None
    rows, cols = g.shape
    result, total, zero = xp.empty_like(g), xp.empty(cols, g.dtype), g.dtype.type(0)
    if g.size < 2 * PARALLEL_MIN_CHUNK:  # a hand-off to a sleeping worker costs more than half of this saves
        kernel(g, y, zero, result, total, 0, cols)
    else:
        parallel_for(lambda c0, c1: kernel(g, y, zero, result, total, c0, c1), cols,
                     min_chunk=max(1, PARALLEL_MIN_CHUNK // max(rows, 1)))
    return result, total


class FusedKernel:
    """Steps over inputs ``in0..``; scratch buffers are made on the first call and reused."""

    def __init__(self, steps: list, inputs: int, outputs: list[str], source: str, xp: Any) -> None:
        self.steps = steps
        self.n_inputs = inputs
        self.outputs = outputs
        self.source = source
        self.xp = xp
        self.calls = [_resolve(xp, fn) for _, fn, _, _ in steps]
        self.plan: list | None = None
        self.single = len(outputs) == 1
        self.out_into: dict[str, int] = {}  # set by memory planning: step name -> input it writes into
        self.fill_after: dict[int, Any] = {}  # set by memory planning: input -> the constant it holds after the call
        self.input_dtypes: tuple = ()  # NumPy dtypes of in0.., set by make_fused_node
        self.relu_grad_sum_rows = _relu_grad_sum_rows_plan(steps, outputs)  # (g, y) input indices, or None
        # Promotion to a compiled loop after fuse_later.RUNS runs (set by make_fused_node where allowed)
        self.later = False
        self.runs = 0
        self.loop: Any = None
        self.out_values: list = []  # the graph Values computed (shapes, dtypes), for the compiled loop
        self.blocks: Any = None  # the cache-blocked form on NumPy (fuse_blocks), set by the first run

    def writes_in_place(self, index: int) -> bool:
        """Whether step ``index`` can write its result over an input of its own shape and dtype
        (NumPy ufuncs handle exact aliasing of an input and the output; so does ember's fma)."""
        return self.calls[index][1] == "ufunc" or self.steps[index][1] == "fma"

    def _first(self, arrays: tuple) -> tuple:
        xp = self.xp
        env = {f"in{k}": a for k, a in enumerate(arrays)}
        last_use: dict[str, int] = {}
        for k, (_, _, operands, _) in enumerate(self.steps):
            for o in operands:
                if isinstance(o, str):
                    last_use[o] = k
        for o in self.outputs:
            last_use[o] = len(self.steps)
        free: dict[tuple, list] = {}
        plan = []
        bufs: dict[str, Any] = {}  # temporary -> its scratch buffer

        def release(k: int) -> None:
            for o in operands:  # temporaries whose last reader is step k free their buffer
                b = bufs.pop(o, None) if isinstance(o, str) and last_use.get(o) == k else None
                if b is not None:
                    free.setdefault((b.shape, b.dtype), []).append(b)

        for k, ((name, fn, operands, kwargs), (f, mode)) in enumerate(zip(self.steps, self.calls)):
            vals = [env[o] if isinstance(o, str) else o for o in operands]
            target = arrays[self.out_into[name]] if name in self.out_into else None
            result = _run(xp, f, mode, vals, kwargs, target)
            env[name] = result
            buf = None
            key = (tuple(getattr(result, "shape", ())), getattr(result, "dtype", None))
            if mode == "ufunc":
                release(k)  # an elementwise ufunc may write over an operand it is the last to read
            if target is not None:
                buf = "inplace"
            elif mode in ("ufunc", "out", "cast") and hasattr(result, "shape") and name not in self.outputs:
                pool = free.get(key)
                buf = pool.pop() if pool else xp.empty(key[0], dtype=key[1])
                bufs[name] = buf
            plan.append((name, f, mode, operands, kwargs, buf))
            release(k)
        self.plan = plan
        self.blocks = fuse_blocks.plan_blocks(self, arrays, env, _run)
        outs = tuple(env[o] for o in self.outputs)
        return outs[0] if self.single else outs

    def __call__(self, xp: Any, *arrays: Any, out: Any = None) -> tuple:
        if self.fill_after:
            return self._then_fill(xp, arrays)
        return self._compute(xp, arrays)

    def _then_fill(self, xp: Any, arrays: tuple) -> Any:
        """The kernel, then each ``fill_after`` input filled with its constant (memory.plan_fills): a compiled loop
        fills each element right after reading it; here the fill follows the steps, after any output that shares
        memory with the filled input (a step that returned its operand) is copied out."""
        result = self._compute(xp, arrays)
        if self.loop is not None:
            return result  # the loop filled them
        outs = list(result) if not self.single else [result]
        for q, value in self.fill_after.items():
            target = arrays[q]
            outs = [o.copy() if xp.may_share_memory(o, target) else o for o in outs]
            target[...] = value
        return outs[0] if self.single else tuple(outs)

    def _compute(self, xp: Any, arrays: tuple) -> Any:
        if self.later:
            if self.loop is not None:
                return self.loop(xp, *arrays)
            self.runs += 1
            if self.runs > fuse_later.RUNS:
                self.loop = fuse_later.compiled(self)
                return self.loop(xp, *arrays)
        if self.relu_grad_sum_rows is not None and not self.out_into:
            gi, yi = self.relu_grad_sum_rows
            axis = self.steps[3][3]["axis"]
            done = _relu_grad_sum_rows(xp, arrays[gi], arrays[yi], axis) if axis != 0 else \
                _relu_grad_sum_rows(xp, arrays[gi], arrays[yi])
            if done is not None:
                named = dict(zip((self.steps[2][0], self.steps[3][0]), done))
                return named[self.outputs[0]] if self.single else tuple(named[o] for o in self.outputs)
        if self.plan is None:
            return self._first(arrays)
        if self.blocks is not None:
            done = fuse_blocks.run_blocked(self.blocks, arrays)
            if done is not None:
                return done[self.outputs[0]] if self.single else tuple(done[o] for o in self.outputs)
        env = {f"in{k}": a for k, a in enumerate(arrays)}
        for name, f, mode, operands, kwargs, buf in self.plan:
            if buf is not None and buf.__class__ is str:
                buf = arrays[self.out_into[name]]
            vals = [env[o] if o.__class__ is str else o for o in operands]
            # A plain ufunc is called directly: _run's dispatch costs ~1 us a step.
            if mode == "ufunc":
                env[name] = f(*vals, out=buf, **kwargs) if kwargs else f(*vals, out=buf)
            else:
                env[name] = _run(xp, f, mode, vals, kwargs, buf)
        if self.single:
            return env[self.outputs[0]]
        return tuple(env[o] for o in self.outputs)


def _single_loop(members: list[Node]) -> bool:
    """One loop can run the group: reductions are over everything and nothing inside reads them."""
    return all(m.attrs.get("dims") is None for m in members if _reducer(m))


def _literal(value: Any) -> str:
    """Kernel source text for a step keyword: dtypes by name, numbers and axes as Python literals."""
    return f"'{kernel_text.name_of_dtype(value)}'" if isinstance(value, np.dtype) else kernel_text.literal(value)


def make_fused_node(members: list[Node], used_outside: set, xp: Any) -> Node:
    names: dict[int, str] = {}
    inputs: list[Value] = []
    member_outs = {o.id for n in members for o in n.outputs}
    for n in members:
        for i in n.inputs:
            if isinstance(i, Value) and i.id not in member_outs and i.id not in names:
                names[i.id] = f"in{len(inputs)}"
                inputs.append(i)
    steps: list = []
    counter = [0]
    outputs: list[Value] = []
    out_names: list[str] = []
    for n in members:
        result = _steps_for(n, names, steps, counter)
        out = n.outputs[0]
        names[out.id] = result
        if out.id in used_outside:
            outputs.append(out)
            out_names.append(result)
    lines = [f"# inputs: {', '.join(names[i.id] for i in inputs)}", f"# outputs: {', '.join(out_names)}"]
    for name, fn, operands, kwargs in steps:
        # Only kernel-made names and plain numbers reach the source text (kernel_text refuses the rest).
        args = [kernel_text.operand(o) for o in operands] + [f"{key}={_literal(value)}" for key, value in kwargs.items()]
        lines.append(f"{name} = {fn}({', '.join(args)})")
    source = "\n".join(lines)
    kernel: Any = FusedKernel(steps, len(inputs), out_names, source, xp)
    kernel.input_dtypes = tuple(i.dtype for i in inputs)  # a backend's compiler may not take every dtype
    compiled = backend_for(xp).fuse(kernel, outputs, _single_loop(members))
    if compiled is not None:  # the backend's own kernel (Numba on CPU): called as kernel(xp, *inputs)
        kernel = compiled
    elif backend_for(xp).name == "cpu" and fuse_later.eligible(kernel, outputs, _single_loop(members)):
        kernel.later, kernel.out_values = True, list(outputs)  # a compiled loop once it has run a few times
    label = "+".join(n.op.name for n in members)
    op = OpDef(name="fused", category="fused", impl=kernel, doc=f"{label}\n{source}")
    node = Node(op, tuple(inputs), {"ops": label}, tuple(outputs))
    return node
