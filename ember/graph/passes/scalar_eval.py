"""A chain of 0-d kernels evaluated on NumPy scalars with Python's operators (the fast form of a scalar chain).

A compiled Adam step's bias corrections (``scalar_chains``) are seven small kernels a step: the count's
``add+to_dtype``, three host ``pow``s, ``sub+div+neg+to_dtype``, ``sub`` and a cast. Run as kernels on 0-d
arrays they are ~25 NumPy calls (~1 us each hot), and inside a training step, right after a GEMM has swept the
caches, the node cost ~95-120 us of a W2 step's ~3.7 ms at one thread. The same arithmetic on NumPy scalars
(``np.float32``/``np.float64``) with Python's operators is ~0.1 us an operation.

Only IEEE operations whose scalar form rounds exactly as the ufunc on a 0-d array are translated: ``+ - * /``,
negation, float32/float64 casts, and ``host_pow`` (the C library's ``pow``, the same call its kernel makes).
Operands keep NumPy's promotion (NEP 50: Python numbers are weak on both sides, so ``np.float32(7) + 1`` is a
float32 as ``add(array(7, float32), 1)`` is). Anything else (another op, attributes such as ``alpha``, float16,
integers) leaves the chain as it was. ``ScalarChainKernel`` also checks the first run bit for bit against the
kernels and keeps the kernels for good if any output differs.

Example:
    >>> import numpy as np
    >>> steps = [("add", ("in", 0), 1), ("cast", ("t", 0), np.dtype(np.float64))]
    >>> run = scalar_program([(steps, (0,), 1, 1)], 1, [1])  # one node: input slot 0, its output in slot 1
    >>> [repr(v) for v in run((np.asarray(2, np.float32),))]
    ['np.float64(3.0)']
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ember.ops.host_pow import _c_pow

_OPS: dict[str, tuple[Callable, int]] = {
    "add": (operator.add, 2), "subtract": (operator.sub, 2), "sub": (operator.sub, 2),
    "multiply": (operator.mul, 2), "mul": (operator.mul, 2), "true_divide": (operator.truediv, 2),
    "div": (operator.truediv, 2), "negative": (operator.neg, 1), "neg": (operator.neg, 1),
}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _host_pow(a: Any, b: Any) -> np.float64:
    """``host_pow``'s kernel on two scalars: both as float64, the C library's ``pow``."""
    try:
        return np.float64(math.pow(float(a), float(b)))  # float() of a float32 or float64 scalar is exact
    except (ValueError, OverflowError, ZeroDivisionError):  # C's special values: host_pow's own answer
        return np.float64(_c_pow(float(a), float(b)))


def _cast_to(dtype: np.dtype) -> Callable:
    return dtype.type  # np.float32(np.float64(x)): round to nearest even, as astype


def node_steps(node: Any) -> list[tuple] | None:
    """``node``'s computation as steps ``(op name, operands...)`` over its Value inputs (``("in", k)``), earlier
    steps' results (``("t", j)``) and Python numbers; the node's outputs are the last ``len(outputs)`` steps in
    order for a single op, or the fused kernel's named outputs. None when some part is not translatable."""
    op = node.op
    if any(o.dtype not in _FLOATS for o in node.outputs):
        return None
    kernel = op.impl
    if op.category == "fused":
        if type(kernel).__name__ != "FusedKernel" or kernel.later:  # (fuse.py imports the passes: no import here)
            return None
        names = {f"in{k}": ("in", k) for k in range(kernel.n_inputs)}
        steps: list[tuple] = []
        for name, fn, operands, kwargs in kernel.steps:
            refs = []
            for o in operands:
                if isinstance(o, str):
                    if o not in names:
                        return None
                    refs.append(names[o])
                elif type(o) in (int, float):
                    refs.append(o)
                else:
                    return None
            if fn == "cast" and set(kwargs) == {"dtype"} and np.dtype(kwargs["dtype"]) in _FLOATS and len(refs) == 1:
                steps.append(("cast", refs[0], np.dtype(kwargs["dtype"])))
            elif fn in _OPS and not kwargs and len(refs) == _OPS[fn][1]:
                steps.append((fn, *refs))
            else:
                return None
            names[name] = ("t", len(steps) - 1)
        ends = [names.get(o) for o in kernel.outputs]
        if any(e is None or e[0] != "t" for e in ends):
            return None
        return _outputs_last(steps, [e[1] for e in ends])
    refs = []
    k = 0
    for v in node.inputs:
        if type(v) in (int, float):
            refs.append(v)
        elif hasattr(v, "shape") and v.shape == () and v.dtype in _FLOATS:
            refs.append(("in", k))
            k += 1
        else:
            return None
    if len(node.outputs) != 1:
        return None
    if op.name == "host_pow" and not node.attrs and len(refs) == 2:
        return [("host_pow", *refs)]
    if op.name == "to_dtype" and set(node.attrs) <= {"dtype", "source"} and len(refs) == 1:
        target = np.dtype(getattr(node.attrs["dtype"], "np", node.attrs["dtype"]))
        return [("cast", refs[0], target)] if target in _FLOATS else None
    if op.name in _OPS and not node.attrs and len(refs) == _OPS[op.name][1]:
        return [(op.name, *refs)]
    return None


