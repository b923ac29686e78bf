"""ember.interpreters: a per-thread stack (eager at the bottom, a tracer on top) decides who runs an op."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import ember
import ember.graph as G
from ember import interpreters
from ember.graph.builder import SymbolicTensor, Tracer
from ember.graph.ir import TracingError
from ember.optim.optimizer import use_fast_path


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as error:  # reported to the calling test
            box["error"] = error

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def test_a_tracer_is_on_top_only_inside_its_block():
    assert interpreters.current() is interpreters.EAGER
    with Tracer() as outer:
        assert interpreters.current() is outer.builder and interpreters.tracing()
        with Tracer() as inner:
            assert interpreters.current() is inner.builder
        assert interpreters.current() is outer.builder
    assert interpreters.current() is interpreters.EAGER and not interpreters.tracing()


def test_a_trace_does_not_capture_another_threads_ops():
    with Tracer() as tracer:
        x = tracer.input((3,), ember.float32)
        y = x * 2  # this thread: recorded
        other = _in_thread(lambda: (interpreters.current(), ember.ones(3) * 2, ember.rand(2), ember.ones(2).exponential_()))
    assert isinstance(y, SymbolicTensor)
    top, doubled, drawn, filled = other
    assert top is interpreters.EAGER
    assert type(doubled) is ember.Tensor and doubled.tolist() == [2.0, 2.0, 2.0]
    assert type(drawn) is ember.Tensor and drawn.shape == (2,)
    assert type(filled) is ember.Tensor and np.isfinite(filled.numpy()).all()


def test_direct_sampling_is_refused_only_by_the_tracing_thread():
    with Tracer():
        with pytest.raises(TracingError, match="draws numbers from a generator directly"):
            ember.ones(2).exponential_()  # no random node for it: it would draw from the generator now
    assert ember.ones(2).exponential_().shape == (2,)  # eager again after the trace


def test_an_open_default_graph_leaves_eager_code_eager():
    G.reset_default_graph()
    try:
        x = G.placeholder((2,), ember.float32)
        y = x + 1  # a placeholder's op goes to its graph's builder
        assert isinstance(y, SymbolicTensor)
        assert interpreters.current() is interpreters.EAGER
        assert use_fast_path()  # an eager optimizer step keeps its fast path beside an open graph
        ember.manual_seed(0)
        dropped = ember.nn.functional.dropout(ember.ones(1000), p=0.5)
        assert type(dropped) is ember.Tensor and set(np.unique(dropped.numpy())) == {0.0, 2.0}
        out = G.Session().run(y, {x: np.array([1.0, 2.0], np.float32)})
        np.testing.assert_array_equal(out, [2.0, 3.0])
    finally:
        G.reset_default_graph()


def test_pop_refuses_an_interpreter_that_is_not_on_the_stack():
    with pytest.raises(RuntimeError, match="not on this thread's stack"):
        interpreters.pop(interpreters.EAGER)
