"""Autograd nodes the engine runs by array rules under a profile (ember/profiler/backward_cost.py).

A profile keeps the engine's array rules (NumPy calls, no op dispatch), so such a node is one event without
children whose FLOPs, bytes and allocations are computed later from its op's ember-op rule, replayed on
symbolic tensors. The reference is the same program profiled with ``backward_ops=True``: the engine then
dispatches the rule's ops on the live tensors and each is an event of its own, costed from its real shapes;
and the FLOP counter, which counts every op it sees from the live tensors.
"""
from __future__ import annotations

import pytest

import ember
import ember.nn.functional as F
from ember.ops.registry import OPS
from ember.profiler import profile
from ember.utils.flop_counter import FlopCounterMode


pytestmark = pytest.mark.usefixtures("fixed_hardware_peak")  # tests/profiler/conftest.py


def _leaf(*shape, dtype=ember.float32):
    return ember.randn(*shape, dtype=dtype).requires_grad_()


# one program per op with array rules: broadcasting, Python scalars on either side, inputs that need no
# gradient, attributes (dims, index, bounds), float64
CASES = {
    "add": lambda: (_leaf(4, 5) + _leaf(5)).sum(),
    "sub": lambda: (2.0 - _leaf(3, 4)).sum(),
    "mul": lambda: (_leaf(4, 5) * ember.randn(4, 5) * 3.0).sum(),
    "div": lambda: (_leaf(4, 1) / _leaf(4, 6)).sum(),
    "pow": lambda: (_leaf(6).abs() ** 3.0).sum(),
    "neg": lambda: (-_leaf(7)).sum(),
    "exp": lambda: _leaf(3, 3).exp().sum(),
    "log": lambda: (_leaf(5).abs() + 1).log().sum(),
    "sqrt": lambda: (_leaf(5).abs() + 1).sqrt().sum(),
    "tanh": lambda: _leaf(2, 8).tanh().sum(),
    "sigmoid": lambda: _leaf(2, 8).sigmoid().sum(),
    "relu": lambda: _leaf(2, 8).relu().sum(),
    "reciprocal": lambda: (_leaf(5).abs() + 1).reciprocal().sum(),
    "clamp": lambda: _leaf(9).clamp(min=-0.5, max=0.5).sum(),
    "linear": lambda: F.linear(_leaf(4, 8), _leaf(3, 8), _leaf(3)).sum(),
    "linear (no bias, input frozen)": lambda: F.linear(ember.randn(4, 8), _leaf(3, 8)).sum(),
    "matmul": lambda: (_leaf(2, 4, 5) @ _leaf(5, 3)).sum(),
    "sum (dims)": lambda: _leaf(3, 4, 5).sum(dim=(0, 2)).sum(),
    "mean": lambda: _leaf(3, 4).mean(dim=1, keepdim=True).sum(),
    "reshape, permute": lambda: _leaf(2, 3, 4).reshape(6, 4).permute(1, 0).sum(),
    "getitem": lambda: _leaf(6, 5)[1:4, ::2].sum(),
    "cat": lambda: ember.cat([_leaf(2, 3), _leaf(4, 3)]).sum(),
    "stack": lambda: ember.stack([_leaf(2, 3), _leaf(2, 3), _leaf(2, 3)], 1).sum(),
    "expand, contiguous, clone": lambda: _leaf(1, 4).expand(3, 4).contiguous().clone().sum(),
    "float64": lambda: (_leaf(4, 4, dtype=ember.float64).tanh() * 2.0).sum(),
    "cross_entropy": lambda: F.cross_entropy(_leaf(5, 4), ember.tensor([0, 3, 1, 1, 2]), ignore_index=1),
    "logsumexp": lambda: _leaf(4, 6).logsumexp(dim=1).sum(),
}


def _nodes(program, backward_ops):
    ember.manual_seed(0)
    loss = program()
    with profile(with_flops=True, profile_memory=True, record_shapes=True, backward_ops=backward_ops) as prof:
        loss.backward()
    return [e for e in prof.events() if e.category == "autograd"], prof.events()


@pytest.mark.parametrize("name", sorted(CASES))
def test_array_rule_nodes_cost_what_their_rules_dispatch(name):
    fast, fast_events = _nodes(CASES[name], backward_ops=False)
    slow, slow_events = _nodes(CASES[name], backward_ops=True)
    assert [e.name for e in fast] == [e.name for e in slow]
    ran_by_arrays = {e.name.split(": ")[1] for e in fast if not e.cpu_children}
    named = ["tanh", "mul"] if name == "float64" else name.split(" (")[0].split(", ")
    # the case's own ops ran by array rules (else it would test nothing)
    assert {OPS[op].backward_name for op in named} <= ran_by_arrays
    for quick, full in zip(fast, slow):
        # the reference: the ops the node dispatched on the live tensors, each costed from its own shapes
        assert quick.flops == sum(c.flops for c in full.cpu_children), quick.name
        assert quick.bytes == sum(c.bytes for c in full.cpu_children), quick.name
        assert quick.cpu_memory_usage == sum(c.cpu_memory_usage for c in full.cpu_children), quick.name
    assert sum(e.flops for e in fast_events.work_events()) == sum(e.flops for e in slow_events.work_events())


def test_every_op_with_array_rules_is_covered():
    names = " ".join(CASES)
    missing = [op for op, record in OPS.items() if record.array_vjp is not None and op not in names]
    assert not missing, f"add a case for {missing}"


def test_a_training_step_counts_the_flops_the_flop_counter_counts():
    model = ember.nn.Sequential(ember.nn.Linear(8, 16), ember.nn.Tanh(), ember.nn.Linear(16, 4))
    x, y = ember.randn(5, 8), ember.randint(0, 4, (5,))

    def step():
        F.cross_entropy(model(x) * 0.5, y).backward()

    with FlopCounterMode(display=False) as counter:
        step()
    with profile(with_flops=True) as prof:
        step()
    nodes = [e for e in prof.events() if e.category == "autograd" and not e.cpu_children]
    assert {e.name.split(": ")[1] for e in nodes} >= {"LinearBackward0", "TanhBackward0", "MulBackward0"}
    assert prof.events().summary().flops == counter.get_total_flops()
    # hand count of the two linear layers' backward: grad input (not for the first: x needs none), grad weight
    # (2*rows*out*in each) and grad bias (a sum over the rows: rows*out)
    linear = [e for e in nodes if e.name.endswith("LinearBackward0")]
    assert sorted(e.flops for e in linear) == sorted([2 * 5 * 16 * 8 + 5 * 16, 2 * (2 * 5 * 4 * 16) + 5 * 4])


def test_the_flop_counter_inside_a_profile_sees_the_backward_ops():
    w = _leaf(4, 3)
    x = ember.randn(2, 4)
    with profile(with_flops=True) as prof:
        with FlopCounterMode(display=False) as counter:
            (x @ w).sum().backward()
    assert counter.get_flop_counts()["Global"]["matmul"] == 2 * 2 * 4 * 3 * 2  # forward and the weight gradient
    (node,) = [e for e in prof.events() if e.name.endswith("MatmulBackward0")]
    assert any(c.name == "matmul" for c in node.cpu_children)  # the counter keeps the backward on its ops
