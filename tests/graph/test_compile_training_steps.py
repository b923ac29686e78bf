"""ember.compile: compiled training steps equal eager ones; caching, retracing, fallback."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph import TracingError
from ember.graph.showcase import two_layer_step

RTOL = 1e-6


def _w1_setup(seed: int):
    rng = np.random.RandomState(seed)
    x = ember.tensor(rng.randn(16, 30))
    y = ember.tensor(rng.randn(16, 5))
    w1 = ember.tensor(rng.randn(30, 8), requires_grad=True)
    w2 = ember.tensor(rng.randn(8, 5), requires_grad=True)
    return x, y, w1, w2


def _w1_step(w1, w2, lr=1e-3):
    return two_layer_step(ember, w1, w2, lr)


def _numpy_w1(x, y, w1, w2, lr=1e-3, steps=6):
    losses = []
    for _ in range(steps):
        h = x @ w1
        hr = np.maximum(h, 0)
        d = hr @ w2 - y
        losses.append((d * d).sum())
        g = 2 * d
        gw2 = hr.T @ g
        gh = (g @ w2.T) * (h >= 0)
        w1 = w1 - lr * (x.T @ gh)
        w2 = w2 - lr * gw2
    return np.array(losses), w1, w2


@pytest.mark.parametrize("passes", [None, [], ["dce"], ["simplify", "cse", "fold", "dce"], ["fuse", "memory"]])
def test_w1_training_step_matches_numpy_reference(passes):
    x, y, w1, w2 = _w1_setup(0)
    ref_losses, ref_w1, ref_w2 = _numpy_w1(x.numpy(), y.numpy(), w1.detach().numpy(), w2.detach().numpy())
    step = ember.compile(_w1_step(w1, w2), passes=passes)
    losses = np.array([step(x, y).item() for _ in range(6)])
    assert step.graph is not None, "the function should have been traced"
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL)
    np.testing.assert_allclose(w1.detach().numpy(), ref_w1, rtol=RTOL)
    np.testing.assert_allclose(w2.detach().numpy(), ref_w2, rtol=RTOL)
    np.testing.assert_array_equal(w1.grad.numpy(), 0.0)


def test_grad_left_in_dot_grad_like_eager():
    x, y, w1, w2 = _w1_setup(1)
    xe, ye, w1e, w2e = _w1_setup(1)

    def make(a, b):
        def step(x, y):
            for p in (a, b):
                p.grad = None
            loss = ((x.mm(a).tanh().mm(b) - y) ** 2).mean()
            loss.backward()
            with ember.no_grad():
                a.sub_(0.1 * a.grad)
                b.sub_(0.1 * b.grad)
            return loss
        return step

    compiled, eager = ember.compile(make(w1, w2)), make(w1e, w2e)
    for _ in range(4):
        np.testing.assert_allclose(compiled(x, y).item(), eager(xe, ye).item(), rtol=RTOL)
    np.testing.assert_allclose(w1.grad.numpy(), w1e.grad.numpy(), rtol=RTOL)
    np.testing.assert_allclose(w2.detach().numpy(), w2e.detach().numpy(), rtol=RTOL)


def _mlp(seed):
    nn = pytest.importorskip("ember.nn")
    ember.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3)).double()
    return model


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_nn_mlp_with_optimizer_matches_eager(momentum):
    optim = pytest.importorskip("ember.optim")
    nn = pytest.importorskip("ember.nn")
    models = [_mlp(3), _mlp(3)]
    opts = [optim.SGD(m.parameters(), lr=0.05, momentum=momentum) for m in models]
    loss_fn = nn.MSELoss()

    def make(model, opt):
        def step(x, y):
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss
        return step

    eager, compiled = make(models[0], opts[0]), ember.compile(make(models[1], opts[1]))
    rng = np.random.RandomState(0)
    for _ in range(5):
        x = ember.tensor(rng.randn(8, 12))
        y = ember.tensor(rng.randn(8, 3))
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=RTOL)
    assert compiled.graph is not None
    for pe, pc in zip(models[0].parameters(), models[1].parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=RTOL)


def test_cache_and_retrace_on_shape_dtype_and_grad_mode():
    # (traces counted by the cache: a Python side effect such as ``calls.append(1)`` in the function would run
    # every call, as torch.compile replays it: ember.compile then runs the function eagerly, guards.py)
    def f(x):
        return (x * 3).sum(dim=0)

    g = ember.compile(f, warmup=0)
    a = ember.ones(4, 2, dtype=ember.float64)
    np.testing.assert_allclose(g(a).numpy(), [12.0, 12.0])
    first = g.last
    g(a)
    assert len(g._cache) == 1 and g.last is first  # cached
    np.testing.assert_allclose(g(ember.ones(5, 2, dtype=ember.float64)).numpy(), [15.0, 15.0])
    assert len(g._cache) == 2
    g(ember.ones(5, 2, dtype=ember.float32))
    assert len(g._cache) == 3
    with ember.no_grad():
        g(a)
    assert len(g._cache) == 4


def test_data_dependent_control_flow_falls_back_to_eager():
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x * -1

    g = ember.compile(f, warmup=0)
    with pytest.warns(RuntimeWarning, match="falling back to eager"):
        out = g(ember.tensor([1.0, 2.0]))
    np.testing.assert_allclose(out.numpy(), [2.0, 4.0])
    np.testing.assert_allclose(g(ember.tensor([-1.0, -2.0])).numpy(), [1.0, 2.0])


def test_data_dependent_control_flow_raises_when_asked():
    w = ember.ones(3, requires_grad=True)

    def f(x):
        loss = (x * w).sum()
        return loss.item()

    g = ember.compile(f, warmup=0, fallback="raise")
    with pytest.raises(TracingError, match=r"\.item\(\)"):
        g(ember.ones(3))
    # The lifted weight got its data back after the abandoned trace.
    np.testing.assert_array_equal(w.detach().numpy(), np.ones(3))


def test_random_inside_compile_is_refused_clearly():
    # Samplers with a graph op compile to random nodes (tests/graph/test_compile_random_ops.py); the others
    # (exponential_, random_) draw from the generator directly and are still refused.
    g = ember.compile(lambda x: x + x.clone().exponential_(), warmup=0, fallback="raise")
    with pytest.raises(TracingError, match="random sampling"):
        g(ember.ones(3))


def test_module_training_flag_is_part_of_the_key():
    nn = pytest.importorskip("ember.nn")
    model = nn.Sequential(nn.Linear(3, 3)).double()
    g = ember.compile(model, warmup=0)
    x = ember.ones(2, 3, dtype=ember.float64)
    with ember.no_grad():
        first = g(x)
        model.eval()
        second = g(x)
    assert len(g._cache) == 2
    np.testing.assert_allclose(first.numpy(), second.numpy())
    np.testing.assert_allclose(first.numpy(), model(x).detach().numpy(), rtol=RTOL)


def test_explain_shows_every_pass():
    x, y, w1, w2 = _w1_setup(2)
    step = ember.compile(_w1_step(w1, w2))
    step(x, y)
    step(x, y)
    text = step.explain()
    for name in ("trace", "simplify", "cse", "fold", "dce", "fuse"):
        assert f"after {name}" in text
    assert "matmul_t" in text and "fused" in text
