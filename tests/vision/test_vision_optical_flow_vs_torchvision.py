"""RAFT (``models.optical_flow``) against real torchvision 0.28 on the same random weights: state_dict keys in
torchvision's order, strict loading of a ``torch.save``d checkpoint through the hub cache and ``weights=``, every
flow prediction in float32 (eval and train mode), every parameter gradient in float64, the ``OpticalFlow`` preset
and the sampling helpers."""
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


def _pair(name: str, seed: int = 0, dtype=None):
    torch.manual_seed(seed)
    reference = randomize_(getattr(tv.models.optical_flow, name)())
    model = getattr(ev.models.optical_flow, name)()
    assert list(model.state_dict()) == list(reference.state_dict())
    if dtype is not None:
        reference = reference.to(dtype)
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()}, strict=True)
    return reference, model


def _images(shape, seed: int, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, shape).astype(dtype), rng.uniform(-1, 1, shape).astype(dtype)


def _compare(model, reference, a, b, updates: int, tol: float) -> None:
    with torch.no_grad():
        expected = reference(torch.from_numpy(a), torch.from_numpy(b), num_flow_updates=updates)
    got = model(ember.from_numpy(a), ember.from_numpy(b), num_flow_updates=updates)
    assert isinstance(got, list) and len(got) == len(expected) == updates
    for step, (ours, theirs) in enumerate(zip(got, expected)):
        theirs = theirs.numpy()
        assert tuple(ours.shape) == theirs.shape
        err = float(np.abs(ours.detach().numpy() - theirs).max())
        assert err <= tol * max(1.0, float(np.abs(theirs).max())), f"update {step}: max abs difference {err:.3g}"


@pytest.mark.parametrize("mode", ["eval", "train"])
def test_raft_large_flows_match_torchvision(mode: str) -> None:
    """Residual encoders (instance norm; batch norm in the context encoder, so train mode differs), the
    separable ConvGRU pair and the learned convex upsampling, on a non-square 128x136 pair."""
    reference, model = _pair("raft_large")
    getattr(reference, mode)(), getattr(model, mode)()
    _compare(model, reference, *_images((1, 3, 128, 136), seed=1), updates=2, tol=2e-5)


def test_raft_small_flows_match_torchvision() -> None:
    """Bottleneck encoders, radius-3 look-up, one ConvGRU, bilinear upsampling; batch 2."""
    reference, model = _pair("raft_small")
    _compare(model.eval(), reference.eval(), *_images((2, 3, 128, 128), seed=2), updates=3, tol=2e-5)


def _float64_torchvision(monkeypatch: pytest.MonkeyPatch) -> None:
    """torchvision's RAFT is float32-only (float32 coordinate grids and look-up offsets); with float64 grids and
    offsets the same code runs in float64, which ember's RAFT does as given (it takes the features' dtype)."""
    raft = __import__("torchvision.models.optical_flow.raft", fromlist=["raft"])
    grid = raft.make_coords_grid
    monkeypatch.setattr(raft, "make_coords_grid", lambda *args, **kwargs: grid(*args, **kwargs).double())
    linspace = torch.linspace
    monkeypatch.setattr(raft.torch, "linspace",
                        lambda *args, **kwargs: linspace(*args, **{"dtype": torch.float64, **kwargs}))


