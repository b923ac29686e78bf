"""Random ops inside ember.compile'd functions, define-then-run graphs and saved graphs.

References are independent of ember's sampler: keep rates are checked against the Bernoulli
distribution (binomial standard error), dropout's scale against 1/(1-p), gradients against the
mask read back from the forward output, moments of rand/randn against their distributions.
"""
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.graph as G
import ember.nn as nn
import ember.nn.functional as F
from ember.graph.ir import Graph, TracingError
from ember.graph.passes import cse, fold
from ember.ops.registry import OPS

P = 0.3
N = 20000


def _ops(graph):
    return [n.op.name for n in graph.nodes]


def _no_fallback(cf, *args):
    """Call the compiled function (warm-up + traced run) turning any fallback warning into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return [cf(*args) for _ in range(2)][-1]


# ---- statistics, seeds ----------------------------------------------------------------------------------
def test_compiled_dropout_keep_rate_and_scale():
    cf = ember.compile(lambda x: F.dropout(x, P), fallback="raise")
    out = _no_fallback(cf, ember.ones(N)).numpy()
    assert _ops(cf.graph).count("random_bernoulli") == 1
    kept = out != 0
    se = np.sqrt(P * (1 - P) / N)
    assert abs(kept.mean() - (1 - P)) < 5 * se
    np.testing.assert_allclose(out[kept], 1.0 / (1.0 - P), rtol=1e-6)


def test_compiled_rand_randn_moments_and_ranges():
    cf = ember.compile(lambda x: (x + ember.rand(N, dtype=ember.float64), x + ember.randn(N, dtype=ember.float64),
                                  ember.randint(2, 7, (N,)), ember.randperm(50)), fallback="raise")
    u, z, k, perm = (t.numpy() for t in _no_fallback(cf, ember.zeros(N, dtype=ember.float64)))
    assert {"random_uniform", "random_normal", "random_integers", "random_permutation"} <= set(_ops(cf.graph))
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / N)
    assert abs(z.mean()) < 5 / np.sqrt(N) and abs(z.std() - 1) < 0.03
    assert k.dtype == np.int64 and set(np.unique(k)) == {2, 3, 4, 5, 6}
    np.testing.assert_array_equal(np.sort(perm), np.arange(50))


def test_compiled_bernoulli_and_multinomial_follow_their_probabilities():
    probs = np.array([0.1, 0.5, 0.9])
    cf = ember.compile(lambda p: (ember.bernoulli(p.expand(N, 3)), ember.multinomial(p, 4000, replacement=True)),
                       fallback="raise")
    draws, idx = (t.numpy() for t in _no_fallback(cf, ember.tensor(probs)))
    np.testing.assert_allclose(draws.mean(0), probs, atol=5 * np.sqrt(0.25 / N))
    np.testing.assert_allclose(np.bincount(idx, minlength=3) / 4000, probs / probs.sum(), atol=0.04)


def test_same_seed_gives_identical_runs_and_successive_calls_differ():
    cf = ember.compile(lambda x: F.dropout(x, 0.5) + ember.randn(64), fallback="raise")
    x = ember.ones(64)
    _no_fallback(cf, x)
    ember.manual_seed(123)
    a, b = cf(x).numpy(), cf(x).numpy()
    ember.manual_seed(123)
    a2, b2 = cf(x).numpy(), cf(x).numpy()
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    assert not np.array_equal(a, b)


def test_explicit_generator_seeds_the_graph_and_leaves_the_default_alone():
    gen = ember.Generator().manual_seed(7)
    cf = ember.compile(lambda x: x + ember.rand(16, generator=gen), fallback="raise")
    x = ember.zeros(16)
    _no_fallback(cf, x)
    gen.manual_seed(7)
    state = ember.get_rng_state()
    first = cf(x).numpy()
    assert np.array_equal(ember.get_rng_state().numpy(), state.numpy())  # the default generator did not move
    gen.manual_seed(7)
    np.testing.assert_array_equal(cf(x).numpy(), first)


# ---- forward/backward mask consistency --------------------------------------------------------------
def test_training_step_backward_uses_the_forward_mask():
    w = ember.ones(N, requires_grad=True)

    @ember.compile(fallback="raise")
    def step():
        w.grad = None
        out = F.dropout(w, P)
        out.sum().backward()
        return out

    for _ in range(3):
        out = step().detach().numpy()
    assert "random_bernoulli" in _ops(step.graph)
    np.testing.assert_allclose(w.grad.numpy(), (out != 0) / (1 - P), rtol=1e-6)


def test_compiled_autograd_backward_uses_the_forward_mask():
    model = nn.Sequential(nn.Dropout(P))
    cm = ember.compile(model, fallback="raise")
    x = ember.ones(N, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x.grad = None
            out = cm(x)
            out.sum().backward()
    assert type(cm.last).__name__ == "CompiledAutograd"
    assert "random_bernoulli" in _ops(cm.last.graph) and "random_bernoulli" not in _ops(cm.last.backward_graph)
    np.testing.assert_allclose(x.grad.numpy(), (out.detach().numpy() != 0) / (1 - P), rtol=1e-6)


def test_compiled_module_grads_match_eager_with_the_same_mask():
    rng = np.random.default_rng(0)
    lin = nn.Linear(6, 5).double()
    cm = ember.compile(lambda x: F.dropout(lin(x), 0.5), fallback="raise")
    x = ember.tensor(rng.standard_normal((8, 6)))
    for _ in range(3):
        lin.zero_grad()
        out = cm(x)
        out.sum().backward()
    # Reference in NumPy from the mask the compiled forward used.
    mask = out.detach().numpy() != 0
    w = lin.weight.detach().numpy()
    g_pre = mask * 2.0  # d out / d (x w^T + b) where kept
    np.testing.assert_allclose(lin.weight.grad.numpy(), g_pre.T @ x.numpy(), rtol=1e-10)
    np.testing.assert_allclose(lin.bias.grad.numpy(), g_pre.sum(0), rtol=1e-10)
    np.testing.assert_allclose(out.detach().numpy(), mask * 2.0 * (x.numpy() @ w.T + lin.bias.detach().numpy()),
                               rtol=1e-10)


# ---- passes ----------------------------------------------------------------------------------------
def test_cse_keeps_two_dropout_masks():
    cf = ember.compile(lambda x: F.dropout(x, 0.5) + F.dropout(x, 0.5), fallback="raise")
    out = _no_fallback(cf, ember.ones(N)).numpy()
    assert _ops(cf.graph).count("random_bernoulli") == 2
    # Two independent masks: 0, 2 and 4 each appear about 1/4, 1/2, 1/4 of the time (merged: only 0 and 4).
    freq = [np.mean(out == v) for v in (0.0, 2.0, 4.0)]
    np.testing.assert_allclose(freq, [0.25, 0.5, 0.25], atol=0.02)


def test_cse_and_fold_leave_random_nodes_alone_on_constant_inputs():
    g = Graph()
    seed = g.add_const(np.array(5, dtype=np.int64))
    probs = g.add_const(np.full(8, 0.5))
    attrs = {"shape": (8,), "dtype": ember.float64, "stream": 0}
    (a,) = g.add_node(OPS["random_bernoulli"], (seed, probs), attrs)
    (b,) = g.add_node(OPS["random_bernoulli"], (seed, probs), dict(attrs))
    (c,) = g.add_node(OPS["add"], (a, b), {})
    g.outputs = [c]
    assert _ops(fold(g)).count("random_bernoulli") == 2
    assert _ops(cse(g)).count("random_bernoulli") == 2


def test_constant_folding_keeps_random_nodes_in_compiled_graphs():
    cf = ember.compile(lambda x: x * ember.bernoulli(ember.full((64,), 0.5)), fallback="raise")
    _no_fallback(cf, ember.ones(64))
    assert "random_bernoulli" in _ops(cf.graph)
    runs = {tuple(cf(ember.ones(64)).numpy()) for _ in range(4)}
    assert len(runs) == 4


def test_dce_drops_unused_samples_without_shifting_used_ones():
    x = ember.ones(32)
    keep = ember.compile(lambda x: x + ember.rand(32), fallback="raise")
    extra = ember.compile(lambda x: (x + ember.rand(32), ember.rand(32))[0], fallback="raise")
    _no_fallback(keep, x)
    _no_fallback(extra, x)
    assert _ops(extra.graph).count("random_uniform") == 1
    ember.manual_seed(1)
    a = keep(x).numpy()
    ember.manual_seed(1)
    np.testing.assert_array_equal(extra(x).numpy(), a)


# ---- whole models -------------------------------------------------------------------------------------
def test_transformer_encoder_training_step_compiles_and_learns():
    ember.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.1, batch_first=True)
    head = nn.Linear(16, 1)
    opt = ember.optim.Adam(list(layer.parameters()) + list(head.parameters()), lr=1e-2)
    x, y = ember.randn(4, 6, 16), ember.randn(4, 6, 1)

    @ember.compile
    def step(x, y):
        opt.zero_grad()
        loss = ((head(layer(x)) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager would warn
        losses = [step(x, y).item() for _ in range(10)]
    assert step.last is not None and _ops(step.graph).count("random_bernoulli") >= 3
    assert losses[-1] < 0.6 * losses[0]


def test_fallback_still_happens_for_data_dependent_control_flow(recwarn):
    def f(x):
        y = F.dropout(x, 0.5)
        return y * 2 if y.sum() > 0 else y

    cf = ember.compile(f)
    for _ in range(3):
        cf(ember.ones(8))
    assert any("falling back to eager" in str(w.message) for w in recwarn.list)


def test_in_place_fill_without_a_graph_sampler_is_refused_clearly():
    cf = ember.compile(lambda x: x + x.clone().exponential_(), warmup=0, fallback="raise")
    with pytest.raises(TracingError, match="exponential_"):
        cf(ember.ones(3))


# ---- define-then-run, saved graphs, ONNX ----------------------------------------------------------------
def test_session_dropout_samples_per_run_and_shares_the_mask_with_gradients():
    G.reset_default_graph()
    try:
        x = G.placeholder((N,), ember.float64, name="x")
        y = F.dropout(x, P)
        (gx,) = G.gradients(y.sum(), [x])
        sess = G.Session()
        feed = {x: np.ones(N)}
        y1, g1 = sess.run([y, gx], feed)
        y2 = sess.run(y, feed)
        np.testing.assert_allclose(g1, (y1 != 0) / (1 - P), rtol=1e-12)
        assert not np.array_equal(y1, y2)
        np.testing.assert_array_equal(sess.run(y, feed, seed=5), sess.run(y, feed, seed=5))
        assert abs((y2 != 0).mean() - (1 - P)) < 5 * np.sqrt(P * (1 - P) / N)
    finally:
        G.reset_default_graph()


def test_saved_graph_with_dropout_runs_in_a_fresh_process(tmp_path):
    cf = ember.compile(lambda x: F.dropout(x, P) * 3.0, fallback="raise")
    _no_fallback(cf, ember.ones(N))
    cf.save(str(tmp_path))
    script = textwrap.dedent(f"""
        import numpy as np, ember, ember.graph
        g = ember.graph.load({str(tmp_path)!r})
        x = ember.ones({N})
        a, b = g(x)[0].numpy(), g(x)[0].numpy()
        assert not np.array_equal(a, b), "fresh seed per run"
        np.testing.assert_array_equal(g(x, seed=11)[0].numpy(), g(x, seed=11)[0].numpy())
        ember.manual_seed(3); c = g(x)[0].numpy()
        ember.manual_seed(3); np.testing.assert_array_equal(g(x)[0].numpy(), c)
        kept = a != 0
        assert abs(kept.mean() - {1 - P}) < 0.02, kept.mean()
        np.testing.assert_allclose(a[kept], 3.0 / {1 - P}, rtol=1e-6)
        print("ok")
    """)
    root = Path(__file__).parents[2]
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                          timeout=120)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_onnx_export_dropout_identity_in_eval_and_clear_error_in_training(tmp_path):
    pytest.importorskip("onnx")
    model = nn.Sequential(nn.Linear(4, 3), nn.Dropout(0.5))
    x = ember.randn(2, 4)
    proto = ember.onnx.export(model, (x,), str(tmp_path / "m.onnx"))
    assert not any("Random" in n.op_type or n.op_type == "Bernoulli" for n in proto.graph.node)
    assert model.training  # restored after export
    with pytest.raises(NotImplementedError, match="random sampling node.*eval mode"):
        ember.onnx.export(lambda t: F.dropout(t, 0.5, training=True), (x,), str(tmp_path / "f.onnx"))


def test_inplace_samplers_compile_without_fallback(recwarn):
    @ember.compile
    def fill(x):
        w = ember.empty(4000).uniform_(-1.0, 1.0)
        v = ember.empty(4000).normal_(2.0, 0.5)
        b = ember.empty(4000).bernoulli_(0.25)
        return x * w, v, b

    for _ in range(3):
        w, v, b = fill(ember.ones(4000))
    assert not [w_ for w_ in recwarn if "falling back" in str(w_.message)]
    assert fill.last is not None  # the third call ran the traced graph
    w, v, b = w.numpy(), v.numpy(), b.numpy()
    assert -1.0 <= w.min() and w.max() < 1.0 and abs(w.mean()) < 0.05
    assert abs(v.mean() - 2.0) < 0.05 and abs(v.std() - 0.5) < 0.05
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.03
