"""Real PyTorch checkpoints (torch.save of torchvision models) through ember.hub and weights=, as a user
with published .pth files would load them."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision, randomize_  # noqa: E402

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402
from ember import hub  # noqa: E402


def _torch_files_readable(tmp_path: Path) -> bool:
    probe = tmp_path / "probe.pth"
    torch.save({"x": torch.zeros(2)}, probe)
    try:
        ember.load(probe)
    except ValueError as error:  # an ember.load without PyTorch's zip format says so
        if "torch.save" in str(error) or "pickle" in str(error):
            return False
        raise
    return True


@pytest.fixture()
def torch_files(tmp_path: Path) -> None:
    if not _torch_files_readable(tmp_path):
        pytest.skip("this ember.load does not read PyTorch's .pth format yet")


def _published(folder: Path, stem: str, state: dict) -> Path:
    """torch.save ``state`` as torchvision names its files: ``stem-<first 8 hex of sha256>.pth``."""
    tmp = folder / "tmp.pth"
    torch.save(state, tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()[:8]
    path = folder / f"{stem}-{digest}.pth"
    tmp.rename(path)
    return path


def test_torch_saved_torchvision_checkpoint_via_file_url(torch_files, tmp_path: Path) -> None:
    tv = import_torchvision()
    torch.manual_seed(0)
    reference = randomize_(tv.models.mobilenet_v3_small()).eval()
    path = _published(tmp_path, "mobilenet_v3_small", reference.state_dict())
    state = hub.load_state_dict_from_url(path.as_uri(), model_dir=str(tmp_path / "cache"), check_hash=True,
                                         progress=False)
    model = ev.models.mobilenet_v3_small().eval()
    model.load_state_dict(state, strict=True)
    x = np.random.default_rng(0).standard_normal((1, 3, 64, 64)).astype(np.float32)
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(model(ember.from_numpy(x)).detach().numpy(), expected, atol=1e-4)


def test_weights_argument_reads_a_torch_checkpoint_from_the_cache(torch_files, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    tv = import_torchvision()
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    weights = ev.models.ResNet18_Weights.IMAGENET1K_V1
    torch.manual_seed(1)
    reference = randomize_(tv.models.resnet18()).eval()
    cache = tmp_path / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    torch.save(reference.state_dict(), cache / os.path.basename(weights.url))  # as torch.hub would leave it
    model = ev.models.resnet18(weights=weights).eval()
    image = np.random.default_rng(2).integers(0, 256, (240, 260, 3), dtype=np.uint8)
    batch = weights.transforms()(image).unsqueeze(0)
    with torch.no_grad():
        expected = reference(torch.from_numpy(batch.numpy())).numpy()
    np.testing.assert_allclose(model(batch).detach().numpy(), expected, atol=1e-4)
