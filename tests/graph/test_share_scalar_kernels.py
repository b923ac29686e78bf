"""Identical scalar kernels over equal states run once (ember/graph/passes/share_scalar.py): a compiled Adam
step computes its bias corrections once, not once per parameter, and gives the same bits as without sharing,
also when the parameters' step counts differ."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph.ir import Graph
from ember.graph.passes import share_scalar
from ember.graph.passes.fuse import fuse_nodes
from ember.ops.registry import OPS


def _shared_nodes(fn) -> list:
    return [n for n in fn.last.executable.nodes if str(n.attrs.get("ops", "")).startswith("shared(")]


def _train(share: bool, monkeypatch, dtype=ember.float32, warm_only_first: int = 0, compiled: bool = True) -> tuple:
    """Parameters after compiled Adam steps of a 3-parameter model (``warm_only_first`` eager steps first in
    which only the first weight gets a gradient, so the step counts differ when the graph is traced)."""
    if not share:
        monkeypatch.setattr(share_scalar, "share_scalar_kernels", lambda nodes, callable_of=None, keep=None: list(nodes))
    rng = np.random.default_rng(0)
    w1 = ember.tensor(rng.standard_normal((6, 5)), dtype=dtype, requires_grad=True)
    w2 = ember.tensor(rng.standard_normal((5,)), dtype=dtype, requires_grad=True)
    b = ember.tensor(rng.standard_normal((1,)), dtype=dtype, requires_grad=True)  # 0-d would fuse its corrections into its update
    x = ember.tensor(rng.standard_normal((4, 6)), dtype=dtype)
    opt = ember.optim.Adam([w1, w2, b], lr=1e-2)
    for _ in range(warm_only_first):
        opt.zero_grad()
        (x @ w1).square().sum().backward()
        opt.step()

    def step(x):
        loss = ((x @ w1).tanh() @ w2 + b).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    fn = ember.compile(step, fallback="raise", measure=False) if compiled else step
    losses = [float(fn(x)) for _ in range(6)]
    counts = [float(opt.state[p]["step"]) for p in (w1, w2, b)]
    return [p.detach().numpy().copy() for p in (w1, w2, b)], losses, counts, fn


@pytest.mark.parametrize("dtype", [ember.float32, ember.float64])
def test_compiled_adam_bias_corrections_run_once_with_the_same_bits(dtype, monkeypatch):
    params, losses, counts, fn = _train(True, monkeypatch, dtype)
    shared = _shared_nodes(fn)
    assert shared and all(n.attrs["ops"].endswith(" x3") for n in shared), [n.attrs for n in shared]
    # no scalar computation over the step counts is left per parameter (the fused kernels and, since torch's
    # one-rounding arithmetic, the host pow of each count)
    scalar_only = [n for n in fn.last.executable.nodes if n not in shared and n.outputs
                   and all(o.shape == () for o in n.outputs) and all(getattr(v, "shape", ()) == () for v in n.inputs)]
    assert not scalar_only, scalar_only
    assert counts == [6.0, 6.0, 6.0]
    monkeypatch.undo()
    with pytest.MonkeyPatch.context() as mp:
        ref_params, ref_losses, _, ref_fn = _train(False, mp, dtype)
        assert not _shared_nodes(ref_fn)
    assert losses == ref_losses
    for p, q in zip(params, ref_params):
        assert p.tobytes() == q.tobytes()


def test_different_step_counts_each_get_their_own_corrections(monkeypatch):
    # w1 took 3 eager steps alone: its count is 3 ahead of w2's and b's when the graph runs
    params, losses, counts, fn = _train(True, monkeypatch, ember.float64, warm_only_first=3)
    assert counts == [9.0, 6.0, 6.0]
    assert _shared_nodes(fn)
    with pytest.MonkeyPatch.context() as mp:
        ref_params, ref_losses, ref_counts, _ = _train(False, mp, ember.float64, warm_only_first=3)
    assert ref_counts == counts and losses == ref_losses
    for p, q in zip(params, ref_params):
        assert p.tobytes() == q.tobytes()
    # and against eager Adam (no graph at all): the same counts, values to float64 rounding
    eager_params, eager_losses, eager_counts, _ = _train(True, monkeypatch, ember.float64, 3, compiled=False)
    assert eager_counts == counts
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-12)
    for p, q in zip(params, eager_params):
        np.testing.assert_allclose(p, q, rtol=1e-12, atol=1e-14)


def _two_kernel_graph() -> tuple:
    g = Graph()
    a, b = g.add_input((), ember.float64), g.add_input((), ember.float64)
    outs = []
    for s in (a, b):
        (t,) = g.add_node(OPS["div"], (1.0, s), {})
        (u,) = g.add_node(OPS["add"], (t, 1.0), {})
        outs.append(u)
    nodes = share_scalar.share_scalar_kernels(fuse_nodes(g.nodes, {o.id for o in outs}, np))
    assert len(nodes) == 1
    return nodes[0]


@pytest.mark.filterwarnings("ignore:divide by zero")
@pytest.mark.parametrize("pair", [(2.0, 2.0), (0.0, -0.0), (np.nan, np.nan), (3.0, 4.0), (np.inf, -np.inf)])
def test_shared_kernel_equals_each_kernel_on_special_values(pair):
    node = _two_kernel_graph()
    arrays = [np.asarray(v, dtype=np.float64) for v in pair]
    out = node.op.impl(np, *arrays)
    with np.errstate(divide="ignore"):
        expected = [np.float64(1.0) / v + 1.0 for v in pair]  # 1/0 = inf, 1/-0 = -inf: the signed zeros differ
    for got, want in zip(out, expected):
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes() or (np.isnan(got) and np.isnan(want))
    assert out[0] is not out[1]  # the second member gets its own array, never the first one's


def test_only_kernels_over_graph_states_and_scalars_are_grouped():
    g = Graph()
    a, b = g.add_input((3,), ember.float64), g.add_input((3,), ember.float64)
    outs = [g.add_node(OPS["exp"], (g.add_node(OPS["add"], (s, 1.0), {})[0],), {})[0] for s in (a, b)]
    nodes = share_scalar.share_scalar_kernels(fuse_nodes(g.nodes, {o.id for o in outs}, np))
    assert [n.attrs["ops"] for n in nodes] == ["add+exp", "add+exp"]  # not 0-d: left alone


def test_any_pure_scalar_op_is_grouped_by_its_literals_and_chains() -> None:
    """With the executor's node callables, plain ops group too (a host pow of each step count), keyed by their
    literal inputs (0.9 ** s and 0.999 ** s never share), and a group may read an earlier group's outputs."""
    from ember.graph.executor import Executable, _node_callable

    g = Graph()
    s1, s2 = g.add_input((), ember.float64), g.add_input((), ember.float64)
    outs = []
    for s in (s1, s2):
        (p1,) = g.add_node(OPS["pow"], (0.9, s), {})
        (p2,) = g.add_node(OPS["pow"], (0.999, s), {})
        (d,) = g.add_node(OPS["sub"], (p1, p2), {})  # reads the pow groups' outputs
        outs += [p1, p2, d]
    nodes = share_scalar.share_scalar_kernels(g.nodes, lambda n: _node_callable(n, np)[0])
    assert sorted(n.attrs.get("ops", "") for n in nodes) == ["shared(pow) x2", "shared(pow) x2", "shared(sub) x2"]
    g.outputs = outs
    for a, b in ((3.0, 3.0), (3.0, 5.0)):
        got = Executable(g, outs, fuse=True).run([np.asarray(a), np.asarray(b)])
        want = [0.9 ** a, 0.999 ** a, 0.9 ** a - 0.999 ** a, 0.9 ** b, 0.999 ** b, 0.9 ** b - 0.999 ** b]
        np.testing.assert_allclose([float(v) for v in got], want, rtol=1e-15)
