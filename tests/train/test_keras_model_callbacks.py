"""ember.train: the Keras-style Model, callbacks, metrics, progress, TensorBoard and checkpoints.

References: an independent PyTorch training loop (same weights, same batches), NumPy, Keras's
documented callback semantics, and the TensorBoard event protobufs shipped with tensorboardX.
"""
from __future__ import annotations

import csv
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
import ember.optim
from ember import nn
from ember.data import DataLoader, TensorDataset
from ember.train import (
    Callback, CSVLogger, EarlyStopping, LambdaCallback, LearningRateScheduler, Model, ModelCheckpoint, TensorBoard,
    TerminateOnNaN, Trainer, load_checkpoint, metrics, save_checkpoint,
)

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[2]


def to_np(x):
    return np.asarray(x.detach().__array__())


def blobs(n=120, seed=0):
    """Three Gaussian blobs in 4-D: a small, learnable classification problem."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0]], dtype=np.float32)
    x = (centers[y] + rng.standard_normal((n, 4)).astype(np.float32) * 0.7).astype(np.float32)
    return x, y


def mlp(seed=0, dropout=0.0):
    ember.manual_seed(seed)
    layers = [nn.Linear(4, 16), nn.ReLU()] + ([nn.Dropout(dropout)] if dropout else []) + [nn.Linear(16, 3)]
    return nn.Sequential(*layers)


# ---- metrics ------------------------------------------------------------------------------------------
def test_metrics_against_numpy_and_torch(rng):
    logits = rng.standard_normal((50, 7)).astype(np.float32)
    labels = rng.integers(0, 7, 50)
    acc, top3 = metrics.Accuracy(), metrics.TopKAccuracy(3)
    for part in (slice(0, 20), slice(20, 50)):  # two batches: the running value is over all samples
        acc.update(ember.tensor(logits[part]), ember.tensor(labels[part]))
        top3.update(ember.tensor(logits[part]), ember.tensor(labels[part]))
    assert acc.result() == pytest.approx(np.mean(logits.argmax(1) == labels))
    ref_top3 = (torch.from_numpy(logits).topk(3, dim=1).indices == torch.from_numpy(labels)[:, None]).any(1)
    assert top3.result() == pytest.approx(ref_top3.float().mean().item())
    binary = metrics.Accuracy()
    binary.update(ember.tensor([0.9, 0.2, 0.6]), ember.tensor([1.0, 0.0, 0.0]))
    assert binary.result() == pytest.approx(2 / 3)
    mean = metrics.Mean()
    mean.update(2.0, 3)
    mean.update(4.0, 1)
    assert mean.result() == pytest.approx(2.5)
    assert metrics.get_metric("acc").name == "acc" and metrics.get_metric("top5").k == 5
    with pytest.raises(ValueError, match="unknown metric"):
        metrics.get_metric("f2")


# ---- fit / evaluate / predict ----------------------------------------------------------------------------
def test_fit_matches_an_independent_torch_loop():
    x, y = blobs(100)
    net = mlp(0)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for (_, p_ember), p_torch in zip(net.named_parameters(), ref.parameters()):
            p_torch.copy_(torch.from_numpy(to_np(p_ember).copy()))
    model = Model(net).configure(ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9), "cross_entropy",
                                 ["accuracy"])
    history = model.fit(x, y, epochs=2, batch_size=32, shuffle=False, verbose=0)

    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    expected_loss = []
    for _ in range(2):
        total = 0.0
        for start in range(0, 100, 32):
            xb, yb = xt[start:start + 32], yt[start:start + 32]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(ref(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        expected_loss.append(total / 100)
    np.testing.assert_allclose(history.history["loss"], expected_loss, rtol=1e-5)
    for p_ember, p_torch in zip(net.parameters(), ref.parameters()):
        np.testing.assert_allclose(to_np(p_ember), p_torch.detach().numpy(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        out = ref(xt)
        ref_loss = torch.nn.functional.cross_entropy(out, yt).item()
        ref_acc = (out.argmax(1) == yt).float().mean().item()
    loss, acc = model.evaluate(x, y, batch_size=64, verbose=0)
    assert loss == pytest.approx(ref_loss, rel=1e-5) and acc == pytest.approx(ref_acc)
    assert model.evaluate(x, y, verbose=0, return_dict=True) == pytest.approx({"loss": ref_loss, "accuracy": ref_acc})
    np.testing.assert_allclose(to_np(model.predict(x, batch_size=7)), out.numpy(), rtol=1e-5, atol=1e-6)


def test_fit_learns_and_accepts_datasets_and_loaders():
    x, y = blobs(300)
    for source in ("arrays", "dataset", "loader"):
        model = Trainer(mlp(1)).configure("adam", "cross_entropy", ["accuracy"], lr=0.02)
        if source == "arrays":
            history = model.fit(x, y, epochs=8, batch_size=32, verbose=0)
        elif source == "dataset":
            history = model.fit(TensorDataset(x, y), epochs=8, batch_size=32, verbose=0)
        else:
            history = model.fit(DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2),
                                epochs=8, verbose=0)
        assert history.history["loss"][-1] < history.history["loss"][0]
        assert history.history["accuracy"][-1] > 0.85, source


def test_validation_split_uses_the_last_fraction():
    x, y = blobs(100)
    sizes = []
    model = Model(mlp(2)).configure("sgd", "cross_entropy", ["accuracy"], lr=0.05)
    history = model.fit(x, y, epochs=2, batch_size=16, validation_split=0.2, verbose=0,
                        callbacks=[LambdaCallback(on_train_batch_end=lambda b, logs: sizes.append(logs["size"]))])
    assert sum(sizes) == 2 * 80
    last = model.evaluate(x[80:], y[80:], verbose=0, return_dict=True)
    assert history.history["val_loss"][-1] == pytest.approx(last["loss"], rel=1e-6)
    assert history.history["val_accuracy"][-1] == pytest.approx(last["accuracy"])


def test_callback_hooks_run_in_keras_order():
    calls = []

    class Recorder(Callback):
        def __getattribute__(self, name):
            if name.startswith("on_") and not name.startswith("on_batch"):
                calls.append(name)
            return object.__getattribute__(self, name)

    x, y = blobs(8)
    model = Model(mlp()).configure("sgd", "cross_entropy")
    model.fit(x, y, batch_size=4, epochs=1, validation_data=(x[:4], y[:4]), verbose=0, callbacks=[Recorder()])
    assert calls == ["on_train_begin", "on_epoch_begin", "on_train_batch_begin", "on_train_batch_end",
                     "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_batch_begin",
                     "on_test_batch_end", "on_test_end", "on_epoch_end", "on_train_end"]


class FakeModel:
    """Just what EarlyStopping touches: a module with a state dict and a stop flag."""

    def __init__(self):
        self.module = nn.Linear(1, 1)
        self.stop_training = False


def test_early_stopping_follows_keras_semantics():
    stop = EarlyStopping(monitor="val_loss", patience=2, min_delta=0.01, restore_best_weights=True)
    fake = FakeModel()
    stop.set_model(fake)
    stop.on_train_begin()
    weights_at = {}
    for epoch, value in enumerate([1.0, 0.8, 0.795, 0.81, 0.7]):
        with ember.no_grad():
            fake.module.weight.fill_(float(epoch))
        weights_at[epoch] = float(fake.module.weight)
        stop.on_epoch_end(epoch, {"val_loss": value})
        if fake.stop_training:
            break
    # 0.795 is not better than 0.8 by min_delta; after two epochs without improvement it stops.
    assert epoch == 3 and stop.stopped_epoch == 3 and stop.best_epoch == 1
    assert float(fake.module.weight) == weights_at[1]
    accuracy_stop = EarlyStopping(monitor="val_accuracy")
    assert accuracy_stop.mode == "max"


def test_model_checkpoint_formats_epoch_and_saves_best_only(tmp_path):
    x, y = blobs(40)
    model = Model(mlp()).configure("sgd", "cross_entropy", lr=0.05)
    every = ModelCheckpoint(tmp_path / "epoch{epoch:02d}.ckpt")
    weights = ModelCheckpoint(str(tmp_path / "w{epoch}-{loss:.3f}.ember"), save_weights_only=True)
    best = ModelCheckpoint(tmp_path / "best-{epoch}.ckpt", monitor="val_loss", save_best_only=True)
    values = iter([0.5, 0.7, 0.4])
    fake_val = LambdaCallback(on_epoch_end=lambda epoch, logs: logs.__setitem__("val_loss", next(values)))
    model.fit(x, y, epochs=3, batch_size=20, verbose=0, callbacks=[every, weights, best, fake_val])
    names = sorted(os.listdir(tmp_path))
    assert [n for n in names if n.startswith("epoch")] == ["epoch01.ckpt", "epoch02.ckpt", "epoch03.ckpt"]
    assert [n for n in names if n.startswith("best")] == ["best-1.ckpt", "best-3.ckpt"]
    assert len([n for n in names if n.startswith("w")]) == 3
    state = ember.load(tmp_path / [n for n in names if n.startswith("w3")][0])
    np.testing.assert_array_equal(to_np(state["0.weight"]), to_np(model.module.state_dict()["0.weight"]))
    checkpoint = load_checkpoint(tmp_path / "epoch02.ckpt")
    assert checkpoint["epochs_completed"] == 2 and len(checkpoint["history"]["history"]["loss"]) == 2


def test_learning_rate_scheduler_callback():
    x, y = blobs(20)
    for schedule, expected in [
        (lambda epoch: 0.1 / (epoch + 1), [0.1, 0.05, 0.1 / 3]),
        (lambda epoch, lr: lr * 0.5, [0.05, 0.025, 0.0125]),
    ]:
        model = Model(mlp()).configure("sgd", "cross_entropy", lr=0.1)
        history = model.fit(x, y, epochs=3, batch_size=10, verbose=0, callbacks=[LearningRateScheduler(schedule)])
        np.testing.assert_allclose(history.history["lr"], expected)
    net = mlp()
    opt = ember.optim.SGD(net.parameters(), lr=0.2)
    model = Model(net).configure(opt, "cross_entropy")
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    history = model.fit(x, y, epochs=4, batch_size=10, verbose=0, callbacks=[LearningRateScheduler(sched)])
    ref_opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.2)
    ref = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.1)
    expected = []
    for _ in range(4):
        expected.append(ref_opt.param_groups[0]["lr"])
        ref_opt.step()
        ref.step()
    np.testing.assert_allclose(history.history["lr"], expected)


def test_csv_logger_and_terminate_on_nan(tmp_path):
    x, y = blobs(20)
    model = Model(mlp()).configure("sgd", "cross_entropy", ["accuracy"], lr=0.01)
    history = model.fit(x, y, epochs=2, batch_size=10, verbose=0, callbacks=[CSVLogger(tmp_path / "log.csv")])
    with open(tmp_path / "log.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows] == ["0", "1"]
    np.testing.assert_allclose([float(r["loss"]) for r in rows], history.history["loss"])
    bad_x = x.copy()
    bad_x[0, 0] = np.nan
    history = Model(mlp()).configure("sgd", "cross_entropy").fit(bad_x, y, epochs=3, batch_size=10, shuffle=False,
                                                                 verbose=0, callbacks=[TerminateOnNaN()])
    assert len(history.history["loss"]) == 1


def _read_events(folder):
    """Every Event in a TensorBoard log folder, parsed from the TFRecord framing with tensorboardX's protos."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    events = []
    for path in Path(folder).rglob("events.out.tfevents.*"):
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            (length,) = struct.unpack_from("<Q", data, pos)
            payload = data[pos + 12:pos + 12 + length]
            pos += 12 + length + 4
            event = event_pb2.Event()
            event.ParseFromString(payload)
            events.append(event)
    return events


