"""FLOPs and bytes of an autograd node that ran through its op's array rules (``OpDef.array_vjp``).

The autograd engine computes most backward nodes of float32/float64 CPU tensors with array rules: NumPy calls
on the saved arrays, no op dispatch. A profile keeps that fast path (it shows the program as it runs
unprofiled, and recording each of the backward's ops would cost more than the 10% a profiler may take), so
such a node is one event without children. Its cost is what the node's ember-op rule (``OpDef.vjp``) would
dispatch, which computes the same values with the same NumPy calls
(``tests/autograd/test_array_vjp_matches_vjp.py``): the rule is run once per distinct signature, when the
trace is built, on the symbolic tensors of a throwaway graph (shapes only, nothing computed), and each node
it adds is costed by its op record's rules, as a graph node is.

Example:
    >>> import numpy as np
    >>> from ember.ops.registry import OPS
    >>> rule = ArrayRule(OPS["mul"], {}, ((2, 3), (2, 3)), (True, True), None, (2, 3), np.dtype("float32"))
    >>> backward_cost(rule)   # g * b and g * a: 6 FLOPs each, each reads 2 x 24 bytes, writes 24 (allocated)
    (12, 144, 48)
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ember import dtypes, interpreters
from ember.autograd import grad_mode
from ember.graph.api import _Ctx
from ember.graph.builder import Builder, symbolic
from ember.graph.ir import Graph, Value
from ember.ops.cost import op_bytes, op_flops
from ember.ops.registry import Spec


@dataclass(eq=False)
class ArrayRule:
    """What the profiler keeps of a node that ran through array rules (one per signature of a recording)."""

    op: Any  # the forward op record
    attrs: Any  # its attributes (dict) or None
    input_shapes: tuple  # the forward inputs' shapes (None for a Python scalar), as the node keeps them
    needs: tuple  # which inputs get a gradient
    scalars: Any  # the saved Python scalars by position (None where a tensor, or when nothing was saved)
    grad_shape: tuple
    dtype: Any  # NumPy dtype of the gradient (array rules run only when every saved float array has it)
    cost: Any = None  # (flops, bytes, allocated), once computed


def backward_cost(rule: ArrayRule) -> tuple:
    """``(flops, bytes, allocated)`` of the ops the node's ember-op rule dispatches for ``rule``'s shapes (cached
    per rule); allocated: bytes of their outputs, views excluded, as a profile counts an op's allocations."""
    if rule.cost is None:
        rule.cost = _replay(rule)
    return rule.cost


def _replay(rule: ArrayRule) -> tuple:
    edtype = dtypes.to_dtype(rule.dtype)
    graph = Graph("backward cost")
    Builder(graph, trace=False)
    interpreters.graph_opened()
    try:
        inputs = []
        for k, shape in enumerate(rule.input_shapes):
            if shape is not None:  # a non-differentiable tensor input of an op with array rules holds indices
                # (cross entropy's targets: int64, as the public op requires)
                inputs.append(graph.add_input(tuple(shape), dtypes.int64 if k in rule.op.nondiff_inputs else edtype))
            else:  # a Python scalar operand: its saved value when kept (rules may branch on it), else 1.0
                scalar = rule.scalars[k] if rule.scalars is not None else None
                inputs.append(1.0 if scalar is None else scalar)
        attrs = dict(rule.attrs or {})
        graph.add_node(rule.op, inputs, attrs)
        forward = graph.nodes[-1]
        first = len(graph.nodes)
        grad = symbolic(graph.add_input(tuple(rule.grad_shape), edtype))
        if rule.op.num_outputs > 1:  # a multi-output op's array rule ran with a gradient for its first output only
            grad = (grad,) + (None,) * (rule.op.num_outputs - 1)
        with grad_mode.no_grad():
            rule.op.input_grads(_Ctx(forward, tuple(rule.needs)), grad)
    finally:
        interpreters.graph_closed()
    flops = nbytes = allocated = 0
    for node in graph.nodes[first:]:
        ins = [Spec(v.shape, v.dtype) if isinstance(v, Value) else None for v in node.inputs]
        outs = [Spec(v.shape, v.dtype) for v in node.outputs]
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        flops += op_flops(node.op, ins, outs, attrs)
        nbytes += op_bytes(node.op, ins, outs, attrs)
        if not node.op.view:
            allocated += sum(math.prod(s.shape) * s.dtype.itemsize for s in outs)
    return int(flops), int(nbytes), int(allocated)
