"""Fused groups compiled to one Numba loop: chosen when they pay off, and equal to eager results."""
import numpy as np
import pytest

import ember
from ember.graph.passes import fuse_numba

pytest.importorskip("numba")


def _kernels(compiled) -> list:
    return [(type(n.op.impl).__name__, tuple(n.outputs[0].shape)) for n in compiled.last.executable.nodes
            if n.op.name == "fused"]


def _adam_run(n: int, compiled: bool, steps: int = 4) -> tuple:
    rng = np.random.default_rng(0)
    w = ember.tensor(rng.standard_normal(n), requires_grad=True)
    x = ember.tensor(rng.standard_normal(n))
    opt = ember.optim.Adam([w], lr=1e-2)

    def step(x):
        loss = ((w * x).sin() ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = ember.compile(step) if compiled else step
    for _ in range(steps):
        fn(x)
    return w.detach().numpy().copy(), fn


def test_big_optimizer_update_runs_as_numba_loops_and_matches_eager():
    n = fuse_numba.BIG_ELEMENTS + 7
    compiled_w, fn = _adam_run(n, compiled=True)
    eager_w, _ = _adam_run(n, compiled=False)
    kinds = _kernels(fn)
    assert ("NumbaKernel", (n,)) in kinds, kinds
    np.testing.assert_allclose(compiled_w, eager_w, rtol=1e-12, atol=1e-14)


def test_small_short_groups_stay_on_numpy_so_first_calls_stay_fast():
    _, fn = _adam_run(1000, compiled=True)
    assert all(kind == "FusedKernel" for kind, _ in _kernels(fn)), _kernels(fn)


def test_long_chain_on_small_arrays_compiles_and_matches_eager():
    def chain(x):
        for k in range(fuse_numba.MIN_STEPS + 6):
            x = (x * 1.01 + 0.1).tanh() if k % 2 else x.exp() * 0.5 - 0.25
        return x

    x = ember.tensor(np.linspace(-1, 1, 64))
    fn = ember.compile(chain)
    for _ in range(3):
        out = fn(x)
    assert any(kind == "NumbaKernel" for kind, _ in _kernels(fn)), _kernels(fn)
    np.testing.assert_allclose(out.numpy(), chain(x).numpy(), rtol=1e-12, atol=1e-14)