def test_tensorboard_writes_real_event_files(tmp_path):
    pytest.importorskip("tensorboardX")
    x, y = blobs(40)
    model = Model(mlp()).configure("sgd", "cross_entropy", ["accuracy"], lr=0.05)
    history = model.fit(x, y, epochs=2, batch_size=10, validation_data=(x, y), verbose=0,
                        callbacks=[TensorBoard(tmp_path / "tb", histogram_freq=1, update_freq="batch")])
    scalars: dict = {}
    histograms = set()
    for run in ("train", "validation"):  # Keras' layout: one run per split, the same tags in both
        for event in _read_events(tmp_path / "tb" / run):
            for value in event.summary.value:
                if value.HasField("histo"):
                    histograms.add((run, value.tag))
                else:
                    scalars.setdefault((run, value.tag), []).append((event.step, value.simple_value))
    np.testing.assert_allclose([v for _, v in sorted(scalars["train", "epoch_loss"])], history.history["loss"],
                               rtol=1e-6)
    np.testing.assert_allclose([v for _, v in sorted(scalars["validation", "epoch_accuracy"])],
                               history.history["val_accuracy"], rtol=1e-6)
    assert len(scalars["train", "batch_loss"]) == 8
    assert not any(tag.startswith("val") for _, tag in scalars)
    assert {("train", "weights/0.weight"), ("train", "weights/2.bias"), ("train", "grads/0.weight")} <= histograms


