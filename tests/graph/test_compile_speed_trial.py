"""ember.compile is never slower than eager: the speed trial on the first calls of a signature keeps
the faster of compiled and eager, and says why when it chooses eager."""
from __future__ import annotations

import importlib
import time


import ember
compile_module = importlib.import_module("ember.graph.compile")  # ember.graph.compile is also a function name


def _sgd_step(w: ember.Tensor):
    def step(x):
        loss = (x * w).sum()
        loss.backward()
        with ember.no_grad():
            w.sub_(0.1 * w.grad)
            w.grad = None
        return loss

    return step


def _losses(fn, calls: int) -> list:
    return [round(fn(ember.ones(3)).item(), 4) for _ in range(calls)]


def test_slow_graph_falls_back_to_eager_and_says_why(monkeypatch) -> None:
    original = compile_module._Compiled.run
    graph_runs = []

    def slow_run(self, leaves):  # a compiled graph 20 ms slower than the eager step
        graph_runs.append(1)
        time.sleep(0.02)
        return original(self, leaves)

    monkeypatch.setattr(compile_module._Compiled, "run", slow_run)
    w = ember.ones(3, requires_grad=True)
    step = ember.compile(_sgd_step(w))
    trial_calls = 1 + 1 + 2 * compile_module.SPEED_TRIALS  # eager warm-up, first compiled run, the trial
    assert _losses(step, trial_calls + 3) == [round(3.0 - 0.3 * k, 4) for k in range(trial_calls + 3)]
    assert len(graph_runs) == 1 + compile_module.SPEED_TRIALS  # none after the decision
    assert step.eager_reason is not None and "runs eagerly" in step.eager_reason and " ms " in step.eager_reason
    assert step.eager_reason in step.explain()


def test_fast_graph_is_kept() -> None:
    w = ember.ones(3, requires_grad=True)
    inner = _sgd_step(w)
    python_calls = []

    def step(x):  # the Python-side pause exists only eagerly; the traced graph has none of it
        python_calls.append(1)
        time.sleep(0.01)
        return inner(x)

    compiled = ember.compile(step)
    _losses(compiled, 2 + 2 * compile_module.SPEED_TRIALS)
    assert compiled.eager_reason is None
    assert "speed trial: compiled" in compiled.explain()
    before = len(python_calls)
    _losses(compiled, 3)
    assert len(python_calls) == before  # the graph ran, not the (sleeping) Python function


def test_measure_false_always_runs_the_graph(monkeypatch) -> None:
    original = compile_module._Compiled.run
    runs = []

    def slow_run(self, leaves):
        runs.append(1)
        time.sleep(0.02)
        return original(self, leaves)

    monkeypatch.setattr(compile_module._Compiled, "run", slow_run)
    w = ember.ones(3, requires_grad=True)
    step = ember.compile(_sgd_step(w), measure=False)
    _losses(step, 10)
    assert len(runs) == 9 and step.eager_reason is None


def test_random_graphs_skip_the_trial() -> None:
    w = ember.ones(3, requires_grad=True)

    def step(x):
        loss = ember.nn.functional.dropout(x * w, 0.5).sum()
        loss.backward()
        with ember.no_grad():
            w.grad = None
        return loss

    compiled = ember.compile(step)
    for _ in range(4):
        compiled(ember.ones(3))
    assert "skipped (random nodes)" in compiled.explain()
