"""fit's TensorBoard logs in Keras' layout, read back with TensorBoard's own loader.

Keras writes ``<log_dir>/train`` and ``<log_dir>/validation`` runs with the same tag names (``epoch_loss``,
``epoch_<metric>``), which TensorBoard overlays as two curves of one chart; the values must be the History's.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.train import Model, TensorBoard

pytest.importorskip("tensorboardX")
event_multiplexer = pytest.importorskip("tensorboard.backend.event_processing.event_multiplexer")


def _fit(tmp_path, **board):
    ember.manual_seed(0)
    x, y = ember.randn(24, 4), ember.randint(0, 3, (24,))
    model = Model(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    model.configure("sgd", "cross_entropy", ["accuracy"], lr=0.1)
    history = model.fit(x, y, epochs=3, batch_size=8, validation_data=(x[:12], y[:12]), verbose=0,
                        callbacks=[TensorBoard(tmp_path, **board)])
    runs = event_multiplexer.EventMultiplexer().AddRunsFromDirectory(str(tmp_path))
    runs.Reload()
    return history, runs


def test_train_and_validation_are_two_runs_with_the_same_tags(tmp_path):
    history, runs = _fit(tmp_path, update_freq=2)
    assert set(runs.Runs()) == {"train", "validation"}
    train, val = (set(runs.GetAccumulator(r).Tags()["scalars"]) for r in ("train", "validation"))
    assert {"epoch_loss", "epoch_accuracy"} <= train & val  # one chart per tag, a curve per run
    assert val == {"epoch_loss", "epoch_accuracy"}  # the validation run holds only the validation values
    for run, prefix in (("train", ""), ("validation", "val_")):
        for name in ("loss", "accuracy"):
            events = runs.Scalars(run, f"epoch_{name}")
            assert [e.step for e in events] == [0, 1, 2]
            np.testing.assert_allclose([e.value for e in events], history.history[prefix + name], rtol=1e-6)
    # step-level values stay in the train run (Keras' batch_ prefix), every update_freq batches: 3 per epoch
    assert [e.step for e in runs.Scalars("train", "batch_loss")] == [2, 4, 6, 8]
    assert {"perf/mfu", "perf/data_wait_share", "perf/transfer_share", "batch_perf/mfu"} <= train
    assert runs.GetAccumulator("train").Graph() is not None  # the graph goes with the train run, as in Keras


def test_without_validation_there_is_no_validation_run(tmp_path):
    ember.manual_seed(0)
    model = Model(nn.Linear(4, 2))
    model.configure("sgd", "cross_entropy")
    model.fit(ember.randn(8, 4), ember.randint(0, 2, (8,)), epochs=1, batch_size=4, verbose=0,
              callbacks=[TensorBoard(tmp_path, write_graph=False)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train"]
