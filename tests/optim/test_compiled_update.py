"""The compiled group update (ember/optim/compiled_update.py) against the op-by-op update and torch.

The compiled update is the same ``update`` function traced once: its results must equal the op-by-op
path bit for bit (with Numba loops, with NumPy-only fused kernels, with big loops split across
threads), a scheduler's new ``lr`` must reach it without a recompile, and updates that cannot be
traced must fall back to the op path silently.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember import _config
from ember.backends import cpu_threads
from ember.graph.passes import fuse_numba
from ember.optim import Optimizer, numpy_step

torch = pytest.importorskip("torch")

CASES = [
    ("Adam", dict(lr=1e-2)),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=1e-2, betas=(0.3, 0.8), weight_decay=0.1, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.25)),
    ("RMSprop", dict(lr=1e-2, centered=True, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
    ("Adadelta", dict(lr=1.0, weight_decay=0.1)),
    ("Adamax", dict(lr=1e-2)),
    ("Adafactor", dict(lr=1e-2)),
    ("Adafactor", dict(weight_decay=0.1, eps=(1e-20, 1e-2), d=2.0, maximize=True)),
    ("Muon", dict(lr=1e-2)),
    ("Muon", dict(nesterov=False, adjust_lr_fn="match_rms_adamw", ns_steps=3)),
]
SHAPES = [(300, 1000), (7,), (3, 1, 2)]  # 300k elements: a big loop (threads when split)
MATRIX_SHAPES = [(30, 100), (7, 5)]
SUMS_IN_NUMBA = ("Adafactor",)  # updates with whole-tensor norms (reductions the Numba loop computes)  # Muon: matrices only (Newton-Schulz matmuls in bfloat16 are slow)


def _run(name, kwargs, dtype, compiled, steps=5, shapes=None):
    shapes = shapes or (MATRIX_SHAPES if name == "Muon" else SHAPES)
    Optimizer.fast_path = compiled
    try:
        rng = np.random.default_rng(0)
        params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(dtype))) for s in shapes]
        opt = getattr(ember.optim, name)(params, **kwargs)
        for _ in range(steps):
            for p in params:
                p.grad = ember.tensor(rng.standard_normal(p.shape).astype(dtype))
            opt.step()
        if compiled:  # the graph really ran: a traced, direct executable for this group
            assert any(e.executable is not None for e in opt._compiled.cache.values())
        return [p.detach().numpy().copy() for p in params] + [
            v.numpy().copy() for p in params for v in opt.state[p].values() if isinstance(v, ember.Tensor)]
    finally:
        Optimizer.fast_path = True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in CASES])
def test_compiled_update_equals_op_path_bitwise(case, dtype):
    name, kwargs = case
    ops = _run(name, kwargs, dtype, compiled=False)
    for a, b in zip(ops, _run(name, kwargs, dtype, compiled=True)):
        if name in SUMS_IN_NUMBA and fuse_numba.available():
            # a norm over 300k elements fused into a Numba loop sums sequentially in float64, NumPy pairwise:
            # close, not bitwise (the NumPy-only compiled update is bitwise: next test)
            f32 = dtype == np.float32
            np.testing.assert_allclose(b, a, rtol=2e-6 if f32 else 1e-13, atol=1e-7 if f32 else 1e-15)
        else:
            np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in SUMS_IN_NUMBA], ids=lambda c: c[0])
def test_updates_with_norms_numpy_only_equal_op_path_bitwise(case, monkeypatch):
    name, kwargs = case
    monkeypatch.setattr(fuse_numba, "available", lambda: False)
    ops = _run(name, kwargs, np.float32, compiled=False)
    for a, b in zip(ops, _run(name, kwargs, np.float32, compiled=True)):
        np.testing.assert_array_equal(b, a)


@pytest.mark.parametrize("case", CASES[:4], ids=[n for n, _ in CASES[:4]])
def test_numpy_only_kernels_and_threaded_loops_equal_op_path(case, monkeypatch):
    """Without Numba the fused kernels are NumPy calls; with Numba, big loops split across threads. (Without
    Numba these optimizers run their own NumPy steps, not the graph: tests/optim/test_numpy_step.py; here the
    graph's NumPy kernels are checked, as a traced training step runs them.)"""
    name, kwargs = case
    shapes = [(40_000,), (5, 3)]
    ops = _run(name, kwargs, np.float32, compiled=False, shapes=shapes)
    monkeypatch.setattr(fuse_numba, "PARALLEL_MIN_CHUNK", 4096)
    monkeypatch.setattr(_config, "CPU_THREADS", 3)
    monkeypatch.setattr(cpu_threads, "_POOL", None)
    threaded = _run(name, kwargs, np.float32, compiled=True, shapes=shapes)
    if fuse_numba.available():
        assert cpu_threads._POOL is not None  # the 40k loop was split (into 3 chunks)
    monkeypatch.setattr(fuse_numba, "available", lambda: False)
    monkeypatch.setattr(numpy_step, "ENABLED", False)
    numpy_only = _run(name, kwargs, np.float32, compiled=True, shapes=shapes)
    for a, b, c in zip(ops, threaded, numpy_only):
        np.testing.assert_array_equal(b, a)
        np.testing.assert_array_equal(c, a)


def test_scheduled_lr_and_betas_reach_the_graph_without_recompiling():
    """OneCycleLR changes lr and betas every step: one compiled graph serves them all, as torch's results show."""
    rng = np.random.default_rng(1)
    init = rng.standard_normal((6, 4))
    p = ember.nn.Parameter(ember.tensor(init.copy()))
    q = torch.nn.Parameter(torch.tensor(init.copy()))
    opt, topt = ember.optim.Adam([p], lr=1e-2), torch.optim.Adam([q], lr=1e-2)
    sched = ember.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=20)
    tsched = torch.optim.lr_scheduler.OneCycleLR(topt, max_lr=0.1, total_steps=20)
    for _ in range(20):
        g = rng.standard_normal((6, 4))
        p.grad, q.grad = ember.tensor(g.copy()), torch.tensor(g.copy())
        opt.step(), topt.step()
        sched.step(), tsched.step()
    np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-10, atol=1e-12)
    (entry,) = opt._compiled.cache.values()
    assert entry.executable is not None and len(entry.fn._cache) == 1


