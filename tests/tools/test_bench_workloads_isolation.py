"""bench_workloads.py's isolated rounds (benchmarks/_isolated_rounds.py): each library in a process of its own.

The W1 step the torch process runs (``workload_models.two_layer_step``, kept apart so torch's process need not
import ember) must stay ember's showcase step; the driver's CPU accounting must see a process's threads; and one
short run end to end (slow) must give every mode a time, with ember's and torch's modes in different processes.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.graph.showcase import two_layer_step

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import _isolated_rounds  # noqa: E402
import workload_models  # noqa: E402


def _run(step_factory) -> list[np.ndarray]:
    rng = np.random.RandomState(0)
    x, y = ember.tensor(rng.randn(8, 20).astype(np.float32)), ember.tensor(rng.randn(8, 3).astype(np.float32))
    w1 = ember.tensor(rng.randn(20, 5).astype(np.float32), requires_grad=True)
    w2 = ember.tensor(rng.randn(5, 3).astype(np.float32), requires_grad=True)
    step = step_factory(ember, w1, w2, 1e-3)
    losses = [step(x, y).detach().numpy() for _ in range(3)]
    return losses + [w1.detach().numpy(), w2.detach().numpy()]


def test_the_benchmark_w1_step_is_the_showcase_step() -> None:
    for got, want in zip(_run(workload_models.two_layer_step), _run(two_layer_step)):
        np.testing.assert_array_equal(got, want)


def test_run_time_counts_every_thread_of_a_process() -> None:
    if not Path(f"/proc/{os.getpid()}/task").exists():
        pytest.skip("no /proc")
    before = _isolated_rounds.run_time_ns(os.getpid())

    spun, finish = threading.Event(), threading.Event()

    def spin() -> None:  # 30 ms of this thread's own CPU, however loaded the machine; then it waits, alive
        done = time.thread_time() + 0.03
        while time.thread_time() < done:
            pass
        spun.set()
        finish.wait()

    worker = threading.Thread(target=spin)
    worker.start()
    spun.wait()
    try:  # live threads are summed (a library's workers live as long as its process)
        assert _isolated_rounds.run_time_ns(os.getpid()) - before >= 0.03e9
    finally:
        finish.set()
        worker.join()
    assert _isolated_rounds.run_time_ns(2 ** 22 + 7) == 0  # no such process


@pytest.mark.slow
def test_w1_in_one_process_per_library(capsys) -> None:
    pytest.importorskip("torch")
    import bench_workloads

    assert bench_workloads.main(["--only", "w1", "--rounds", "2", "--budget", "0.3", "--no-jax",
                                 "--no-torch-compile"]) == 0
    out = capsys.readouterr().out
    for mode in ("torch eager", "ember eager", "ember compiled"):
        assert any(line.strip().startswith(mode) and " ms " in line for line in out.splitlines()), out
    assert "one process per library" in out and "other processes used at most" in out
    assert bench_workloads.torch is None and bench_workloads.ember is None  # the driver loaded no library