def test_progress_output(capsys):
    x, y = blobs(40)
    model = Model(mlp()).configure("sgd", "cross_entropy", ["accuracy"])
    model.fit(x, y, epochs=2, batch_size=10, verbose=2)
    out = capsys.readouterr().out
    assert out.count("samples/s") == 2 and "Epoch 2/2" in out and "accuracy:" in out
    pytest.importorskip("tqdm")
    model.fit(x, y, epochs=1, batch_size=10, verbose=1)
    err = capsys.readouterr().err
    assert "Epoch 1/1" in err and "samples/s" in err and "4/4" in err


def test_clear_errors():
    model = Model(mlp())
    with pytest.raises(RuntimeError, match="configure"):
        model.fit(*blobs(10))
    with pytest.raises(ValueError, match="unknown loss"):
        model.configure("sgd", "hinge-ish")
    with pytest.raises(ValueError, match="unknown optimizer"):
        model.configure("lbfgs-ish", "mse")
    model.configure("sgd", "cross_entropy")
    with pytest.raises(ValueError, match="need targets"):
        model.fit(np.zeros((4, 4), np.float32), epochs=1, verbose=0)


# ---- checkpoints and exact resume ---------------------------------------------------------------------------
def _experiment(seed):
    """Dropout + shuffling + Adam + a StepLR schedule + early stopping state: every kind of state."""
    net = mlp(seed, dropout=0.3)
    opt = ember.optim.Adam(net.parameters(), lr=0.01)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    model = Model(net).configure(opt, "cross_entropy", ["accuracy"])
    return model, [LearningRateScheduler(sched), EarlyStopping("val_loss", patience=10)]


