"""fit's performance figures, as TensorBoard stores them: MFU consistent with GFLOP/s and the peak, the data-wait
share of a slow loader, the transfer share of a model on a device (the stand-in), the device's own peak."""
from __future__ import annotations

import time

import pytest

import ember
import ember.nn as nn
from ember.data import DataLoader, Dataset
from ember.train import Model, TensorBoard

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
pytest.importorskip("tensorboardX")

PEAKS = {"cpu": 1e12, "cuda": 4e12}


@pytest.fixture(autouse=True)
def _known_peaks(tmp_path, monkeypatch):
    from ember import hardware

    monkeypatch.setenv("EMBER_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(hardware, "measure", lambda device="cpu", **kw: hardware.Peak(
        str(device), f"test {device}", {"float32": PEAKS[str(device).split(":")[0]]}, 1e12))
    hardware._MEMO.clear()
    yield
    hardware._MEMO.clear()


class _Slow(Dataset):
    def __init__(self, n: int, delay: float) -> None:
        self.x, self.y, self.delay = ember.randn(n, 4), ember.randint(0, 2, (n,)), delay

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        time.sleep(self.delay)
        return self.x[i], self.y[i]


def _scalars(path) -> dict:
    acc = event_accumulator.EventAccumulator(str(path / "train"))  # the train run (Keras' layout)
    acc.Reload()
    return {tag: [s.value for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _fit(tmp_path, device, delay):
    trainer = Model(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), device=device)
    trainer.configure(optimizer="sgd", loss="cross_entropy")
    trainer.fit(DataLoader(_Slow(16, delay), batch_size=4), epochs=2, verbose=0,
                callbacks=[TensorBoard(tmp_path, write_graph=False)])
    return trainer, _scalars(tmp_path)


def test_mfu_is_achieved_over_peak_and_a_slow_loader_shows_as_data_wait(tmp_path):
    trainer, scalars = _fit(tmp_path, "cpu", delay=0.01)
    for mfu, gflops in zip(scalars["perf/mfu"], scalars["perf/gflops_per_s"]):
        assert mfu == pytest.approx(gflops * 1e9 / PEAKS["cpu"], rel=1e-4)
    # 4 samples x 10 ms of sleeping per step dwarfs a step of this tiny model, once its first-call costs (the
    # optimizer's fused update is compiled on its first run, in epoch 1) are paid
    waits = scalars["perf/data_wait_share"]
    assert len(waits) == 2 and all(share > 0 for share in waits) and waits[-1] > 0.5
    assert all(share < 0.01 for share in scalars["perf/transfer_share"])  # on the CPU nothing moves
    assert trainer.perf.peak_flops == PEAKS["cpu"]


def test_a_model_on_a_device_shows_transfers_and_uses_the_device_peak(tmp_path):
    with ember.testing.standin_cuda():
        trainer, scalars = _fit(tmp_path, "cuda", delay=0.0)
    assert trainer.perf.peak_flops == PEAKS["cuda"]  # MFU against the device's peak, not the CPU's
    assert all(0 < share < 1 for share in scalars["perf/transfer_share"])  # each batch is copied to the device
    for mfu, gflops in zip(scalars["perf/mfu"], scalars["perf/gflops_per_s"]):
        assert mfu == pytest.approx(gflops * 1e9 / PEAKS["cuda"], rel=1e-4)


def test_bandwidth_and_bound_are_the_roofline_of_the_counted_step(tmp_path):
    from ember.profiler import profile
    from ember.utils.flop_counter import FlopCounterMode

    trainer, scalars = _fit(tmp_path, "cpu", delay=0.0)
    perf = trainer.perf
    # the FLOP counter's bytes (eager, from the live tensors) against the profiler's own costing of the same step
    # (after recording, its backward nodes by replayed rules); fit counts its first step, whose optimizer update
    # (run before the update is compiled) does a little less
    x, y = ember.randn(4, 4), ember.randint(0, 2, (4,))
    with FlopCounterMode(display=False) as counter:
        trainer.train_step(x, y)
    with profile(with_flops=True) as prof:
        trainer.train_step(x, y)
    work = prof.events().work_events()
    assert counter.bytes_moved == sum(e.bytes for e in work) > 0
    assert counter.get_total_flops() == sum(e.flops for e in work) > 0
    assert 0.8 * counter.bytes_moved <= perf.bytes_per_sample * 4 <= counter.bytes_moved
    assert len(scalars["perf/gbytes_per_s"]) == 2
    for gbytes, fraction in zip(scalars["perf/gbytes_per_s"], scalars["perf/bandwidth_fraction"]):
        assert fraction == pytest.approx(gbytes * 1e9 / 1e12, rel=1e-4)  # the measured bandwidth: 1e12 B/s here
    # the ridge of this machine is 1e12 FLOP/s / 1e12 B/s = 1 FLOP/B; a 4x3x2 MLP moves more bytes than it computes
    assert perf.flops_per_sample / perf.bytes_per_sample < 1 and perf.bound == "memory"
    assert scalars["perf/memory_bound"] == [1.0, 1.0]
    assert "GB/s memory-bound" in perf.postfix()