def _outputs_last(steps: list[tuple], ends: list[int]) -> list[tuple]:
    """``steps`` plus copies (``("id", ref)``) so that the outputs are the last ``len(ends)`` steps, in order."""
    return steps + [("id", ("t", e)) for e in ends]


def scalar_program(nodes: Sequence[tuple], n_inputs: int, wanted: Sequence[int]) -> Callable:
    """One callable for a chain laid out as ``ScalarChainKernel``'s program: ``nodes`` are ``(steps, input
    slots, first output slot, outputs)`` per node (``steps`` from :func:`node_steps`, its ``("in", k)`` being the
    node's k-th input slot), slots ``0..n_inputs-1`` the chain's inputs; ``run(inputs)`` (0-d arrays) returns
    the ``wanted`` slots' values as NumPy scalars."""
    where: dict[int, int] = {k: k for k in range(n_inputs)}  # the kernels' slot -> this program's slot
    template: list = [None] * n_inputs
    literals: dict = {}
    program: list[tuple] = []  # (fn, operand slots, out slot)

    def operand(ref: Any, ins: Sequence[int], first: int) -> int:
        if isinstance(ref, tuple):
            return where[ins[ref[1]]] if ref[0] == "in" else first + ref[1]
        key = (type(ref), ref)  # a literal: a slot of its own, filled once
        if key not in literals:
            literals[key] = len(template)
            template.append(ref)
        return literals[key]

    for steps, ins, first_out, n_out in nodes:
        first = len(template)
        template.extend([None] * len(steps))
        for j, (name, *refs) in enumerate(steps):
            if name == "cast":
                fn, refs = _cast_to(refs[1]), refs[:1]
            elif name == "host_pow":
                fn = _host_pow
            elif name == "id":
                fn = None
            else:
                fn = _OPS[name][0]
            program.append((fn, tuple(operand(r, ins, first) for r in refs), first + j))
        for j in range(n_out):  # a node's outputs are its last steps
            where[first_out + j] = first + len(steps) - n_out + j
    out_slots = [where[s] for s in wanted]

    def run(inputs: Sequence[Any]) -> list:
        env = template[:]
        for k, a in enumerate(inputs):
            env[k] = a[()]  # the 0-d array's NumPy scalar, of its dtype
        for fn, slots, out in program:
            if fn is None:
                env[out] = env[slots[0]]
            elif len(slots) == 2:
                env[out] = fn(env[slots[0]], env[slots[1]])
            else:
                env[out] = fn(env[slots[0]])
        return [env[s] for s in out_slots]

    return run
