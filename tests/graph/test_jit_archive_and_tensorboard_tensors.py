"""ember.jit.save/load through file objects and single archive files (as torch.jit.save takes them), hostile
archives refused; SummaryWriter's add_* methods take ember tensors (read back with TensorBoard's own reader)."""
import io
import os
import zipfile

import numpy as np
import pytest

import ember


def test_jit_save_to_buffer_and_file_roundtrip(tmp_path) -> None:
    model = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.ReLU())
    x = ember.randn(2, 3)
    traced = ember.jit.trace(model, x)
    buffer = io.BytesIO()
    ember.jit.save(traced, buffer)
    buffer.seek(0)
    np.testing.assert_allclose(ember.jit.load(buffer)(x).numpy(), model(x).detach().numpy(), rtol=1e-6)
    path = tmp_path / "model.pt"
    with open(path, "wb") as f:
        ember.jit.save(traced, f)
    assert path.is_file() and zipfile.is_zipfile(path)
    np.testing.assert_allclose(ember.jit.load(str(path))(x).numpy(), model(x).detach().numpy(), rtol=1e-6)
    ember.jit.save(traced, str(tmp_path / "as_directory"))  # a path keeps ember's directory format
    assert os.path.isdir(tmp_path / "as_directory")


@pytest.mark.parametrize("member", ["../escape.json", "sub/graph.json", "/abs.json"])
def test_hostile_archives_are_refused(tmp_path, member: str) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(member, "{}")
    buffer.seek(0)
    with pytest.raises(ValueError, match="refusing archive member"):
        ember.jit.load(buffer)
    assert not (tmp_path.parent / "escape.json").exists()


def test_non_archive_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not a readable archive of ember.jit.save or torch.jit.save"):
        ember.jit.load(io.BytesIO(b"not a zip"))


def test_summary_writer_takes_ember_tensors(tmp_path) -> None:
    pytest.importorskip("tensorboardX")
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from ember.utils.tensorboard import SummaryWriter

    with SummaryWriter(str(tmp_path)) as writer:
        writer.add_scalar("loss", ember.tensor(0.25), 0)
        writer.add_scalars("pair", {"a": ember.tensor(1.0), "b": 2.0}, 0)
        writer.add_histogram("weights", ember.arange(10.0, dtype=ember.bfloat16), 0)
        writer.add_image("image", ember.rand(3, 4, 4), 0)
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert acc.Scalars("loss")[0].value == pytest.approx(0.25)
    assert acc.Histograms("weights")[0].histogram_value.num == 10
    assert len(acc.Images("image")) == 1
