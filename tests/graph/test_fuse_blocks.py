"""Fused elementwise kernels without numba run block by block (ember/graph/passes/fuse_blocks.py): the same
bits as the op-by-op path, for optimizer updates (fma steps by both one-pass routes, a 0-d ``where``, steps
in place) and for chains with casts, clips and elementwise ``where``, at sizes whose last block is partial
or a single element (the complex fma route's odd case)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.passes import fuse_blocks, fuse_later, fuse_numba
from ember.optim import Optimizer, numpy_step

torch = pytest.importorskip("torch")

BLOCK = 64  # small blocks: a few hundred elements are many blocks
SHAPES = [(64 * 7 + 1,), (13, 40), (5, 3)]  # last block of 1 element; 520 = 8 blocks + 8; too small: whole


@pytest.fixture
def blocked(monkeypatch):
    monkeypatch.setattr(fuse_numba, "available", lambda: False)
    monkeypatch.setattr(fuse_later, "numba_installed", lambda: False)  # no promotion to a Numba loop either
    monkeypatch.setattr(fuse_blocks, "BLOCK", BLOCK)
    monkeypatch.setattr(numpy_step, "ENABLED", False)  # optimizers' own NumPy steps would run instead of the graph
    return monkeypatch


def _run(name, kwargs, dtype, compiled, steps=4):
    Optimizer.fast_path = compiled
    try:
        rng = np.random.default_rng(0)
        params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(dtype))) for s in SHAPES]
        opt = getattr(ember.optim, name)(params, **kwargs)
        for _ in range(steps):
            for p in params:
                p.grad = ember.tensor((rng.standard_normal(p.shape) * rng.choice([1e-6, 1.0, 1e3], p.shape))
                                      .astype(dtype))
            opt.step()
        return [p.detach().numpy().copy() for p in params] + [
            v.numpy().copy() for p in params for v in opt.state[p].values() if isinstance(v, ember.Tensor)]
    finally:
        Optimizer.fast_path = True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name, kwargs", [
    ("Adam", dict(lr=1e-2)), ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)), ("RMSprop", dict(lr=1e-2, centered=True)),
    ("Adagrad", dict(lr=0.1)), ("Adamax", dict(lr=1e-2))])
def test_blocked_updates_equal_op_path_bitwise(name, kwargs, dtype, blocked):
    planned = []
    original = fuse_blocks.plan_blocks
    blocked.setattr(fuse_blocks, "plan_blocks", lambda *a: planned.append(original(*a)) or planned[-1])
    ops = _run(name, kwargs, dtype, compiled=False)
    compiled = _run(name, kwargs, dtype, compiled=True)
    assert any(p is not None for p in planned)  # the big parameters' updates ran blocked
    for a, b in zip(ops, compiled):
        np.testing.assert_array_equal(b, a)


def test_blocked_adam_matches_the_native_loop_bitwise(blocked):
    """The NumPy blocks and numba's one loop (llvm.fma) give the same trajectory, bit for bit."""
    rng = np.random.default_rng(1)
    init = rng.standard_normal(64 * 9 + 1).astype(np.float32)
    grads = [rng.standard_normal(init.shape).astype(np.float32) for _ in range(6)]
    results = []
    for native in (False, True):
        if native:
            blocked.undo()
            pytest.importorskip("numba")
        p = ember.nn.Parameter(ember.tensor(init))
        opt = ember.optim.Adam([p], lr=1e-2, amsgrad=True)
        for g in grads:
            p.grad = ember.tensor(g)
            opt.step()
        results.append([p.detach().numpy()] + [v.numpy() for v in opt.state[p].values()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_blocked_chain_equals_eager(blocked):
    """where over an array condition, casts, clip, fma by both routes, special values, in one kernel."""
    rng = np.random.default_rng(2)
    n = 64 * 5 + 1
    x = rng.standard_normal(n).astype(np.float32)
    x[:6] = [np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38]
    y = rng.standard_normal(n).astype(np.float32)

    def chain(a, b):
        t = ember.where(a > 0, a * b + 1.0, b * 0.5 - a)
        u = ember.addcmul(t, a, b, value=0.3)   # fma of two arrays (complex route)
        v = ember.add(u, b, alpha=0.7)          # fma with a number (axpy route)
        return v.clamp(-5.0, 5.0).to(ember.float64).exp().to(ember.float32) + ember.lerp(a, b, 0.25)

    planned = []
    original = fuse_blocks.plan_blocks
    blocked.setattr(fuse_blocks, "plan_blocks", lambda *a: planned.append(original(*a)) or planned[-1])
    with np.errstate(all="ignore"):
        want = chain(ember.tensor(x), ember.tensor(y)).numpy()
        step = ember.compile(chain, measure=False)
        for _ in range(3):
            got = step(ember.tensor(x), ember.tensor(y)).numpy()
    assert any(p is not None and any(s[2] == "cfma" for s in p.block_steps) for p in planned)
    np.testing.assert_array_equal(got, want)
