"""Each graph pass on small graphs: what it removes or rewrites, and that results do not change."""
from __future__ import annotations

import numpy as np

import ember
from ember.graph import Executable, Graph
from ember.graph import passes as P
from ember.graph.passes.fuse import fuse_nodes
from ember.ops.registry import OPS


def _run(graph, *inputs, fuse=False, memory=False):
    return Executable(graph, graph.outputs, fuse=fuse, memory=memory).run(list(inputs))


def _ops(graph):
    return [n.op.name for n in graph.nodes]


def test_dce_removes_unused_nodes_and_keeps_updates():
    g = Graph()
    x = g.add_input((3,), ember.float64)
    (a,) = g.add_node(OPS["exp"], (x,), {})
    (unused,) = g.add_node(OPS["sin"], (x,), {})
    g.outputs = [a]
    assert _ops(P.dce(g)) == ["exp"]
    s = g.add_state(ember.zeros(3, dtype=ember.float64))
    (b,) = g.add_node(OPS["add"], (s, 1.0), {})
    g.updates = [(s, b)]
    assert _ops(P.dce(g)) == ["exp", "add"]


def test_cse_merges_identical_subexpressions():
    g = Graph()
    x = g.add_input((4,), ember.float64)
    (a,) = g.add_node(OPS["mul"], (x, 2.0), {})
    (b,) = g.add_node(OPS["mul"], (x, 2.0), {})
    (c,) = g.add_node(OPS["mul"], (x, 2), {})  # int literal: a different op, kept
    (d,) = g.add_node(OPS["add"], (a, b), {})
    (e,) = g.add_node(OPS["add"], (d, c), {})
    g.outputs = [e]
    out = P.dce(P.cse(g))
    assert _ops(out) == ["mul", "mul", "add", "add"]
    xv = np.arange(4.0)
    np.testing.assert_allclose(_run(out, xv)[0], 6 * xv)


def test_constant_folding_evaluates_constant_subgraphs():
    g = Graph()
    x = g.add_input((3,), ember.float64)
    c = g.add_const(np.array([1.0, 2.0, 3.0]))
    (c2,) = g.add_node(OPS["exp"], (c,), {})
    (c3,) = g.add_node(OPS["mul"], (c2, 2.0), {})
    (y,) = g.add_node(OPS["add"], (x, c3), {})
    g.outputs = [y]
    out = P.dce(P.fold(g))
    assert _ops(out) == ["add"]
    np.testing.assert_allclose(_run(out, np.zeros(3))[0], 2 * np.exp([1.0, 2.0, 3.0]))


def test_simplify_identities_found_from_op_records():
    g = Graph()
    x = g.add_input((2, 3), ember.float64)
    (a,) = g.add_node(OPS["mul"], (x, 1.0), {})
    (b,) = g.add_node(OPS["add"], (-0.0, a), {})  # -0.0 + x is x; 0.0 + x is not (0.0 + -0.0 is +0.0)
    (c,) = g.add_node(OPS["sub"], (b, 0), {})
    (d,) = g.add_node(OPS["div"], (c, 1.0), {})
    (e,) = g.add_node(OPS["reshape"], (d,), {"shape": (2, 3)})
    (f,) = g.add_node(OPS["sub"], (0.0, e), {})  # 0 - x is not x: kept
    g.outputs = [f]
    out = P.dce(P.simplify(g))
    assert _ops(out) == ["sub"]
    xv = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(_run(out, xv)[0], -xv)


def test_adding_positive_zero_is_kept_for_negative_zero_inputs():
    """``x + 0.0`` and ``x - (-0.0)`` turn -0.0 into +0.0: not identities (the probe holds signed zeros)."""
    g = Graph()
    x = g.add_input((3,), ember.float64)
    (a,) = g.add_node(OPS["add"], (x, 0.0), {})
    (b,) = g.add_node(OPS["sub"], (a, -0.0), {})
    g.outputs = [b]
    out = P.dce(P.simplify(g))
    assert _ops(out) == ["add", "sub"]
    assert np.signbit(_run(out, np.array([-0.0, 1.0, -0.0]))[0]).tolist() == [False, False, False]


def test_broadcasting_identity_is_not_removed():
    g = Graph()
    x = g.add_input((3,), ember.float64)
    zeros = g.add_const(np.zeros((2, 3)))
    (y,) = g.add_node(OPS["add"], (x, zeros), {})
    g.outputs = [y]
    assert _ops(P.simplify(g)) == ["add"]  # x + 0 would lose the broadcast to (2, 3)


