"""Fusion groups that merge, Numba loops that update state in place, and the native ``where`` select:
each checked against NumPy written by hand (and eager ember where the graph is a training step)."""
from importlib import import_module

import numpy as np
import pytest

import ember
from ember.graph.executor import Executable
from ember.graph.ir import Graph
from ember.graph.passes import fuse_numba
from ember.ops.registry import OPS

fuse_mod = import_module("ember.graph.passes.fuse")  # the module (the package also has a fuse() pass)


def _fused(exe: Executable) -> list:
    return [n for n in exe.nodes if n.op.name == "fused"]


def test_chains_from_separate_inputs_merge_into_one_group():
    # m*0.9 + g*g*0.1 reads two chains that start at different inputs: one fused kernel, not two.
    g = Graph()
    m = g.add_input((5,), ember.float64)
    gr = g.add_input((5,), ember.float64)
    (a,) = g.add_node(OPS["mul"], (m, 0.9), {})
    (b,) = g.add_node(OPS["mul"], (gr, 0.1), {})
    (c,) = g.add_node(OPS["mul"], (b, gr), {})
    (d,) = g.add_node(OPS["add"], (a, c), {})
    exe = Executable(g, [d], fuse=True)
    assert [n.op.name for n in exe.nodes] == ["fused"]
    mv, gv = np.linspace(-1, 1, 5), np.linspace(2, 3, 5)
    (out,) = exe.run([mv, gv])
    np.testing.assert_allclose(out, mv * 0.9 + gv * 0.1 * gv, rtol=1e-15)


def test_groups_linked_through_an_outside_node_do_not_merge():
    # a = x*2 feeds flip (not fusable), whose result joins b = exp(x): merging a's and b's groups would
    # put flip both before and after the merged kernel.
    g = Graph()
    x = g.add_input((6,), ember.float64)
    (a,) = g.add_node(OPS["mul"], (x, 2.0), {})
    (f,) = g.add_node(OPS["flip"], (a,), {"dims": (0,)})
    (b,) = g.add_node(OPS["exp"], (x,), {})
    (c,) = g.add_node(OPS["add"], (b, f), {})
    (d,) = g.add_node(OPS["add"], (c, a), {})
    exe = Executable(g, [d], fuse=True)
    xv = np.linspace(-1, 1, 6)
    (out,) = exe.run([xv])
    np.testing.assert_allclose(out, np.exp(xv) + (2 * xv)[::-1] + 2 * xv, rtol=1e-15)
    assert "flip" in [n.op.name for n in exe.nodes]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_where_matches_numpy_including_nan_and_inf(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((33, 17)).astype(dtype)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    y = rng.standard_normal((33, 17)).astype(dtype)
    cond = rng.random((33, 17)) > 0.5
    cond[0, :3] = True
    for args in ((cond, x, 0), (cond, 0.5, x), (cond, x, y), (cond, x, -2.5)):
        got = fuse_mod._call(np, "where", list(args), None, None)
        want = np.where(*args)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    # operands the select does not cover fall back to np.where
    assert fuse_mod._native_where(np, cond, x[:, ::2], 0) is None
    assert fuse_mod._native_where(np, cond, x, y.astype(np.float16)) is None


def test_relu_backward_in_a_compiled_step_matches_eager():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((64, 32)).astype(np.float32))

    def make():
        w = ember.tensor(rng.standard_normal((32, 48)).astype(np.float32), requires_grad=True)
        return w

    w_c, w_e = make(), None
    w_e = ember.tensor(w_c.detach().numpy().copy(), requires_grad=True)

    def step(w):
        def run():
            w.grad = None
            loss = ember.relu(x.mm(w)).sum(0).pow(2).sum()
            loss.backward()
            return w.grad
        return run

    compiled = ember.compile(step(w_c))
    for _ in range(3):
        got = compiled()
    want = step(w_e)()
    h = x.numpy() @ w_c.detach().numpy()
    ref = x.numpy().T @ (np.where(h > 0, 1.0, 0.0) * 2 * np.maximum(h, 0).sum(0))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())  # float32 sums


def _numpy_adam(w, x, steps, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, steps + 1):
        g = 2 * np.sin(w * x) * np.cos(w * x) * x
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return w


@pytest.mark.skipif(not fuse_numba.available(), reason="numba not installed")
def test_big_adam_update_runs_in_place_in_numba_loops_and_matches_numpy():
    n = fuse_numba.BIG_ELEMENTS + 5
    rng = np.random.default_rng(2)
    w0, xv = rng.standard_normal(n), rng.standard_normal(n)
    w = ember.tensor(w0.copy(), requires_grad=True)
    x = ember.tensor(xv)
    opt = ember.optim.Adam([w], lr=1e-2)

    def step(x):
        loss = ((w * x).sin() ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = ember.compile(step)
    buffer = w._data
    for _ in range(4):
        fn(x)
    exe = fn.last.executable
    big = [nd for nd in _fused(exe) if type(nd.op.impl).__name__ == "NumbaKernel"
           and any(tuple(o.shape) == (n,) for o in nd.outputs)]
    # param and both moments are written where they live (no end-of-run copies)
    assert sum(len(nd.attrs.get("inplace", ())) for nd in big) == 3, [nd.attrs for nd in big]
    assert w._data is buffer
    np.testing.assert_allclose(w.detach().numpy(), _numpy_adam(w0, xv, 4), rtol=1e-9, atol=1e-12)


@pytest.mark.skipif(not fuse_numba.available(), reason="numba not installed")
def test_state_read_through_a_view_after_its_update_is_not_updated_in_place():
    # new_w = w - g*0.1 (a Numba-sized group), and w.T is read by a node after the update: the update
    # must not overwrite w's buffer before that read.
    n = 1 << 9
    wv = np.arange(float(n * n)).reshape(n, n) / (n * n)
    w = ember.tensor(wv.copy())
    g = Graph()
    grad = g.add_input((n, n), ember.float64)
    s = g.add_state(w)
    (wt,) = g.add_node(OPS["permute"], (s,), {"dims": (1, 0)})
    (step,) = g.add_node(OPS["mul"], (grad, 0.1), {})
    (step2,) = g.add_node(OPS["add"], (step, 1.0), {})
    (new,) = g.add_node(OPS["sub"], (s, step2), {})
    (late,) = g.add_node(OPS["flip"], (wt,), {"dims": (0,)})
    g.updates = [(s, new)]
    exe = Executable(g, [late], fuse=True, memory=True)
    gv = np.ones((n, n))
    for k in range(2):
        before = w.numpy().copy()
        (out,) = exe.run([gv])
        np.testing.assert_array_equal(out, before.T[::-1])
        np.testing.assert_allclose(w.numpy(), before - (gv * 0.1 + 1.0), rtol=1e-15)
