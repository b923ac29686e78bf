"""The engine, not each rule, reduces broadcast gradients to the input's shape and drops unneeded ones
(OpDef.input_grads, used by eager autograd and by ember.graph.gradients alike)."""
from __future__ import annotations

import numpy as np

import ember
from ember.ops.registry import OPS, OpDef


def test_a_rule_returning_the_broadcast_gradient_gets_it_summed_to_each_input():
    op = OpDef(name="plus_for_test", category="binary", impl=lambda xp, a, b: a + b,
               vjp=lambda ctx, g: (g, g * 2))  # unregistered: only the math, no sum_to, no needs
    a = ember.ones(3, 1, requires_grad=True)
    b = ember.ones(4, requires_grad=True)
    out = ember.ops.dispatch.apply(op, (a, b))
    out.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 1), 4.0))
    np.testing.assert_array_equal(b.grad.numpy(), np.full((4,), 6.0))


def test_gradients_an_input_does_not_need_are_dropped():
    op = OpDef(name="plus_for_test2", category="binary", impl=lambda xp, a, b: a + b, vjp=lambda ctx, g: (g, g))
    a = ember.ones(2, requires_grad=True)
    b = ember.ones(2)  # no grad
    out = ember.ops.dispatch.apply(op, (a, b))
    node = out.grad_fn
    grads = OPS["add"].input_grads(node, ember.ones(2))
    assert grads[1] is None and grads[0] is not None


def test_symbolic_gradients_unbroadcast_too():
    import ember.graph as G

    G.reset_default_graph()
    try:  # the default graph is global state: leave none behind for other tests
        x = G.placeholder((3, 1), ember.float64)
        y = G.placeholder((4,), ember.float64)
        gx, gy = G.gradients((x * y).sum(), [x, y])
        out = G.Session().run([gx, gy], {x: np.full((3, 1), 2.0), y: np.arange(4.0)})
    finally:
        G.reset_default_graph()
    np.testing.assert_array_equal(np.asarray(out[0]), np.full((3, 1), 6.0))
    np.testing.assert_array_equal(np.asarray(out[1]), np.full((4,), 6.0))
