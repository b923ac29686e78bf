"""``torch.utils.benchmark`` (``ember/utils/benchmark.py``): Timer runs the statement the stated number of times,
Measurement's statistics and printout equal torch's for the same block times, Compare tabulates. PyTorch's
per_sample_grads tutorial times vmap against a loop with it."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.utils import benchmark

torch = pytest.importorskip("torch")
tb = pytest.importorskip("torch.utils.benchmark")
from torch.utils.benchmark.utils.common import Measurement as TorchMeasurement, TaskSpec as TorchTaskSpec  # noqa: E402

TIMES = {
    "one": [3.0e-3],
    "steady": [2.0e-4, 2.1e-4, 2.2e-4, 2.05e-4, 2.3e-4],
    "noisy": [1e-6, 9e-6, 1.2e-6, 1.1e-6, 30e-6, 1.0e-6, 1.3e-6],
    "seconds": [1.5, 1.6, 1.7, 1.55],
    "nanos": [5e-8, 5.1e-8, 4.9e-8, 5e-8, 5.2e-8],
}
SPECS = {"plain": dict(stmt="a + b", setup="pass"),
         "labelled": dict(stmt="f(x)", setup="x = 1", label="ops", sub_label="small", description="cpu"),
         "multiline": dict(stmt="y = f(x)\nz = y + 1", setup="import math\nx = 2", num_threads=2)}


@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize("times", sorted(TIMES))
def test_measurement_statistics_and_printout_like_torch(times, spec):
    ours = benchmark.Measurement(100, TIMES[times], benchmark.TaskSpec(**SPECS[spec]))
    theirs = TorchMeasurement(100, TIMES[times], TorchTaskSpec(**SPECS[spec]))
    assert ours.times == pytest.approx(theirs.times)
    for name in ("median", "mean", "iqr"):
        assert getattr(ours, name) == pytest.approx(getattr(theirs, name), rel=1e-12), name
    assert ours.significant_figures == theirs.significant_figures
    assert ours.has_warnings == theirs.has_warnings
    assert ours.meets_confidence(0.2) == theirs.meets_confidence(0.2)
    assert ours.title == theirs.title and ours.as_row_name == theirs.as_row_name
    assert ours.stmt == theirs.stmt and ours.num_threads == theirs.num_threads
    # the printout after the object line (which names the class) is the same text
    assert repr(ours).splitlines()[1:] == repr(theirs).splitlines()[1:]


@pytest.mark.parametrize("t", [3e-10, 2e-9, 5e-7, 1e-6, 2.5e-3, 0.999, 1.0, 42.0])
def test_select_unit_like_torch(t):
    from torch.utils.benchmark.utils.common import select_unit

    assert benchmark.select_unit(t) == select_unit(t)


def test_merge_pools_replicates_per_run_like_torch():
    spec_a, spec_b = benchmark.TaskSpec("a", "pass"), benchmark.TaskSpec("b", "pass")
    merged = benchmark.Measurement.merge([benchmark.Measurement(10, [1.0, 2.0], spec_a),
                                          benchmark.Measurement(5, [1.0], spec_a),
                                          benchmark.Measurement(1, [3.0], spec_b)])
    assert [(m.stmt, m.number_per_run, m.times) for m in merged] == [("a", 1, [0.1, 0.2, 0.2]), ("b", 1, [3.0])]


def test_timeit_runs_the_statement_number_times_plus_warmup():
    calls = []
    m = benchmark.Timer("f()", globals={"f": lambda: calls.append(1)}).timeit(500)
    assert len(calls) == 500 + 5  # PyTorch's warm-up: max(number // 100, 2) runs first
    assert m.number_per_run == 500 and len(m.raw_times) == 1 and m.raw_times[0] > 0


def test_statement_sees_torch_as_ember_and_setup_runs_first():
    m = benchmark.Timer("y = torch.ones(3) * k", setup="k = 2", globals={}).timeit(3)
    assert m.times[0] > 0
    seen = {}
    benchmark.Timer("seen['mod'] = torch", globals={"seen": seen}).timeit(1)
    assert seen["mod"] is ember
    mine = object()
    benchmark.Timer("seen['mod'] = torch", globals={"seen": seen, "torch": mine}).timeit(1)
    assert seen["mod"] is mine


def test_blocked_autorange_measures_for_min_run_time_in_blocks():
    m = benchmark.Timer("sum(range(50))").blocked_autorange(min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05
    assert m.number_per_run >= 1 and m.number_per_run & (m.number_per_run - 1) == 0 or \
        str(m.number_per_run).strip("0") == "1"  # a power of ten
    assert 0 < m.median < 1e-3


def test_adaptive_autorange_stops_on_a_small_spread_or_max_time():
    m = benchmark.Timer("sum(range(50))").adaptive_autorange(threshold=0.5, max_run_time=2.0)
    assert len(m.times) >= 4 or sum(m.raw_times) > 2.0


def test_threads_are_set_while_timing_and_restored():
    before = ember.get_num_threads()
    seen = []
    benchmark.Timer("seen.append(torch.get_num_threads())", globals={"seen": seen}, num_threads=1).timeit(2)
    assert set(seen) == {1} and ember.get_num_threads() == before


def test_compare_tabulates_by_label_row_and_column():
    spec = dict(stmt="x", setup="pass", label="ops")
    results = [benchmark.Measurement(1, [1.2e-4, 1.3e-4], benchmark.TaskSpec(**spec, sub_label=row, description=col))
               for row in ("add", "mul") for col in ("small", "big")]
    text = str(benchmark.Compare(results))
    lines = text.splitlines()
    assert lines[0].startswith("[") and " ops " in lines[0]
    assert "small" in lines[1] and "big" in lines[1]
    assert any(line.strip().startswith("add") and "125.0" in line for line in lines)
    assert "Times are in microseconds (us)." in text


@pytest.mark.parametrize("kwargs, match", [
    (dict(stmt=lambda: 1), "stmt must be a string"),
    (dict(stmt="x", language="cpp"), "only Python statements"),
    (dict(stmt="x", global_setup="int x;"), "global_setup is C\\+\\+ only"),
])
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        benchmark.Timer(**kwargs)
    with pytest.raises(NotImplementedError, match="blocked_autorange"):
        benchmark.Timer("x").repeat()


def test_import_paths_like_torch():
    import ember.utils.benchmark as as_module
    from ember.utils.benchmark import Compare, Timer  # noqa: F401

    assert as_module is benchmark and np.isfinite(benchmark.timer())


def test_get_num_threads_reflects_set_num_threads_like_torch(monkeypatch):
    from ember import _config

    monkeypatch.setattr(_config, "CPU_THREADS", _config.CPU_THREADS)  # set_num_threads sets ember's pool's count
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(1)
        assert ember.get_num_threads() == 1 and _config.CPU_THREADS == 1
    finally:
        ember.set_num_threads(before)
    assert ember.get_num_threads() == before
