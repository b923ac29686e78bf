"""The lectures' TF1 two-layer network, shared by the graph-distribution tests and their MPI workers.

``build(placed=True)``: x and w1 (the first layer) on rank 0; y, w2 and the loss on rank 1; the
gradients come from ``ember.graph.gradients`` (colocated with their forward ops) and the updates
are ``assign`` nodes (on their Variables' ranks) joined by a ``group``.
"""
import contextlib

import numpy as np

import ember
import ember.graph as G

N, D, H = 8, 5, 6
LR = 1e-2


def data():
    rng = np.random.RandomState(0)
    return rng.randn(N, D), rng.randn(N, D), rng.randn(D, H) * 0.5, rng.randn(H, D) * 0.5


def build(placed=True):
    """Returns a dict of the graph's handles (a fresh default graph)."""
    G.reset_default_graph()
    xv, yv, w1v, w2v = data()

    def on(rank):
        return G.device(f"rank:{rank}") if placed else contextlib.nullcontext()

    with on(0):
        x = G.placeholder((N, D), ember.float64, name="x")
        w1 = G.Variable(w1v, name="w1")
        h = ember.relu(x @ w1)
    with on(1):
        y = G.placeholder((N, D), ember.float64, name="y")
        w2 = G.Variable(w2v, name="w2")
        diff = h @ w2 - y
        loss = (diff * diff).sum()
    gw1, gw2 = G.gradients(loss, [w1, w2])
    with on(0):
        step1 = G.assign_sub(w1, LR * gw1)
    with on(1):
        step2 = G.assign_sub(w2, LR * gw2)
    train = G.group(step1, step2)  # unplaced: rank 0; its input from rank 1 is a control edge
    return dict(x=x, y=y, w1=w1, w2=w2, h=h, loss=loss, gw1=gw1, gw2=gw2, train=train, feeds={x: xv, y: yv})


def numpy_steps(steps):
    """Plain NumPy float64 reference: losses before each step and the final weights."""
    x, y, w1, w2 = data()
    losses = []
    for _ in range(steps):
        pre = x @ w1
        h = np.maximum(pre, 0)
        d = h @ w2 - y
        losses.append((d * d).sum())
        g = 2 * d
        gw2 = h.T @ g
        gw1 = x.T @ ((g @ w2.T) * (pre > 0))
        w1, w2 = w1 - LR * gw1, w2 - LR * gw2
    return np.array(losses), w1, w2
