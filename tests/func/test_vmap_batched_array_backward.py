"""vmap's per-sample backward on NumPy arrays (OpDef.batch_array_vjp, ember/func/batched_backward.py).

Every case runs ``vmap(grad(f))`` three ways: with the batched array rules (the default), with them off
(``engine.ARRAY_RULES = False``: every node runs its ember-op vjp through the batching rules), and in
torch.func; values must agree, and the array rules must really have answered the nodes they cover.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.func as ef
from ember.autograd import engine
from ember.func import batched_backward

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")


@pytest.fixture
def answered(monkeypatch):
    """The op names whose nodes the batched array rules answered (not None) during the test."""
    seen: list = []
    original = batched_backward.input_grads

    def counting(level, node, g, gdim, grads):
        result = original(level, node, g, gdim, grads)
        if result is not None:
            seen.append(node.op.name)
        return result

    monkeypatch.setattr(batched_backward, "input_grads", counting)
    return seen


def _run(lib, fn, args, in_dims, argnums):
    func = ef if lib is ember else tf
    tensors = [lib.tensor(a) for a in args]
    return func.vmap(func.grad(fn(lib), argnums=argnums), in_dims=in_dims)(*tensors)


def _compare(fn, args, in_dims, argnums, rtol=1e-10, atol=1e-12):
    ours = _run(ember, fn, args, in_dims, argnums)
    engine.ARRAY_RULES = False
    try:
        plain = _run(ember, fn, args, in_dims, argnums)
    finally:
        engine.ARRAY_RULES = True
    theirs = _run(torch, fn, args, in_dims, argnums)
    for a, b, c in zip(ours, plain, theirs):
        assert tuple(a.shape) == tuple(c.shape)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)
        np.testing.assert_allclose(a.numpy(), c.detach().numpy(), rtol=rtol, atol=atol)


RNG = np.random.default_rng(7)


def _elementwise(lib):
    def f(w, x, b):
        h = (x * w + b).tanh() * 2.0 - x / (w.exp() + 1.0)
        return (h.sigmoid() * x.relu() - b).sum()
    return f


@pytest.mark.parametrize("in_dims", [(None, 0, None), (0, 0, None), (None, 1, 0), (0, None, 0)])
def test_elementwise_rules_with_shared_and_batched_operands(in_dims, answered):
    shapes = {0: (4, 3, 5), 1: (3, 4, 5), None: (3, 5)}
    w = RNG.standard_normal(shapes[in_dims[0]] if in_dims[0] is not None else (5,))
    x = RNG.standard_normal(shapes[in_dims[1]])
    b = RNG.standard_normal((4, 5) if in_dims[2] == 0 else (5,))
    _compare(_elementwise, (w, x, b), in_dims, (0, 1, 2))
    assert {"tanh", "mul", "add", "sub", "div", "exp", "sigmoid", "relu"} <= set(answered)


def _mlp(lib):
    F = lib.nn.functional

    def f(w1, b1, w2, x, t):
        h = F.linear(x, w1, b1).relu()
        return F.cross_entropy(F.linear(h, w2), t)
    return f


@pytest.mark.parametrize("rows", [1, 3])
def test_linear_and_cross_entropy_rules_match_torch(rows, answered):
    x = RNG.standard_normal((6, rows, 4))
    t = RNG.integers(0, 3, (6, rows))
    args = (RNG.standard_normal((5, 4)), RNG.standard_normal(5), RNG.standard_normal((3, 5)), x, t)
    _compare(_mlp, args, (None, None, None, 0, 0), (0, 1, 2, 3))
    assert {"linear", "cross_entropy", "relu"} <= set(answered)


def test_linear_with_batched_weights_and_shared_input(answered):
    """An ensemble: per-model weights, one shared input."""
    def fn(lib):
        return lambda w, b, x: lib.nn.functional.linear(x, w, b).pow(2).sum()
    _compare(fn, (RNG.standard_normal((3, 5, 4)), RNG.standard_normal((3, 5)), RNG.standard_normal((2, 4))),
             (0, 0, None), (0, 1, 2))
    assert "linear" in answered


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_rule_reductions_and_ignored_targets(reduction, answered):
    def fn(lib):
        def f(z, t):
            loss = lib.nn.functional.cross_entropy(z, t, reduction=reduction, ignore_index=1)
            return loss.sum() if reduction == "none" else loss
        return f
    z = RNG.standard_normal((5, 4, 3))
    t = np.array([[0, 1, 2, 1], [1, 1, 1, 1], [2, 0, 0, 1], [0, 2, 2, 2], [1, 0, 1, 2]])
    _compare(fn, (z, t), (0, 0), 0)
    assert "cross_entropy" in answered


def test_movement_and_reduction_rules(answered):
    def fn(lib):
        def f(w, x):
            y = (x * w).reshape(2, 6).permute(1, 0)
            return (y.expand(3, 6, 2).mean(dim=(0, 2)) * y.sum(dim=1, keepdim=True).squeeze(1)).sum()
        return f
    _compare(fn, (RNG.standard_normal((3, 4)), RNG.standard_normal((5, 3, 4))), (None, 0), (0, 1))
    assert {"reshape", "permute", "expand", "mean", "sum"} <= set(answered)


def test_per_sample_mlp_gradients_take_the_array_rules(answered):
    """The benchmark's case (benchmarks/bench_vmap.py): every node of the backward is answered by an array rule."""
    model = ember.nn.Sequential(ember.nn.Linear(8, 6), ember.nn.ReLU(), ember.nn.Linear(6, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = ember.randn(5, 8), ember.tensor([0, 2, 1, 1, 0])

    def loss(p, xi, yi):
        return ember.nn.functional.cross_entropy(ef.functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    grads = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    assert sorted(answered) == ["cross_entropy", "linear", "linear", "relu"]
    for i in range(5):
        single = ef.grad(loss)(params, x[i], y[i])
        for k in params:
            np.testing.assert_allclose(grads[k][i].numpy(), single[k].numpy(), rtol=1e-5, atol=1e-6)


def test_float16_and_complex_fall_back_to_the_op_rules(answered):
    """Dtypes the array rules do not take (half, complex) run the ember-op rules, with the same results."""
    for dtype in (ember.float16, ember.complex64):
        w = ember.ones(3, dtype=dtype)
        x = ember.randn(4, 3).to(dtype)
        g = ef.vmap(ef.grad(lambda w_, x_: (w_ * x_).abs().sum()), in_dims=(None, 0))(w, x)
        assert g.dtype is dtype and tuple(g.shape) == (4, 3)
    assert answered == []


def test_create_graph_keeps_the_op_rules(answered):
    """grad of vmap(grad): the inner backward builds a graph, so no array rule may answer it."""
    def inner(w, x):
        return (w * x).tanh().sum()

    w = ember.randn(3)
    x = ember.randn(4, 3)
    outer = ef.grad(lambda w_: ef.vmap(ef.grad(inner), in_dims=(None, 0))(w_, x).sum())(w)
    theirs = tf.grad(lambda w_: tf.vmap(tf.grad(lambda a, b: (a * b).tanh().sum()), in_dims=(None, 0))(
        w_, torch.tensor(x.numpy())).sum())(torch.tensor(w.numpy()))
    np.testing.assert_allclose(outer.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)
    assert answered == []
