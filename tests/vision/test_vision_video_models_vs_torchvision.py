"""torchvision's video classifiers (r3d_18, mc3_18, r2plus1d_18, s3d) against ember's: the same state_dict keys and
shapes, strict loading, the same eval outputs (float32), and from the same state in float64 the same training-mode
outputs, batch-norm statistics after the step and parameter gradients. Weights and statistics are randomized so
outputs are O(1) and eval differs from train."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision, state_dict_to_numpy  # noqa: E402
from torchvision_ref import one_torch_thread  # noqa: E402,F401 (an autouse fixture)

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402

try:
    tv = import_torchvision()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


def _randomize(model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv3d, torch.nn.Linear)):
                bound = 1.7 / m.weight[0].numel() ** 0.5
                m.weight.copy_((torch.rand(m.weight.shape, generator=gen) * 2 - 1) * bound)
                if m.bias is not None:
                    m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * 0.1)
            elif isinstance(m, torch.nn.BatchNorm3d):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.copy_((torch.rand(m.bias.shape, generator=gen) * 2 - 1) * 0.2)
                m.running_mean.copy_((torch.rand(m.running_mean.shape, generator=gen) * 2 - 1) * 0.2)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) * 1.5 + 0.5)
            elif isinstance(m, torch.nn.Dropout):
                m.p = 0.0
    return model


def _close(ours, theirs, what, tol):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, what
    scale = max(1.0, float(np.abs(theirs).max()))
    err = float(np.abs(ours - theirs).max())
    assert err <= tol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


def _ember_state(state, dtype=None):
    return OrderedDict((k, ember.from_numpy(v.astype(dtype) if dtype is not None and v.dtype.kind == "f" else v))
                       for k, v in state.items())


def _compare(reference, model, shape, small_pool=False):
    if small_pool:  # S3D's 2x7x7 average pool needs 224x224 clips; a global pool tests the rest at toy sizes
        reference.avgpool, model.avgpool = torch.nn.AdaptiveAvgPool3d(1), ember.nn.AdaptiveAvgPool3d(1)
    _randomize(reference)
    for m in model.modules():
        if type(m).__name__ == "Dropout":
            m.p = 0.0
    theirs = reference.state_dict()
    assert [(k, tuple(v.shape)) for k, v in model.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in theirs.items()]
    initial = state_dict_to_numpy(reference)
    model.load_state_dict(_ember_state(initial), strict=True)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    reference.eval(), model.eval()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    assert np.abs(expected).max() > 0.1
    _close(model(ember.from_numpy(x)).detach().numpy(), expected, "eval output", 1e-4)

    reference.double().train(), model.double().train()
    reference.load_state_dict({k: torch.from_numpy(v.astype(np.float64) if v.dtype.kind == "f" else v)
                               for k, v in initial.items()})
    model.load_state_dict(_ember_state(initial, np.float64))
    expected = reference(torch.from_numpy(x.astype(np.float64)))
    got = model(ember.from_numpy(x.astype(np.float64)))
    _close(got.detach().numpy(), expected.detach().numpy(), "train output (float64)", 1e-9)
    ours_buffers = dict(model.named_buffers())
    for key, b in reference.named_buffers():
        if b.dtype.is_floating_point:
            _close(ours_buffers[key].numpy(), b.numpy(), f"buffer {key}", 1e-9)
    w = np.random.default_rng(2).standard_normal(tuple(expected.shape))
    (expected * torch.from_numpy(w)).sum().backward()
    (got * ember.from_numpy(w)).sum().backward()
    ours = dict(model.named_parameters())
    for key, p in reference.named_parameters():
        _close(ours[key].grad.numpy(), p.grad.numpy(), f"grad of {key}", 1e-7)


# r3d_18 is in the slow set: mc3_18 runs the same stem and Conv3DSimple blocks (its layer1) beside its
# Conv3DNoTemporal ones, and r2plus1d_18 the (2+1)D ones, so the default run keeps every block kind.
@pytest.mark.parametrize("name", [pytest.param("r3d_18", marks=pytest.mark.slow), "mc3_18", "r2plus1d_18"])
def test_video_resnets_match_torchvision(name):
    torch.manual_seed(0)
    reference = getattr(tv.models.video, name)(num_classes=7)
    model = getattr(ev.models.video, name)(num_classes=7)
    assert [n for n, _ in model.named_modules()] == [n for n, _ in reference.named_modules()]
    _compare(reference, model, (2, 3, 4, 32, 32))


def test_s3d_matches_torchvision_at_toy_size():
    torch.manual_seed(0)
    _compare(tv.models.video.s3d(num_classes=7), ev.models.video.s3d(num_classes=7), (2, 3, 8, 64, 64),
             small_pool=True)


@pytest.mark.slow
def test_s3d_matches_torchvision_at_full_size():
    torch.manual_seed(0)
    _compare(tv.models.video.s3d(num_classes=7), ev.models.video.s3d(num_classes=7), (1, 3, 14, 224, 224))


def test_video_weights_match_torchvision():
    assert ev.models.list_models(module=ev.models.video) == tv.models.list_models(module=tv.models.video)
    clip = np.random.default_rng(3).integers(0, 256, (2, 3, 20, 30), dtype=np.uint8)
    for name in ("r3d_18", "mc3_18", "r2plus1d_18", "s3d"):
        ours, theirs = ev.models.get_model_weights(name), tv.models.get_model_weights(name)
        assert list(ours.__members__) == list(theirs.__members__)
        for member in theirs:
            mine = ours[member.name]
            assert mine.url == member.url
            assert mine.meta["categories"] == list(member.meta["categories"]) and len(mine.meta["categories"]) == 400
            assert {k: v for k, v in mine.meta.items() if k != "categories"} == \
                {k: (list(v) if isinstance(v, tuple) else v) for k, v in member.meta.items() if k != "categories"}
            got = mine.transforms()(ember.from_numpy(clip)).numpy()
            expected = member.transforms()(torch.from_numpy(clip)).numpy()
            assert got.shape == expected.shape
            # uint8 frames: torch resizes in fixed point and rounds between the passes, ember rounds once: at most one
            # grey level apart (docs/vision.md), i.e. 1/255/std after normalizing
            grey = 1 / 255 / min(member.transforms().std)
            assert np.abs(got - expected).max() <= grey + 1e-5 and np.abs(got - expected).mean() < 0.05 * grey
            floats = clip.astype(np.float32) / 255
            np.testing.assert_allclose(mine.transforms()(ember.from_numpy(floats)).numpy(),
                                       member.transforms()(torch.from_numpy(floats)).numpy(), atol=2e-5)
        with ember.device("meta"):  # the count needs shapes only: no 33M-parameter random init per model
            model = getattr(ev.models.video, name)()
        assert sum(p.numel() for p in model.parameters()) == ours.DEFAULT.meta["num_params"]
