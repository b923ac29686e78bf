"""A state whose new value is a constant (``w.grad.zero_()`` traced into a step) is filled by the fused kernel that
reads it last (ember/graph/passes/memory.py ``plan_fills``), not by a pass after the run: the same values, versions and
bits as eager and as the plain write-back, on the NumPy replay and on the compiled loop; refused where a later node
reads the state or a view of it. Also the compiled call's cached checks (ember/graph/compile.py): a state given a new
buffer between calls is still seen by the argument alias check, and a changed signature still retraces."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph import Executable, Graph
from ember.graph.passes import fuse_later, memory
from ember.ops.registry import OPS


def _w1_step(w1, w2, fill=0.0):
    def step(x, y):
        loss = (x.mm(w1).clamp(min=0).mm(w2) - y).pow(2).sum()
        loss.backward()
        with ember.no_grad():
            w1.sub_(1e-3 * w1.grad)
            w2.sub_(1e-3 * w2.grad)
            w1.grad.fill_(fill)
            w2.grad.fill_(fill)
        return loss

    return step


def _w1(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(s).astype(dtype) for s in ((8, 40), (8, 3), (40, 300), (300, 3))]
    x, y, w1, w2 = (ember.tensor(a) for a in arrays)
    w1.requires_grad_(True)
    w2.requires_grad_(True)
    return x, y, w1, w2


def _bits(t):
    return t.detach().numpy().tobytes()


@pytest.mark.parametrize("promote", [True, False], ids=["numba-loop", "numpy-replay"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fill", [0.0, -0.0, 0.5])
def test_filled_states_match_eager_bit_for_bit(promote, dtype, fill, monkeypatch):
    if not promote:
        monkeypatch.setattr(fuse_later, "eligible", lambda *a, **k: False)
    ex, ey, ew1, ew2 = _w1(dtype)
    cx, cy, cw1, cw2 = _w1(dtype)
    eager = _w1_step(ew1, ew2, fill)
    compiled = ember.compile(_w1_step(cw1, cw2, fill), measure=False)
    for k in range(8):  # past fuse_later.RUNS: the NumPy replay, then the compiled loop where numba is installed
        assert _bits(eager(ex, ey)) == _bits(compiled(cx, cy)), k
        for e, c in ((ew1, cw1), (ew2, cw2)):
            assert _bits(e) == _bits(c) and _bits(e.grad) == _bits(c.grad), k
            assert e._version == c._version and e.grad._version == c.grad._version, k
    assert np.all(cw1.grad.numpy() == fill) and np.signbit(cw1.grad.numpy()).all() == np.signbit(fill)
    executable = compiled.last.executable
    assert executable.memory_stats.get("fills") == 2 and executable.in_place_only


def test_filled_step_matches_the_plain_write_back(monkeypatch):
    x, y, w1, w2 = _w1()
    fx, fy, fw1, fw2 = _w1()
    plain_step = ember.compile(_w1_step(w1, w2), measure=False)
    plain_step(x, y)
    with monkeypatch.context() as m:
        m.setattr(memory, "plan_fills", lambda *a, **k: set())
        plain_step(x, y)  # traced without fills
    filled_step = ember.compile(_w1_step(fw1, fw2), measure=False)
    for _ in range(2):
        filled_step(fx, fy)
    assert "fills" not in plain_step.last.executable.memory_stats
    assert filled_step.last.executable.memory_stats["fills"] == 2
    for k in range(6):
        assert _bits(plain_step(x, y)) == _bits(filled_step(fx, fy)), k
        assert _bits(w1) == _bits(fw1) and _bits(w2) == _bits(fw2), k


def _graph_reading_state_late(later_reader: str):
    """s <- 0 after a fused kernel reads s; ``later_reader`` says what reads s (or a view of it) afterwards."""
    t = ember.tensor(np.arange(1.0, 7.0).reshape(2, 3))
    g = Graph()
    x = g.add_input((2, 3), ember.float64)
    s = g.add_state(t)
    if later_reader == "view":
        (v,) = g.add_node(OPS["reshape"], (s, (6,)), {})  # a view made before the kernel, read after it
    (a,) = g.add_node(OPS["add"], (s, x), {})
    (b,) = g.add_node(OPS["mul"], (a, 2.0), {})
    fetches = [b]
    if later_reader == "state":
        (c,) = g.add_node(OPS["sum"], (s,), {})  # reads s itself after the kernel
        fetches = [b, c]
    elif later_reader == "view":
        (c,) = g.add_node(OPS["reshape"], (v, (3, 2)), {})  # reads the view after the kernel (and is fetched)
        fetches = [b, c]
    zeros = g.add_const(np.broadcast_to(np.zeros((), np.float64), (2, 3)))
    g.updates = [(s, zeros)]
    return g, t, x, fetches


@pytest.mark.parametrize("later_reader", ["none", "state", "view"])
@pytest.mark.parametrize("runs", [0, 3], ids=["loop-first-call", "replay-first"])
def test_fill_only_where_nothing_reads_the_state_later(later_reader, runs, monkeypatch):
    monkeypatch.setattr(fuse_later, "RUNS", runs)
    g, t, _, fetches = _graph_reading_state_late(later_reader)
    exe = Executable(g, fetches, include_updates=True, fuse=True, memory=True)
    plain_g, plain_t, _, plain_fetches = _graph_reading_state_late(later_reader)
    plain = Executable(plain_g, plain_fetches, include_updates=True, fuse=False, memory=False)
    assert exe.memory_stats.get("fills", 0) == (1 if later_reader == "none" else 0)
    for k in range(5):
        t._data[...] = plain_t._data[...] = np.arange(1.0, 7.0).reshape(2, 3) * (k + 1)
        arg = np.full((2, 3), 0.25 * k)
        got, want = exe.run([arg]), plain.run([arg])
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(t._data, np.zeros((2, 3)))


def test_fused_replay_copies_an_output_that_is_the_filled_input():
    # A NumPy replay may return one of its inputs as an output (``where`` with a constant condition, a copy
    # elided): the fill then must not change the returned value.
    from ember.graph.passes.fuse import FusedKernel

    kernel = FusedKernel([("t1", "add", ["in0", "in1"], {})], 2, ["t1"], "", np)
    state, other = np.arange(4.0), np.ones(4)
    kernel.fill_after = {0: np.zeros(())}
    kernel._compute = lambda xp, arrays: arrays[0]  # an output that is the filled input itself
    out = kernel(np, state, other)
    np.testing.assert_array_equal(out, np.arange(4.0))
    np.testing.assert_array_equal(state, np.zeros(4))


def test_alias_check_sees_a_state_given_a_new_buffer():
    x, y, w1, w2 = _w1()
    step = ember.compile(_w1_step(w1, w2), measure=False)
    for _ in range(4):
        step(x, y)
    assert step.eager_reason is None
    w1.grad.data = ember.zeros(40, 300)  # a new buffer for a filled state between calls
    view = ember.Tensor._make(w1.grad._data[:8], w1.grad._device, False)  # an argument over that new buffer
    step(view.reshape(8, 300)[:, :40].contiguous(), y)  # (a copy: no alias) runs compiled
    assert step.eager_reason is None
    alias = ember.Tensor._make(w1.grad._data.reshape(-1)[:320].reshape(8, 40), w1.grad._device, False)
    step(alias, y)
    assert step.eager_reason is not None and "share memory" in step.eager_reason


def test_changed_signature_after_repeated_calls_retraces():
    x, y, w1, w2 = _w1()
    step = ember.compile(_w1_step(w1, w2), measure=False)
    for _ in range(4):
        step(x, y)
    first = step.last
    x64 = ember.tensor(x.numpy().astype(np.float64))
    for _ in range(2):
        with pytest.raises(Exception):  # float64 x with float32 weights: mm refuses the mix, eagerly
            step(x64, y)
    small_x, small_y = x[:4].contiguous(), y[:4].contiguous()
    for _ in range(3):
        step(small_x, small_y)
    assert step.last is not first and step.last.graph.inputs[0].shape == (4, 40)
    step(x, y)
    assert step.last is first
