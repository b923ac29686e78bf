"""The executor runs its program as one generated straight-line function (``Executable._make_straight``): the same
calls in the same order as the entry-by-entry loop, so the same results, also for multi-output (fused) nodes,
fetched inputs, constants and states, and a program the profiler (which walks the entries itself) runs alike."""
from __future__ import annotations

import numpy as np

import ember
from ember.graph import Executable, Graph
from ember.ops.registry import OPS


def _graph():
    w = ember.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    g = Graph()
    x = g.add_input((2, 3), ember.float64)
    s = g.add_state(w)
    c = g.add_const(np.full((2, 3), 0.5))
    (a,) = g.add_node(OPS["exp"], (x,), {})
    (b,) = g.add_node(OPS["mul"], (a, s), {})
    (d,) = g.add_node(OPS["add"], (a, c), {})  # a fused kernel with two outputs used outside: a tuple
    (e,) = g.add_node(OPS["sum"], (b,), {})
    (f,) = g.add_node(OPS["mul"], (d, e), {})
    (n,) = g.add_node(OPS["sub"], (s, f), {})
    g.updates = [(s, n)]
    return g, w, [x, b, d, e, f, c, s]


def _loop_run(exe, inputs):
    """The program entry by entry, as the executor ran it before (and as the profiler walks it)."""
    env = exe.template[:]
    for slot, array in zip(exe.input_slots, inputs):
        env[slot] = array
    for slot, tensor in exe.state_reads:
        env[slot] = tensor._data
    for fn, ins, out in exe.program:
        env[out] = fn(*[env[i] for i in ins])
    return [np.array(env[slot], copy=True) for slot in exe.fetch_slots]  # (a fetched state: its start value)


def test_straight_program_gives_the_loops_results():
    for fuse in (False, True):
        g, w, fetches = _graph()
        exe = Executable(g, fetches, include_updates=True, fuse=fuse, memory=fuse)
        g2, w2, fetches2 = _graph()
        ref = Executable(g2, fetches2, include_updates=True, fuse=fuse, memory=fuse)
        assert fuse is False or any(len(n.outputs) > 1 for n in exe.nodes)  # the tuple items are exercised
        for k in range(3):
            x = np.arange(6.0).reshape(2, 3) / (k + 1)
            want = _loop_run(ref, [x])
            got = exe.run([x])
            ref.run([x])  # (advances the reference's state the same way)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(w._data, w2._data)
        assert exe._straight is not None


def test_profiled_run_equals_the_straight_run():
    from ember import profiler

    g, w, fetches = _graph()
    exe = Executable(g, fetches, include_updates=False, fuse=True, memory=True)
    x = np.arange(6.0).reshape(2, 3)
    plain = exe.run([x])
    with profiler.profile():
        profiled = exe.run([x])
    for a, b in zip(plain, profiled):
        np.testing.assert_array_equal(a, b)


def test_only_int_slots_reach_the_generated_source():
    # A program whose slot is not a plain int (what a tampered graph could try to smuggle into the source text)
    # is refused before any code is generated.
    import pytest

    g, w, fetches = _graph()
    exe = Executable(g, fetches, include_updates=False, fuse=False, memory=False)
    fn, ins, out = exe.program[0]
    exe.program[0] = (fn, ins, "0]; import os #")
    with pytest.raises(TypeError, match="not a non-negative int"):
        exe._make_straight()
    exe.program[0] = (fn, ins, out)
    exe.fetch_slots = list(exe.fetch_slots) + [True]  # bool is an int subclass, still refused
    with pytest.raises(TypeError, match="not a non-negative int"):
        exe._make_straight()
