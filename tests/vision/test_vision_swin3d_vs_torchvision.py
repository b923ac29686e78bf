"""Video Swin (``models.video.swin3d_t/s/b``) against real torchvision 0.28 on the same random weights: keys in
torchvision's order, strict loading, eval logits in float32 (clips that need padding and shrunken windows), training
outputs and every gradient in float64, a ``torch.save``d checkpoint through ``weights=`` with the Kinetics preset."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision, randomize_, state_dict_to_numpy  # noqa: E402
from torchvision_ref import one_torch_thread  # noqa: E402,F401 (an autouse fixture)

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402
from ember import hub  # noqa: E402

try:
    tv = import_torchvision()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


# a small SwinTransformer3d for the default run (the full-size builders cost seconds of random init each)
SMALL = dict(patch_size=[2, 4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 3, 3],
             num_classes=7)


def _pair(name: str = "small", dtype=None):
    torch.manual_seed(0)
    if name == "small":
        reference = randomize_(tv.models.video.swin_transformer.SwinTransformer3d(**SMALL))
        model = ev.models.video.swin_transformer.SwinTransformer3d(**SMALL)
    else:
        reference = randomize_(getattr(tv.models.video, name)(num_classes=7))
        model = getattr(ev.models.video, name)(num_classes=7)
    assert list(model.state_dict()) == list(reference.state_dict())
    if dtype is not None:
        reference = reference.to(dtype)
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()}, strict=True)
    return reference, model


def _close(ours, theirs, what: str, tol: float) -> None:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, what
    err = float(np.abs(ours - theirs).max())
    assert err <= tol * max(1.0, float(np.abs(theirs).max())), f"{what}: max abs difference {err:.3g}"


# (2, 3, 4, 32, 32): time shorter than its window (the window shrinks, no shift in time), H/W padded to whole
# windows; (1, 3, 18, 60, 44): padding to whole 2x4x4 patches, shifted windows with their region masks on every
# axis, odd maps at the patch merging
@pytest.mark.parametrize("shape", [(2, 3, 4, 32, 32), (1, 3, 18, 60, 44)])
def test_eval_logits_match_torchvision(shape: tuple) -> None:
    reference, model = _pair()
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, f"small Swin3D {shape}", 1e-5)


def test_training_outputs_and_gradients_match_torchvision_in_float64() -> None:
    """Stochastic depth off (its draws are each library's own; dropout is 0 in these models): outputs within 1e-12,
    every parameter gradient within 1e-9 of its array's largest."""
    reference, model = _pair(dtype=torch.float64)
    model.double().train(), reference.train()
    for net in (model, reference):  # the builders fix stochastic_depth_prob=0.1 (a keyword is refused, as there)
        for m in net.modules():
            if type(m).__name__ == "StochasticDepth":
                m.p = 0.0
    x = np.random.default_rng(2).standard_normal((1, 3, 18, 60, 44))
    weight = np.random.default_rng(3).standard_normal((1, 7))
    out = reference(torch.from_numpy(x))
    (out * torch.from_numpy(weight)).sum().backward()
    ours = model(ember.from_numpy(x))
    _close(ours.detach().numpy(), out.detach().numpy(), "train output", 1e-12)
    (ours * ember.from_numpy(weight)).sum().backward()
    theirs = dict(reference.named_parameters())
    for key, param in model.named_parameters():
        expected = theirs[key].grad.numpy()
        scale = max(float(np.abs(expected).max()), 1e-12)
        err = float(np.abs(param.grad.numpy() - expected).max())
        assert err <= 1e-9 * scale, f"{key}: gradient differs by {err:.3g} (scale {scale:.3g})"


@pytest.mark.slow
def test_weights_load_a_torch_checkpoint_from_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """swin3d_t's Kinetics-400 entry: a torchvision model ``torch.save``d under the URL's file name in the hub
    cache; ``weights=`` loads it strictly (400 classes) and the preset matches torchvision's on a uint8 clip."""
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    weights, theirs = ev.models.video.Swin3D_T_Weights.DEFAULT, tv.models.video.Swin3D_T_Weights.DEFAULT
    assert weights.url == theirs.url and weights.meta["categories"] == list(theirs.meta["categories"])
    torch.manual_seed(4)
    reference = randomize_(tv.models.video.swin3d_t()).eval()
    cache = tmp_path / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    torch.save(reference.state_dict(), cache / os.path.basename(weights.url))
    with pytest.raises(ValueError, match="num_classes"):
        ev.models.video.swin3d_t(weights=weights, num_classes=10)
    model = ev.models.video.swin3d_t(weights=weights).eval()
    clip = np.random.default_rng(5).integers(0, 256, (4, 3, 40, 48), dtype=np.uint8)  # (T, C, H, W)
    ours, expected = weights.transforms()(ember.from_numpy(clip)), theirs.transforms()(torch.from_numpy(clip))
    assert tuple(ours.shape) == tuple(expected.shape) == (3, 4, 224, 224)
    # uint8 resizing rounds once in ember, twice in torch: within one grey level, i.e. 1 / (255 * std) normalized
    assert float(np.abs(ours.numpy() - expected.numpy()).max()) <= 1.001 / (255 * min(weights.transforms().std))
    batch = expected.unsqueeze(0)  # the same input in both, so the logits compare the models only
    with torch.no_grad():
        logits = reference(batch).numpy()
    _close(model(ember.from_numpy(batch.numpy())).detach().numpy(), logits, "pretrained logits", 1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["swin3d_t", "swin3d_s", "swin3d_b"])
def test_larger_variants_match_torchvision(name: str) -> None:
    reference, model = _pair(name)
    x = np.random.default_rng(6).standard_normal((1, 3, 18, 60, 44)).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, name, 1e-5)