def test_resume_is_bit_identical_to_uninterrupted_training(tmp_path):
    x, y = blobs(90)
    model, callbacks = _experiment(0)
    straight = model.fit(x, y, epochs=2, batch_size=16, validation_split=0.2, verbose=0,
                         callbacks=[*callbacks, ModelCheckpoint(tmp_path / "e{epoch}.ckpt")])
    expected = {k: to_np(v).copy() for k, v in model.module.state_dict().items()}

    # A "fresh process": other weights, other RNG states everywhere, new optimizer and schedulers.
    import random

    random.seed(99)
    np.random.seed(99)
    resumed, callbacks = _experiment(seed=12345)
    ember.rand(17)
    history = resumed.fit(x, y, epochs=2, batch_size=16, validation_split=0.2, verbose=0,
                          callbacks=callbacks, resume_from=tmp_path / "e1.ckpt")
    for key, value in resumed.module.state_dict().items():
        np.testing.assert_array_equal(to_np(value), expected[key], err_msg=key)
    assert history.history == straight.history
    assert resumed.optimizer.param_groups[0]["lr"] == model.optimizer.param_groups[0]["lr"]


RESUME_SCRIPT = r"""
import numpy as np, ember, ember.optim
from ember import nn
from ember.train import EarlyStopping, LearningRateScheduler, Model
{helpers}
x, y = blobs(90)
model, callbacks = _experiment(seed=777)
model.fit(x, y, epochs=2, batch_size=16, validation_split=0.2, verbose=0, callbacks=callbacks,
          resume_from={ckpt!r})
ember.save(model.module.state_dict(), {out!r})
"""


