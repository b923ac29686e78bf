"""Elementwise fusion: a chain (or DAG) of elementwise ops with one loop shape, optionally ending in
a ``sum``/``mean``, becomes one kernel node.

Eligibility comes from the op records alone: an op with an ``expr`` formula and an elementwise
category fuses; ``expr`` is parsed (Python syntax, NumPy function names, ``x``/``y``/``z`` for the
inputs and attribute names such as ``min``) into three-address steps.

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

import ast
import heapq
from typing import Any, Sequence

import numpy as np

from ember.graph.ir import Node, Value
from ember.graph.passes import kernel_text
from ember.ops.registry import OpDef

_ELEMENTWISE = ("unary", "binary", "ternary", "cast")
_REDUCE = {"sum": "sum", "mean": "mean"}
_BINOPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "true_divide", ast.Pow: "power",
           ast.FloorDiv: "floor_divide", ast.Mod: "remainder"}
_UNOPS = {ast.USub: "negative", ast.Not: "logical_not", ast.Invert: "invert", ast.UAdd: "positive"}
_CMPOPS = {ast.Eq: "equal", ast.NotEq: "not_equal", ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater",
           ast.GtE: "greater_equal"}


def fusable(node: Node) -> bool:
    op = node.op
    return op.expr is not None and op.category in _ELEMENTWISE and len(node.outputs) == 1


def _reducer(node: Node) -> bool:
    return node.op.category == "reduction" and node.op.expr in _REDUCE and len(node.outputs) == 1


# ---- grouping ------------------------------------------------------------------------------------
def fuse_nodes(nodes: Sequence[Node], keep: set, xp: Any) -> list[Node]:
    """Replace fusable groups in ``nodes`` by fused nodes; values in ``keep`` stay materialized.

    A node joins the group of one of its inputs (same loop shape, no cycle through an outside
    node); when its inputs come from several such groups, those groups merge into one (Adam's
    update reads the gradient's square and the moments from separate chains: one loop, not three).
    """
    group_of: dict[int, int] = {}  # id(node) -> group index (follow ``find`` after merges)
    groups: list[list[Node]] = []
    parent: list[int] = []  # union-find over group indices
    has_reducer: list[bool] = []
    reduced: set[int] = set()  # values made by a fused reduction
    deps: dict[int, frozenset] = {}  # value id -> groups it depends on (raw indices)
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
        return any(find(d) in targets for d in deps.get(v.id, ()))

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
            out_shape = node.outputs[0].shape
            if any(i.id in reduced for i in ins):
                ins_groups = []  # a reduced value is complete only after its kernel: start a new group
            else:
                ins_groups = ins
            for i in ins_groups:
                g = group(i)
                if g is None:
                    continue
                if fusable(node) and shape_of_group[g] != out_shape:
                    continue
                if _reducer(node) and shape_of_group[g] != i.shape:
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
            if chosen is None and fusable(node):
                chosen = len(groups)
                groups.append([])
                parent.append(chosen)
                has_reducer.append(False)
                shape_of_group.append(out_shape)
        if chosen is not None:
            groups[chosen].append(node)
            group_of[id(node)] = chosen
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
                         make_fused_node(members, used_outside, xp))
    return _toposort(units)


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
    """Append the three-address steps computing ``node``; return the name holding its result."""
    args = [names[i.id] if isinstance(i, Value) else i for i in node.inputs]
    env = dict(zip("xyz", args))
    attrs = node.attrs

    def temp() -> str:
        counter[0] += 1
        return f"t{counter[0]}"

    def emit(fn: str, operands: list, extra: Any = None) -> str:
        name = temp()
        steps.append((name, fn, operands, extra))
        return name

    def walk(e: ast.AST) -> Any:
        if isinstance(e, ast.Name):
            if e.id in env:
                return env[e.id]
            if e.id in attrs:
                return attrs[e.id]
            if e.id in ("min", "max", "None"):
                return None
            raise KeyError(e.id)
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.BinOp):
            return emit(_BINOPS[type(e.op)], [walk(e.left), walk(e.right)])
        if isinstance(e, ast.UnaryOp):
            return emit(_UNOPS[type(e.op)], [walk(e.operand)])
        if isinstance(e, ast.Compare):
            return emit(_CMPOPS[type(e.ops[0])], [walk(e.left), walk(e.comparators[0])])
        if isinstance(e, ast.Call):
            fn = e.func.id
            operands = [walk(a) for a in e.args]
            if fn == "cast":
                return emit("cast", operands, attrs["dtype"].np)
            if fn == "round":
                return emit("round", operands, attrs.get("decimals", 0))
            return emit(fn, operands)
        raise ValueError(f"cannot fuse expression {ast.dump(e)}")

    if _reducer(node):
        return emit(_REDUCE[node.op.expr], [args[0]], (attrs.get("dims"), attrs.get("keepdim", False)))
    expr = node.op.expr
    result = walk(ast.parse(expr, mode="eval").body)
    if not isinstance(result, str) or not result.startswith("t"):
        result = emit("copy", [result])  # e.g. expr "x": an identity still needs its own value
    return result


# Steps _call treats specially; every other step is ``getattr(xp, fn)(*operands, out=out)``.
_SPECIAL = ("cast", "where", "copy", "round", "sum", "mean", "erf", "clip")


def _call(xp: Any, fn: str, operands: list, extra: Any, out: Any) -> Any:
    if fn == "cast":
        if out is None:
            return xp.asarray(operands[0]).astype(extra)
        xp.copyto(out, operands[0], casting="unsafe")
        return out
    if fn == "where":
        if xp is np:
            result = _native_where(*operands)
            if result is not None:
                return result
        return xp.where(*operands)
    if fn == "copy":
        return xp.array(operands[0])
    if fn == "round":
        return xp.round(operands[0], extra, out=out)
    if fn in ("sum", "mean"):
        dims, keepdim = extra
        axis = dims if dims is None or len(dims) != 1 else dims[0]
        result = getattr(xp, fn)(operands[0], axis=axis, keepdims=keepdim, out=out)
        return xp.asarray(result)
    if fn == "erf":
        from ember.backends import special_function

        return special_function(xp, "erf")(*operands) if out is None else special_function(xp, "erf")(*operands, out=out)
    if fn == "clip":
        x, lo, hi = (operands + [None, None])[:3]
        return xp.clip(x, lo, hi, out=out)
    return getattr(xp, fn)(*operands, out=out)


def _native_where(cond: Any, x: Any, y: Any) -> Any:
    """``np.where`` through a vectorized native select when the operands allow, else None.

    Covers a bool ``cond`` and float ``x``/``y`` of one shape, contiguous, one of them possibly a
    Python number (``where(mask, g, 0)`` in relu's gradient); NumPy's result dtype rules hold there.
    """
    if not (isinstance(cond, np.ndarray) and cond.dtype == np.bool_ and cond.flags.c_contiguous):
        return None
    flip = not isinstance(x, np.ndarray)
    arr, other = (y, x) if flip else (x, y)
    if not (isinstance(arr, np.ndarray) and arr.shape == cond.shape and arr.dtype.kind == "f"
            and arr.dtype.itemsize >= 4 and arr.flags.c_contiguous):
        return None
    if isinstance(other, np.ndarray):
        if flip or other.shape != arr.shape or other.dtype != arr.dtype or not other.flags.c_contiguous:
            return None
        name = "where_arrays"
    elif isinstance(other, (int, float)) and not isinstance(other, bool):
        name = "where_scalar"
    else:
        return None
    from ember.backends import cpu_kernels

    kernel = cpu_kernels.get(name)
    if kernel is None:
        return None
    out = np.empty(arr.shape, dtype=arr.dtype)
    if name == "where_arrays":
        kernel(cond.reshape(-1), arr.reshape(-1), other.reshape(-1), out.reshape(-1))
    else:
        kernel(cond.reshape(-1), arr.reshape(-1), arr.dtype.type(other), flip, out.reshape(-1))
    return out


class FusedKernel:
    """Steps over inputs ``in0..``; scratch buffers are made on the first call and reused."""

    def __init__(self, steps: list, inputs: int, outputs: list[str], source: str, xp: Any) -> None:
        self.steps = steps
        self.n_inputs = inputs
        self.outputs = outputs
        self.source = source
        self.xp = xp
        self.plan: list | None = None
        self.single = len(outputs) == 1
        self.out_into: dict[str, int] = {}  # set by memory planning: step name -> input it writes into

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

        for k, (name, fn, operands, extra) in enumerate(self.steps):
            vals = [env[o] if isinstance(o, str) else o for o in operands]
            target = arrays[self.out_into[name]] if name in self.out_into else None
            result = _call(xp, fn, vals, extra, target)
            env[name] = result
            buf = None
            ufunc = None if fn in _SPECIAL else getattr(xp, fn)
            key = (tuple(getattr(result, "shape", ())), getattr(result, "dtype", None))
            if ufunc is not None:
                release(k)  # an elementwise ufunc may write over an operand it is the last to read
            if target is not None:
                buf = "inplace"
            elif fn not in ("where", "copy") and hasattr(result, "shape") and name not in self.outputs:
                pool = free.get(key)
                buf = pool.pop() if pool else xp.empty(key[0], dtype=key[1])
                bufs[name] = buf
            plan.append((name, fn, operands, extra, buf, ufunc))
            release(k)
        self.plan = plan
        outs = tuple(env[o] for o in self.outputs)
        return outs[0] if self.single else outs

    def __call__(self, xp: Any, *arrays: Any, out: Any = None) -> tuple:
        if self.plan is None:
            return self._first(arrays)
        env = {f"in{k}": a for k, a in enumerate(arrays)}
        for name, fn, operands, extra, buf, ufunc in self.plan:
            if buf is not None and buf.__class__ is str:
                buf = arrays[self.out_into[name]]
            vals = [env[o] if o.__class__ is str else o for o in operands]
            # A plain ufunc is called directly: _call's dispatch costs ~1 us a step.
            env[name] = ufunc(*vals, out=buf) if ufunc is not None else _call(xp, fn, vals, extra, buf)
        if self.single:
            return env[self.outputs[0]]
        return tuple(env[o] for o in self.outputs)


def _single_loop(members: list[Node]) -> bool:
    """One loop can run the group: reductions are over everything and nothing inside reads them."""
    return all(m.attrs.get("dims") is None for m in members if _reducer(m))


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
    for name, fn, operands, extra in steps:
        # Only kernel-made names and plain numbers reach the source text (kernel_text refuses the rest).
        args = ", ".join(kernel_text.operand(o) for o in operands) + \
            (f", {kernel_text.literal(extra)}" if extra is not None else "")
        lines.append(f"{name} = {fn}({args})")
    source = "\n".join(lines)
    kernel: Any = FusedKernel(steps, len(inputs), out_names, source, xp)
    from ember.graph.passes import fuse_numba

    if xp is np and fuse_numba.worth_compiling(steps, outputs) and fuse_numba.supported(steps, len(outputs)) \
            and _single_loop(members) and fuse_numba.available():
        kernel = fuse_numba.NumbaKernel(steps, len(inputs), out_names, source, outputs)
    from ember.backends import get_backend

    compiled = get_backend("cpu" if xp is np else "cuda").fuse(source, "fused")
    if compiled is not None:  # the backend's own kernel: called as kernel(xp, *inputs)
        kernel = compiled
    label = "+".join(n.op.name for n in members)
    op = OpDef(name="fused", category="fused", impl=kernel, expr=source, doc=label,
               extra={"members": [n.op.name for n in members]})
    node = Node(op, tuple(inputs), {"ops": label}, tuple(outputs))
    return node