def test_update_that_reads_values_falls_back_to_op_path_silently():
    class ItemSGD(ember.optim.SGD):
        @staticmethod
        def update(p, grad, state, hp):
            scale = float(grad.abs().max().item())  # reads a value: cannot be traced
            p.add_(grad * (-hp["lr"] / scale))

    w = ember.nn.Parameter(ember.tensor([1.0, -2.0, 4.0]))
    opt = ItemSGD([w], lr=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(4):
            w.grad = ember.tensor([2.0, -1.0, 0.5])
            opt.step()
    np.testing.assert_allclose(w.detach().numpy(), [-1.0, -1.0, 3.5])  # 4 steps of -0.25 * grad
    (entry,) = opt._compiled.cache.values()
    assert entry.fn is None  # marked op-by-op after its trace failed


def test_replacing_param_data_or_state_retraces():
    w = ember.nn.Parameter(ember.ones(4))
    opt = ember.optim.SGD([w], lr=0.1, momentum=0.9)
    for _ in range(3):
        w.grad = ember.ones(4)
        opt.step()
    w.data = ember.zeros(6)  # a new shape: the old graph must not run on it
    opt.state[w].clear()
    for _ in range(3):
        w.grad = ember.ones(6)
        opt.step()
    # buffer: 1, 1.9, 2.71 -> w = -0.1 * (1 + 1.9 + 2.71)
    np.testing.assert_allclose(w.detach().numpy(), np.full(6, -0.561), rtol=1e-6)


def test_hooks_closure_and_old_style_subclass_step():
    """The base class runs step hooks around its own step; a subclass with its own step() keeps working."""
    class Halving(Optimizer):
        def __init__(self, params):
            super().__init__(params, {})

        def step(self, closure=None):
            with ember.no_grad():
                for p in self.param_groups[0]["params"]:
                    p.mul_(0.5)

    w = ember.nn.Parameter(ember.ones(2))
    calls = []
    for opt in (Halving([w]), ember.optim.Adam([w], lr=0.1)):
        opt.register_step_pre_hook(lambda o, a, k: calls.append("pre"))
        opt.register_step_post_hook(lambda o, a, k: calls.append("post"))
        w.grad = ember.ones(2)
        opt.step()
    assert calls == ["pre", "post"] * 2
    np.testing.assert_allclose(w.detach().numpy(), [0.4, 0.4], rtol=1e-6)


def test_loop_count_and_mixed_tuple_options_follow_the_group(monkeypatch):
    """Muon's ns_steps is a loop count (a static option: part of the key, baked); Adafactor's eps=(None, x)
    mixes None and a number (the number an input). Changing either mid-run must act like the op path."""
    monkeypatch.setattr(fuse_numba, "available", lambda: False)  # bitwise: NumPy sums (see SUMS_IN_NUMBA)
    for name, key, new in (("Muon", "ns_steps", 2), ("Adafactor", "eps", (None, 0.5))):
        results = []
        for compiled in (False, True):
            Optimizer.fast_path = compiled
            try:
                rng = np.random.default_rng(2)
                w = ember.nn.Parameter(ember.tensor(rng.standard_normal((6, 5)).astype(np.float32)))
                opt = getattr(ember.optim, name)([w], lr=0.05)
                for step in range(6):
                    if step == 3:
                        opt.param_groups[0][key] = new
                    w.grad = ember.tensor(rng.standard_normal((6, 5)).astype(np.float32))
                    opt.step()
                results.append(w.detach().numpy().copy())
                if compiled:  # both settings ran compiled: a new key for the new loop count, the same for eps
                    entries = list(opt._compiled.cache.values())
                    assert all(e.executable is not None for e in entries)
                    assert len(entries) == (2 if key == "ns_steps" else 1)
            finally:
                Optimizer.fast_path = True
        np.testing.assert_array_equal(results[1], results[0], err_msg=name)


def test_shared_and_unequal_step_counts_equal_op_path():
    """A group whose parameters count the same step gets one step input (the host writes each state's count);
    a parameter that starts later (its own count) makes the group count per parameter again. Both match the
    op path bit for bit, counts included."""
    results = []
    for compiled in (False, True):
        Optimizer.fast_path = compiled
        try:
            rng = np.random.default_rng(3)
            params = [ember.nn.Parameter(ember.tensor(rng.standard_normal(s).astype(np.float32)))
                      for s in [(40, 30), (30,), (5, 5)]]
            opt = ember.optim.Adam(params, lr=1e-2)
            for step in range(7):
                for k, p in enumerate(params):
                    p.grad = ember.tensor(rng.standard_normal(p.shape).astype(np.float32)) if k < 2 or step >= 3 \
                        else None
                opt.step()
                if compiled and step == 2:  # the first two parameters, same count: one shared step input
                    assert any(e.step_input is not None and e.executable is not None
                               for e in opt._compiled.cache.values())
            if compiled:
                kinds = {e.step_input is not None for e in opt._compiled.cache.values() if e.executable is not None}
                assert kinds == {True, False}  # shared while counts agreed, per parameter after the third joined
            results.append([p.detach().numpy().copy() for p in params] +
                           [float(opt.state[p]["step"]) for p in params])
        finally:
            Optimizer.fast_path = True
    assert results[0][-3:] == [7.0, 7.0, 4.0]
    for a, b in zip(*results):
        np.testing.assert_array_equal(b, a)