def test_resume_in_a_fresh_process(tmp_path):
    x, y = blobs(90)
    model, callbacks = _experiment(0)
    model.fit(x, y, epochs=2, batch_size=16, validation_split=0.2, verbose=0,
              callbacks=[*callbacks, ModelCheckpoint(tmp_path / "e{epoch}.ckpt")])
    import inspect

    helpers = "\n".join(inspect.getsource(f) for f in (blobs, mlp, _experiment))  # no torch in the child
    script = RESUME_SCRIPT.format(helpers=helpers, ckpt=str(tmp_path / "e1.ckpt"), out=str(tmp_path / "resumed.ember"))
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=120)
    resumed = ember.load(tmp_path / "resumed.ember")
    for key, value in model.module.state_dict().items():
        np.testing.assert_array_equal(to_np(resumed[key]), to_np(value), err_msg=key)


def test_checkpoint_functions_restore_rng_and_optimizer(tmp_path):
    import random

    net = mlp()
    opt = ember.optim.Adam(net.parameters(), lr=0.01)
    net(ember.randn(2, 4)).sum().backward()
    opt.step()
    gen = ember.Generator().manual_seed(5)
    path = save_checkpoint(tmp_path / "c.ckpt", net, opt, epochs_completed=4, generators={"loader": gen})
    expected = (to_np(ember.rand(3)).copy(), random.random(), np.random.rand(), to_np(ember.rand(2, generator=gen)))
    other = mlp(seed=3)
    other_opt = ember.optim.Adam(other.parameters(), lr=0.5)
    checkpoint = load_checkpoint(path, other, other_opt, generators={"loader": gen})
    got = (to_np(ember.rand(3)), random.random(), np.random.rand(), to_np(ember.rand(2, generator=gen)))
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[1] == expected[1] and got[2] == expected[2]
    np.testing.assert_array_equal(got[3], expected[3])
    assert checkpoint["epochs_completed"] == 4 and other_opt.param_groups[0]["lr"] == 0.01
    for a, b in zip(net.parameters(), other.parameters()):
        np.testing.assert_array_equal(to_np(a), to_np(b))
    with pytest.raises(ValueError, match="not an ember training checkpoint"):
        ember.save({"w": ember.ones(1)}, tmp_path / "plain.ember")
        load_checkpoint(tmp_path / "plain.ember")


# ---- the MNIST job ---------------------------------------------------------------------------------------------
def test_mnist_run_smoke(tmp_path):
    from ember.train import mnist

    result = mnist.run(epochs=1, limit=128, run_dir=tmp_path / "run", verbose=0, batch_size=64)
    assert 0.0 <= result["test_accuracy"] <= 1.0 and np.isfinite(result["test_loss"])
    assert Path(result["checkpoint"]).is_file()
    assert list(Path(result["tensorboard"]).glob("*/events.out.tfevents.*"))  # the train and validation runs
    assert load_checkpoint(result["checkpoint"], restore_rng=False)["epochs_completed"] == 1


@pytest.mark.slow
def test_mnist_carried_subset_reaches_97_percent(tmp_path):
    from ember.train import mnist

    result = mnist.run(run_dir=tmp_path / "run", verbose=0)
    assert result["test_accuracy"] >= 0.97


@pytest.mark.slow
def test_full_mnist_reaches_99_percent(tmp_path):
    data = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "mnist"
    if not (data / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip("full MNIST is not beside this checkout (../shared/data/mnist)")
    from ember.train import mnist

    result = mnist.run(data_dir=data, run_dir=tmp_path / "run", verbose=0)
    assert result["test_accuracy"] >= 0.99
