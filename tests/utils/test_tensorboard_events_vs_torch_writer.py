"""ember's SummaryWriter against torch.utils.tensorboard's, both read back by TensorBoard's own EventAccumulator
(formats21): the same calls must give the same scalars, histograms, images, text, audio and hparams, and a graph.

Found: add_audio raised ModuleNotFoundError (tensorboardX's encoder needs soundfile; torch's writer encodes the WAV
with the standard library, as ember's now does).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import ember
import ember.nn as nn

pytest.importorskip("tensorboardX")
accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
torch = pytest.importorskip("torch")
pytest.importorskip("torch.utils.tensorboard")


def _write(lib, folder, data: dict) -> None:
    if lib == "torch":
        from torch.utils.tensorboard import SummaryWriter
        t = torch.from_numpy
    else:
        from ember.utils.tensorboard import SummaryWriter
        t = ember.from_numpy
    with SummaryWriter(str(folder)) as w:
        for step, value in enumerate(data["losses"]):
            w.add_scalar("loss", t(np.array(value, np.float32)), step)
        w.add_scalar("lr", 0.125, 0)
        w.add_histogram("weights", t(data["weights"]), 3)
        w.add_image("image", t(data["image"]), 1)
        w.add_images("batch", t(data["batch"]), 1)
        w.add_image("hwc", t(data["image"].transpose(1, 2, 0).copy()), 2, dataformats="HWC")
        w.add_text("note", "hello *world*", 0)
        w.add_audio("clip", t(data["clip"]), 0, sample_rate=8000)
        w.add_hparams({"lr": 0.1, "batch": 32, "opt": "adam"}, {"hparam/accuracy": 0.75}, run_name="hp")
        if lib == "torch":
            w.add_graph(torch.nn.Linear(4, 2), torch.zeros(1, 4))
        else:
            w.add_graph(nn.Linear(4, 2), ember.zeros(1, 4))


def _read(folder) -> accumulator.EventAccumulator:
    acc = accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0, "images": 0, "histograms": 0,
                                                                   "tensors": 0, "audio": 0})
    acc.Reload()
    return acc


def test_same_calls_give_the_same_events_as_torchs_writer(tmp_path) -> None:
    rng = np.random.default_rng(0)
    data = {"losses": [1.5, 0.75, 0.25], "weights": rng.standard_normal(500).astype(np.float32),
            "image": rng.random((3, 6, 5)).astype(np.float32), "batch": rng.random((2, 3, 4, 4)).astype(np.float32),
            "clip": (rng.random(400) * 2 - 1).astype(np.float32)}
    _write("torch", tmp_path / "torch", data)
    _write("ember", tmp_path / "ember", data)
    ours, theirs = _read(tmp_path / "ember"), _read(tmp_path / "torch")
    for kind in ("scalars", "histograms", "images", "audio", "tensors"):
        assert sorted(ours.Tags()[kind]) == sorted(theirs.Tags()[kind]), kind
    assert ours.Tags()["graph"] and theirs.Tags()["graph"]
    for tag in ("loss", "lr"):
        assert [(e.step, e.value) for e in ours.Scalars(tag)] == [(e.step, e.value) for e in theirs.Scalars(tag)]
    (h1,), (h2,) = ours.Histograms("weights"), theirs.Histograms("weights")
    assert h1.step == h2.step == 3
    a, b = h1.histogram_value, h2.histogram_value
    assert (a.min, a.max, a.num) == (b.min, b.max, b.num)
    assert a.sum == pytest.approx(b.sum, rel=1e-6) and a.sum_squares == pytest.approx(b.sum_squares, rel=1e-6)
    assert list(a.bucket_limit) == list(b.bucket_limit) and list(a.bucket) == list(b.bucket)
    for tag in ("image", "batch", "hwc"):
        (i1,), (i2,) = ours.Images(tag), theirs.Images(tag)
        assert (i1.step, i1.width, i1.height) == (i2.step, i2.width, i2.height), tag
        assert _pixels(i1.encoded_image_string) == _pixels(i2.encoded_image_string), tag
    (s1,), (s2,) = ours.Audio("clip"), theirs.Audio("clip")
    assert s1.encoded_audio_string == s2.encoded_audio_string and s1.sample_rate == s2.sample_rate == 8000
    assert ours.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"hello *world*"]
    assert theirs.Tensors("note/text_summary")[0].tensor_proto.string_val == [b"hello *world*"]
    hp_ours = _read(tmp_path / "ember" / "hp").Scalars("hparam/accuracy")
    hp_theirs = _read(tmp_path / "torch" / "hp").Scalars("hparam/accuracy")
    assert [e.value for e in hp_ours] == [e.value for e in hp_theirs] == [0.75]
    names = {n.name for n in ours.Graph().node}
    assert any("Linear" in n or "linear" in n for n in names), names


def _pixels(encoded: bytes) -> list:
    from PIL import Image
    import io

    return np.asarray(Image.open(io.BytesIO(encoded))).tolist()


def test_audio_needs_no_soundfile_and_clips_like_torch(tmp_path, capsys) -> None:
    from ember.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path)) as w:
        w.add_audio("loud", ember.tensor([[0.0, 2.0, -3.0, 0.5]]), 1, sample_rate=100)
    assert "auto clipped" in capsys.readouterr().out
    (clip,) = _read(tmp_path).Audio("loud")
    import io
    import wave

    with wave.open(io.BytesIO(clip.encoded_audio_string)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 100)
        assert np.frombuffer(wav.readframes(4), "<i2").tolist() == [0, 32767, -32767, 16383]
    assert os.listdir(tmp_path)


def test_pr_curves_and_embeddings_match_torchs_writer(tmp_path) -> None:
    from tensorboard.util import tensor_util

    rng = np.random.default_rng(1)
    labels, preds = rng.integers(0, 2, 40), rng.random(40).astype(np.float32)
    points = rng.standard_normal((5, 3)).astype(np.float32)
    for lib in ("torch", "ember"):
        if lib == "torch":
            from torch.utils.tensorboard import SummaryWriter
            t = torch.from_numpy
        else:
            from ember.utils.tensorboard import SummaryWriter
            t = ember.from_numpy
        with SummaryWriter(str(tmp_path / lib)) as w:
            w.add_pr_curve("pr", t(labels), t(preds), 2)
            w.add_embedding(t(points), metadata=list("abcde"), global_step=1, tag="emb")
    curves = [tensor_util.make_ndarray(_read(tmp_path / lib).Tensors("pr")[0].tensor_proto) for lib in ("torch", "ember")]
    assert curves[0].shape == curves[1].shape == (6, 127)
    np.testing.assert_allclose(curves[1], curves[0], rtol=1e-6)
    for name in ("tensors.tsv", "metadata.tsv"):
        theirs = (tmp_path / "torch" / "00001" / "emb" / name).read_text()
        assert (tmp_path / "ember" / "00001" / "emb" / name).read_text() == theirs, name


def test_hparams_plugin_data_parses_like_torchs(tmp_path) -> None:
    """TensorBoard's hparams plugin reads the experiment and session records: same names, metrics and values."""
    from tensorboard.plugins.hparams import metadata

    sessions = {}
    for lib in ("torch", "ember"):
        if lib == "torch":
            from torch.utils.tensorboard import SummaryWriter
        else:
            from ember.utils.tensorboard import SummaryWriter
        with SummaryWriter(str(tmp_path / lib)) as w:
            w.add_hparams({"lr": 0.1, "bs": 32, "opt": "adam"}, {"hparam/acc": 0.9}, run_name="r")
        content = _read(tmp_path / lib / "r").PluginTagToContent(metadata.PLUGIN_NAME)
        experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
        start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
        sessions[lib] = ([h.name for h in experiment.hparam_infos], [m.name.tag for m in experiment.metric_infos],
                         {k: getattr(v, v.WhichOneof("kind")) for k, v in start.hparams.items()})
    assert sessions["ember"] == sessions["torch"]
    assert sessions["ember"][2] == {"lr": 0.1, "bs": 32, "opt": "adam"}