@pytest.mark.parametrize("name", ["raft_small", pytest.param("raft_large", marks=pytest.mark.slow)])
def test_gradients_match_torchvision_in_float64(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every parameter gradient of a fixed projection of two updates' predictions, train mode, float64 (in
    float32 the instance norms' backward cancels: the stem's gradients then differ by ~2% between the two
    libraries, and between torch and its own float64 run)."""
    _float64_torchvision(monkeypatch)
    reference, model = _pair(name, dtype=torch.float64)
    model.double().train(), reference.train()
    a, b = _images((1, 3, 128, 128), seed=3, dtype=np.float64)
    weights = [np.random.default_rng(10 + i).standard_normal((1, 2, 128, 128)) for i in range(2)]
    flows = reference(torch.from_numpy(a), torch.from_numpy(b), num_flow_updates=2)
    sum((f * torch.from_numpy(w)).sum() for f, w in zip(flows, weights)).backward()
    ours = model(ember.from_numpy(a), ember.from_numpy(b), num_flow_updates=2)
    assert ours[-1].dtype == ember.float64
    sum((f * ember.from_numpy(w)).sum() for f, w in zip(ours, weights)).backward()
    theirs = dict(reference.named_parameters())
    largest = max(float(p.grad.abs().max()) for p in theirs.values())
    for key, param in model.named_parameters():
        expected = theirs[key].grad.numpy()
        # floor: a conv bias before an instance norm has a mathematically zero gradient (rounding noise)
        scale = max(float(np.abs(expected).max()), 1e-6 * largest)
        err = float(np.abs(param.grad.numpy() - expected).max())
        assert err <= 1e-9 * scale, f"{key}: gradient differs by {err:.3g} (scale {scale:.3g})"


def test_weights_load_a_torch_checkpoint_from_the_cache_with_the_preset(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A torchvision RAFT ``torch.save``d where torch.hub would leave it; ``weights=`` reads it strictly, and the
    ``OpticalFlow`` preset turns uint8 frames into what torchvision's preset gives."""
    monkeypatch.setattr(hub, "_hub_dir", None)
    monkeypatch.setenv("EMBER_HOME", str(tmp_path))
    weights = ev.models.optical_flow.Raft_Small_Weights.DEFAULT
    theirs_weights = tv.models.optical_flow.Raft_Small_Weights.DEFAULT
    assert weights.url == theirs_weights.url and weights.name == theirs_weights.name == "C_T_V2"
    torch.manual_seed(4)
    reference = randomize_(tv.models.optical_flow.raft_small()).eval()
    cache = tmp_path / "hub" / "checkpoints"
    cache.mkdir(parents=True)
    torch.save(reference.state_dict(), cache / os.path.basename(weights.url))
    model = ev.models.get_model("raft_small", weights="DEFAULT").eval()
    rng = np.random.default_rng(5)
    frames = [rng.integers(0, 256, (2, 3, 128, 128), dtype=np.uint8) for _ in range(2)]
    ours = weights.transforms()(*(ember.from_numpy(f) for f in frames))
    expected = theirs_weights.transforms()(*(torch.from_numpy(f) for f in frames))
    for o, e in zip(ours, expected):
        assert o.dtype == ember.float32
        np.testing.assert_array_equal(o.numpy(), e.numpy())
    with torch.no_grad():
        flows = reference(*expected, num_flow_updates=2)
    got = model(*ours, num_flow_updates=2)
    np.testing.assert_allclose(got[-1].detach().numpy(), flows[-1].numpy(), atol=2e-5 * float(flows[-1].abs().max()))


def test_preset_reads_pil_images_like_torchvision() -> None:
    from PIL import Image

    rng = np.random.default_rng(6)
    images = [Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(2)]
    ours = ev.models.optical_flow.Raft_Large_Weights.DEFAULT.transforms()(*images)
    theirs = tv.models.optical_flow.Raft_Large_Weights.DEFAULT.transforms()(*images)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(o.numpy(), t.numpy())
    assert repr(ev.models.optical_flow.Raft_Large_Weights.DEFAULT.transforms()) == "OpticalFlow()"


def test_helpers_match_torchvision() -> None:
    from torchvision.models.optical_flow import _utils as theirs

    from ember.vision.models.optical_flow import _utils as ours

    np.testing.assert_array_equal(ours.make_coords_grid(2, 3, 4).numpy(), theirs.make_coords_grid(2, 3, 4).numpy())
    rng = np.random.default_rng(7)
    flow = rng.standard_normal((2, 2, 3, 5)).astype(np.float32)
    mask = rng.standard_normal((2, 8 * 8 * 9, 3, 5)).astype(np.float32)
    for m in (None, mask):
        expected = theirs.upsample_flow(torch.from_numpy(flow), None if m is None else torch.from_numpy(m)).numpy()
        got = ours.upsample_flow(ember.from_numpy(flow), None if m is None else ember.from_numpy(m)).numpy()
        # bilinear weights are float32 in both: error relative to the flow's size (values near 0 mix +-8-sized ones)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6 * float(np.abs(expected).max()))
    image = rng.standard_normal((1, 2, 1, 6)).astype(np.float32)  # height 1: y is left in pixels, as torchvision
    grid = rng.uniform(-1, 6, (1, 3, 4, 2)).astype(np.float32)
    np.testing.assert_allclose(ours.grid_sample(ember.from_numpy(image), ember.from_numpy(grid), align_corners=True).numpy(),
                               theirs.grid_sample(torch.from_numpy(image), torch.from_numpy(grid),
                                                  align_corners=True).numpy(), rtol=1e-6, atol=1e-6)


def test_bad_inputs_raise_like_torchvision() -> None:
    model = ev.models.optical_flow.raft_small().eval()
    with pytest.raises(ValueError, match="divisible by 8"):
        model(ember.zeros(1, 3, 128, 124), ember.zeros(1, 3, 128, 124))
    with pytest.raises(ValueError, match="same shape"):
        model(ember.zeros(1, 3, 128, 128), ember.zeros(1, 3, 128, 136))
    with pytest.raises(ValueError, match="at least 8 \\* 16 = 128"):
        model(ember.zeros(1, 3, 64, 128), ember.zeros(1, 3, 64, 128))
    with pytest.raises(ValueError, match="kernel_size should either 1 or 2"):
        ev.models.optical_flow.raft.RecurrentBlock(input_size=2, hidden_size=2, kernel_size=(1, 1, 1),
                                                   padding=(0, 0, 0))
    with pytest.warns(UserWarning, match="'pretrained' is deprecated"):
        assert ev.models.optical_flow.raft_small(pretrained=False).mask_predictor is None