def test_transposes_fold_into_matmul():
    g = Graph()
    a = g.add_input((5, 4), ember.float64)
    b = g.add_input((5, 3), ember.float64)
    (at,) = g.add_node(OPS["permute"], (a,), {"dims": (1, 0)})
    (y,) = g.add_node(OPS["matmul"], (at, b), {})
    (yt,) = g.add_node(OPS["permute"], (y,), {"dims": (1, 0)})
    (ytt,) = g.add_node(OPS["permute"], (yt,), {"dims": (1, 0)})
    g.outputs = [ytt]
    out = P.dce(P.simplify(g))
    assert _ops(out) == ["matmul_t"]
    assert out.nodes[0].attrs == {"transpose_a": True, "transpose_b": False}
    rng = np.random.RandomState(0)
    av, bv = rng.randn(5, 4), rng.randn(5, 3)
    np.testing.assert_allclose(_run(out, av, bv)[0], av.T @ bv)


def test_fusion_makes_one_kernel_for_a_chain_ending_in_a_reduction():
    g = Graph()
    x = g.add_input((4, 5), ember.float64)
    y = g.add_input((5,), ember.float64)
    (a,) = g.add_node(OPS["mul"], (x, y), {})
    (b,) = g.add_node(OPS["sigmoid"], (a,), {})
    (c,) = g.add_node(OPS["clamp"], (b,), {"min": 0.3, "max": 0.7})
    (d,) = g.add_node(OPS["sum"], (c,), {"dims": (1,), "keepdim": False})
    g.outputs = [d]
    fused = fuse_nodes(g.nodes, {d.id}, np)
    assert [n.op.name for n in fused] == ["fused"]
    assert "clip" in fused[0].op.impl.source and "sum" in fused[0].op.impl.source
    rng = np.random.RandomState(1)
    xv, yv = rng.randn(4, 5), rng.randn(5)
    ref = np.clip(1 / (1 + np.exp(-xv * yv)), 0.3, 0.7).sum(axis=1)
    for _ in range(2):  # the second run uses the scratch buffers made by the first
        np.testing.assert_allclose(_run(g, xv, yv, fuse=True)[0], ref, rtol=1e-12)


def test_fusion_keeps_values_used_outside_the_group():
    g = Graph()
    x = g.add_input((3,), ember.float64)
    (a,) = g.add_node(OPS["exp"], (x,), {})
    (b,) = g.add_node(OPS["mul"], (a, 2.0), {})
    (d,) = g.add_node(OPS["neg"], (b,), {})
    g.outputs = [a, d]
    exe = Executable(g, g.outputs, fuse=True)
    assert [n.op.name for n in exe.nodes] == ["fused"]
    xv = np.array([0.0, 1.0, 2.0])
    out_a, out_d = exe.run([xv])
    np.testing.assert_allclose(out_a, np.exp(xv))
    np.testing.assert_allclose(out_d, -2 * np.exp(xv))


def test_memory_planning_updates_state_in_place():
    w = ember.tensor(np.arange(4.0))
    g = Graph()
    grad = g.add_input((4,), ember.float64)
    s = g.add_state(w)
    (step,) = g.add_node(OPS["mul"], (grad, 0.5), {})
    (new,) = g.add_node(OPS["sub"], (s, step), {})
    g.updates = [(s, new)]
    exe = Executable(g, [], fuse=True, memory=True)
    assert exe.memory_stats == {"inplace_updates": 1}
    buffer = w._data
    for _ in range(2):
        exe.run([np.ones(4)])
    assert w._data is buffer
    np.testing.assert_allclose(w.numpy(), np.arange(4.0) - 1.0)


def test_compile_passes_switch_changes_graph_not_results():
    def f(x):
        return ((x * 1.0 + 0.0).exp() * 2).sum() + (x * 1.0 + 0.0).exp().sum()

    x = ember.tensor(np.linspace(-1, 1, 6))
    plain = ember.compile(f, passes=[], warmup=0)
    full = ember.compile(f, warmup=0)
    np.testing.assert_allclose(plain(x).item(), full(x).item(), rtol=1e-12)
    np.testing.assert_allclose(full(x).item(), 3 * np.exp(np.linspace(-1, 1, 6)).sum(), rtol=1e-12)
    assert len(full.graph.nodes) < len(plain.graph.nodes)


def test_validate_rejects_inconsistent_graphs():
    import pytest

    g = Graph()
    x = g.add_input((3,), ember.float64)
    (a,) = g.add_node(OPS["exp"], (x,), {})
    a.shape = (4,)
    with pytest.raises(ValueError, match="shape rule"):
        g.validate()
