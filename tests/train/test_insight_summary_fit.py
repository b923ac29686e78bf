"""Model summaries (Keras' table + FLOPs), History.plot, fit's MFU / data-wait figures, the demo's pictures."""
from __future__ import annotations

import io
import os
import time

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.data import DataLoader, Dataset, TensorDataset
from ember.train import Model, TensorBoard
from ember.utils import summary


@pytest.fixture(autouse=True)
def _quick_peak(tmp_path, monkeypatch):
    from ember import hardware

    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: hardware.Peak(
        device, "test CPU", {"float32": 1e12, "float64": 5e11}, 1e12))
    hardware._MEMO.clear()
    yield
    hardware._MEMO.clear()


def test_summary_rows_match_hand_counts():
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 5, 3))
    model[1].weight.requires_grad_(False)
    model.train()
    before = model[1].running_mean.numpy().copy()
    s = summary(model, ember.randn(2, 1, 5, 5), print_fn=None)
    rows = {r.name: r for r in s.rows}
    assert rows["0"].output_shape == (2, 4, 5, 5) and rows["0"].params == 4 * 9 + 4
    assert rows["0"].flops == 2 * 2 * 4 * 25 * 9 + 2 * 4 * 25  # conv + bias add
    assert rows["4"].output_shape == (2, 3) and rows["4"].flops == 2 * 2 * 3 * 100 + 2 * 3
    assert rows["1"].params == 8 and rows["1"].trainable == 4
    assert s.total_params == 40 + 8 + 303 and s.trainable_params == s.total_params - 4
    assert s.total_flops == sum(r.flops for r in s.rows if r.depth == 1)  # children sum to the model
    assert rows["Sequential"].flops == s.total_flops and rows["Sequential"].params == s.total_params  # so do params
    assert rows["Sequential"].trainable == s.trainable_params
    assert model.training and model[1].training  # modes restored
    np.testing.assert_array_equal(model[1].running_mean.numpy(), before)  # eval mode: stats untouched
    text = str(s)
    for piece in ("Layer (type)", "Output Shape", "Param #", "Trainable", "FLOPs", "0 (Conv2d)", "(2, 4, 5, 5)",
                  "Total params: 351 (1.37 KB)", "Non-trainable params: 4 (16.00 B)", "partial"):
        assert piece in text, piece


def test_model_summary_uses_the_data_fit_has_seen(capsys):
    trainer = Model(nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2)))
    trainer.configure(optimizer="sgd", loss="cross_entropy")
    assert trainer.summary() is None  # printed, as Keras
    assert "?" in trainer.summary(print_fn=None)
    data = TensorDataset(ember.randn(8, 6), ember.randint(0, 2, (8,)))
    trainer.fit(DataLoader(data, batch_size=4), epochs=1, verbose=0)
    text = trainer.summary(print_fn=None)
    assert "(1, 4)" in text and f"{2 * 4 * 6 + 4}" in text.replace(",", "")
    assert "Total params: 38" in capsys.readouterr().out
    assert "print() it" in repr(summary(trainer.module, print_fn=None))  # a REPL does not echo the table twice


def test_history_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    trainer = Model(nn.Linear(3, 2))
    trainer.configure(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"])
    data = TensorDataset(ember.randn(8, 3), ember.randint(0, 2, (8,)))
    history = trainer.fit(DataLoader(data, batch_size=4), epochs=2, verbose=0, validation_data=DataLoader(data))
    path = history.plot(tmp_path / "curves.png")
    assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 5000
    with pytest.raises(ValueError, match="no values for"):
        history.plot(tmp_path / "x.png", metrics=["nope"])
    with pytest.raises(ValueError, match="nothing recorded"):
        ember.train.History().plot(tmp_path / "y.png")


class _SlowDataset(Dataset):
    def __init__(self, n: int, delay: float) -> None:
        self.x, self.y, self.delay = ember.randn(n, 4), ember.randint(0, 2, (n,)), delay

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        time.sleep(self.delay)
        return self.x[i], self.y[i]


def test_fit_reports_mfu_and_data_wait(capsys):
    model = nn.Linear(4, 2, bias=False)
    trainer = Model(model)
    trainer.configure(optimizer="sgd", loss="cross_entropy")
    trainer.fit(DataLoader(_SlowDataset(16, 0.01), batch_size=4), epochs=1, verbose=2)
    out = capsys.readouterr().out
    assert "MFU" in out and "GB/s" in out and "-bound" in out and "data" in out and "xfer" in out
    perf = trainer.perf
    assert perf.steps == 3 and perf.samples == 12  # the first step (FLOPs counted, first-call costs) is left out
    assert perf.data_wait_share > 0.3  # 40 ms of sleeping per step dwarfs a 4x2 linear layer
    # per sample: forward 2*4*2, weight gradient 2*4*2, plus the loss and the update (a few per element)
    assert 32 <= perf.flops_per_sample < 200
    assert 0 < perf.mfu < 1 and perf.transfer_share < 0.5
    quiet = Model(nn.Linear(4, 2))
    quiet.configure(optimizer="sgd", loss="cross_entropy")
    quiet.fit(DataLoader(_SlowDataset(4, 0.0), batch_size=4), epochs=1, verbose=0)
    assert quiet.perf is None  # nothing shows it: nothing is measured


def test_tensorboard_gets_perf_scalars_and_the_graph(tmp_path):
    pytest.importorskip("tensorboardX")
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    trainer = Model(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)))
    trainer.configure(optimizer="sgd", loss="cross_entropy")
    data = TensorDataset(ember.randn(12, 4), ember.randint(0, 2, (12,)))
    trainer.fit(DataLoader(data, batch_size=4), epochs=2, verbose=0, callbacks=[TensorBoard(tmp_path)])
    acc = event_accumulator.EventAccumulator(str(tmp_path / "train"))
    acc.Reload()
    scalars = acc.Tags()["scalars"]
    for tag in ("epoch_loss", "perf/mfu", "perf/gflops_per_s", "perf/data_wait_share", "perf/transfer_share"):
        assert tag in scalars, scalars
    assert [s.step for s in acc.Scalars("perf/mfu")] == [0, 1]
    assert all(0 < s.value < 1 for s in acc.Scalars("perf/mfu"))
    names = [n.name for n in acc.Graph().node]
    assert "Sequential/Linear[0]/linear" in names and "Sequential/ReLU[1]/relu" in names


@pytest.mark.slow  # trains the demo's CNN for an epoch on 64 images (~3-10 s on a shared 2-core machine)
def test_demo_writes_curves_and_graph_next_to_checkpoint(tmp_path, capsys):
    from ember.train import mnist

    result = mnist.run(epochs=1, limit=64, batch_size=32, run_dir=tmp_path, verbose=2)
    out = capsys.readouterr().out
    pictures = result["pictures"]
    assert os.path.dirname(pictures["graph"]) == os.path.dirname(result["checkpoint"])
    assert os.path.isfile(pictures["graph"]) and f"graph:" in out and pictures["graph"] in out
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert pictures["curves"] is None and "pip install matplotlib" in out
    else:
        assert open(pictures["curves"], "rb").read(4) == b"\x89PNG"
    assert "Forward FLOPs" in out and "Conv2d" in out  # the model summary opens the demo
