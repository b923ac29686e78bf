"""Define-then-run: the lectures' TensorFlow 1 two-layer net written with ember.graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.graph as G


@pytest.fixture(autouse=True)
def fresh_graph():
    G.reset_default_graph()
    yield
    G.reset_default_graph()


def _numpy_steps(x, y, w1, w2, lr, steps):
    losses = []
    for _ in range(steps):
        h = np.maximum(x @ w1, 0)
        d = h @ w2 - y
        losses.append((d * d).sum())
        g = 2 * d
        gw2 = h.T @ g
        gw1 = x.T @ ((g @ w2.T) * (x @ w1 > 0))
        w1, w2 = w1 - lr * gw1, w2 - lr * gw2
    return np.array(losses), w1, w2


def test_lecture_tf1_two_layer_net():
    N, D, H = 16, 20, 10
    rng = np.random.RandomState(0)
    xv, yv = rng.randn(N, D), rng.randn(N, D)
    w1_init, w2_init = rng.randn(D, H), rng.randn(H, D)
    lr = 1e-4

    x = G.placeholder((N, D), ember.float64, name="x")
    y = G.placeholder((N, D), ember.float64, name="y")
    w1 = G.Variable(w1_init, name="w1")
    w2 = G.Variable(w2_init, name="w2")
    h = ember.maximum(x @ w1, 0)
    y_pred = h @ w2
    diff = y_pred - y
    loss = (diff ** 2).sum()
    grad_w1, grad_w2 = G.gradients(loss, [w1, w2])
    new_w1 = G.assign(w1, w1 - lr * grad_w1)
    new_w2 = G.assign(w2, w2 - lr * grad_w2)
    updates = G.group(new_w1, new_w2)
    text = str(G.get_default_graph())
    assert "assign" in text and "group" in text

    sess = G.Session()
    values = {x: xv, y: yv}
    # The gotcha: fetching only the loss runs no update.
    for _ in range(3):
        only_loss = sess.run(loss, feed_dict=values)
    np.testing.assert_array_equal(sess.run(w1), w1_init)
    ref_losses, ref_w1, ref_w2 = _numpy_steps(xv, yv, w1_init, w2_init, lr, 5)
    np.testing.assert_allclose(only_loss, ref_losses[0], rtol=1e-10)
    losses = []
    for _ in range(5):
        loss_value, nothing = sess.run([loss, updates], feed_dict=values)
        losses.append(loss_value)
    assert nothing is None
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-10)
    np.testing.assert_allclose(sess.run(w1), ref_w1, rtol=1e-10)
    np.testing.assert_allclose(sess.run(w2), ref_w2, rtol=1e-10)


def test_symbolic_gradients_match_torch():
    rng = np.random.RandomState(3)
    av, bv = rng.randn(4, 3), rng.rand(3) + 0.5
    a = G.placeholder((4, 3), ember.float64)
    b = G.Variable(bv)
    out = ((a * b).tanh().sum(dim=1) / b.sum() + (a.exp() * b).mean()).sum()
    ga, gb = G.gradients(out, [a, b])
    sess = G.Session()
    got_a, got_b = sess.run([ga, gb], {a: av})
    ta = torch.tensor(av, requires_grad=True)
    tb = torch.tensor(bv, requires_grad=True)
    tout = ((ta * tb).tanh().sum(dim=1) / tb.sum() + (ta.exp() * tb).mean()).sum()
    ref_a, ref_b = torch.autograd.grad(tout, [ta, tb])
    np.testing.assert_allclose(got_a, ref_a.numpy(), rtol=1e-10)
    np.testing.assert_allclose(got_b, ref_b.numpy(), rtol=1e-10)


def test_assign_add_sub_and_unconnected_gradients():
    v = G.Variable(np.zeros(2))
    p = G.placeholder((2,), ember.float64)
    inc = G.assign_add(v, p)
    dec = G.assign_sub(v, 1.0)
    sess = G.Session()
    sess.run(inc, {p: np.array([2.0, 3.0])})
    sess.run(inc, {p: np.array([2.0, 3.0])})
    np.testing.assert_allclose(sess.run(v), [4.0, 6.0])
    sess.run(dec)
    np.testing.assert_allclose(sess.run(v), [3.0, 5.0])
    other = G.Variable(np.ones(2))
    assert G.gradients((v * p).sum(), [other]) == [None]


def test_errors_are_clear():
    x = G.placeholder((2,), ember.float64, name="x")
    w = G.Variable(np.ones(2))
    y = (x * w).sum()
    sess = G.Session()
    with pytest.raises(RuntimeError, match="placeholder %x .* was not fed"):
        sess.run(y)
    with pytest.raises(ValueError, match="shape"):
        sess.run(y, {x: np.ones(3)})
    with pytest.raises(RuntimeError, match="assign"):
        w.add_(1.0)
    with pytest.raises(ember.graph.TracingError, match="item"):
        y.item()
