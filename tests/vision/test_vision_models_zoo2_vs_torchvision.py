"""The second group of torchvision classification models (DenseNet, SqueezeNet, ShuffleNet V2, MNASNet,
ConvNeXt, GoogLeNet, Inception v3) against real torchvision: the same state_dict keys and shapes, strict
loading, the same eval outputs (float32), and in float64 the same training-mode outputs (auxiliary heads
included), batch-norm statistics after the step and parameter gradients."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision, no_dropout_, randomize_, state_dict_to_numpy  # noqa: E402

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402

try:
    tv = import_torchvision()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")

# name -> (input side, builder keywords)
FAST = {"squeezenet1_1": (48, {}), "shufflenet_v2_x0_5": (32, {}), "mnasnet0_5": (32, {}),
        "googlenet": (32, {"init_weights": True})}
SLOW = {"densenet121": (32, {}), "densenet161": (32, {}), "squeezenet1_0": (64, {}), "shufflenet_v2_x1_0": (32, {}),
        "mnasnet1_3": (32, {}), "convnext_tiny": (32, {}), "convnext_small": (32, {}),
        "inception_v3": (299, {"init_weights": True})}
CASES = [pytest.param(n, *c) for n, c in FAST.items()] + [pytest.param(n, *c, marks=pytest.mark.slow)
                                                          for n, c in SLOW.items()]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _close(ours, theirs, what: str, tol: float) -> None:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, what
    scale = max(1.0, float(np.abs(theirs).max()))
    err = float(np.abs(ours - theirs).max())
    assert err <= tol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


def _ember_state(numpy_state: dict, metadata, dtype=None) -> dict:
    """The torch state as ember tensors, keeping torch's per-module versions (MNASNet checks them)."""
    from collections import OrderedDict

    out = OrderedDict((k, ember.from_numpy(v.astype(dtype) if dtype is not None and v.dtype == np.float32 else v))
                      for k, v in numpy_state.items())
    out._metadata = metadata
    return out


def _outputs(result) -> list:
    return list(result) if isinstance(result, tuple) else [result]


@pytest.mark.parametrize("name,size,kwargs", CASES)
def test_model_matches_torchvision(name: str, size: int, kwargs: dict) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.manual_seed(0)
        reference = randomize_(getattr(tv.models, name)(num_classes=10, **kwargs))
        model = getattr(ev.models, name)(num_classes=10, **kwargs)
    theirs = reference.state_dict()
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {k: tuple(v.shape) for k, v in theirs.items()}
    assert list(model.state_dict()) == list(theirs)
    initial = state_dict_to_numpy(reference)
    model.load_state_dict(_ember_state(initial, theirs._metadata), strict=True)

    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    reference.eval(), model.eval()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    assert np.abs(expected).max() > 0.1, "outputs too small for a meaningful comparison"
    _close(model(ember.from_numpy(x)).detach().numpy(), expected, f"{name} eval output", 1e-4)

    # one training-mode step in float64 from the same state
    no_dropout_(reference), no_dropout_(model)
    reference.train(), model.train()
    reference.double(), model.double()
    state64 = type(theirs)((k, torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v))
                           for k, v in initial.items())
    state64._metadata = theirs._metadata
    reference.load_state_dict(state64)
    model.load_state_dict(_ember_state(initial, theirs._metadata, np.float64))
    expected_out = _outputs(reference(torch.from_numpy(x.astype(np.float64))))
    got_out = _outputs(model(ember.from_numpy(x.astype(np.float64))))
    assert type(model(ember.from_numpy(x.astype(np.float64)))).__name__ == type(
        reference(torch.from_numpy(x.astype(np.float64)))).__name__
    assert len(got_out) == len(expected_out)
    for i, (g, e) in enumerate(zip(got_out, expected_out)):
        # 1e-6, not 1e-9: late layers see 1x1 maps, where training-mode batch norm over two samples turns
        # float64 summation-order differences (1e-16) into ~1e-7 of the output
        _close(g.detach().numpy(), e.detach().numpy(), f"{name} train output {i} (float64)", 1e-6)
    ours_buffers = dict(model.named_buffers())
    for key, b in reference.named_buffers():
        if b.dtype.is_floating_point:
            _close(ours_buffers[key].numpy(), b.numpy(), f"{name} buffer {key} (float64)", 1e-6)
    weights = np.random.default_rng(2).standard_normal(tuple(expected_out[0].shape))
    (expected_out[0] * torch.from_numpy(weights)).sum().backward()
    (got_out[0] * ember.from_numpy(weights)).sum().backward()
    ours = dict(model.named_parameters())
    for key, p in reference.named_parameters():
        if p.grad is not None:
            _close(ours[key].grad.numpy(), p.grad.numpy(), f"{name} grad of {key}", 1e-6)


def test_small_densenet_and_convnext_match_torchvision() -> None:
    """The DenseNet and ConvNeXt code paths at toy sizes (the real ones run in the slow set)."""
    pairs = [
        (tv.models.DenseNet(growth_rate=8, block_config=(2, 3), num_init_features=16, num_classes=5),
         ev.models.DenseNet(growth_rate=8, block_config=(2, 3), num_init_features=16, num_classes=5)),
        (tv.models.ConvNeXt([tv.models.convnext.CNBlockConfig(16, 32, 2), tv.models.convnext.CNBlockConfig(32, None, 1)],
                            num_classes=5, layer_scale=0.5),
         ev.models.ConvNeXt([ev.models.convnext.CNBlockConfig(16, 32, 2), ev.models.convnext.CNBlockConfig(32, None, 1)],
                            num_classes=5, layer_scale=0.5)),
    ]
    x = np.random.default_rng(6).standard_normal((2, 3, 32, 32)).astype(np.float32)
    for reference, model in pairs:
        randomize_(reference)
        assert list(model.state_dict()) == list(reference.state_dict())
        model.load_state_dict(_ember_state(state_dict_to_numpy(reference), reference.state_dict()._metadata))
        no_dropout_(reference), no_dropout_(model)
        for mode in ("eval", "train"):
            getattr(reference, mode)(), getattr(model, mode)()
            with torch.no_grad():
                expected = reference(torch.from_numpy(x)).numpy()
            _close(model(ember.from_numpy(x)).detach().numpy(), expected, f"{type(model).__name__} {mode}", 1e-4)


def test_densenet_loads_torchvisions_old_key_spelling() -> None:
    """Published DenseNet checkpoints spell ``norm1`` as ``norm.1``: the builder renames them, as torchvision."""
    from ember.vision.models.densenet import _renamed

    model = ev.models.densenet121(num_classes=4)
    old = {}
    for key, value in model.state_dict().items():
        if not key.endswith("num_batches_tracked"):
            key = key.replace(".norm1.", ".norm.1.").replace(".conv2.", ".conv.2.")
        old[key] = value
    assert any(".norm.1." in k for k in old)
    assert list(_renamed(old)) == list(model.state_dict())


def test_mnasnet_version1_checkpoint_patches_the_stem_like_torchvision() -> None:
    """A checkpoint of torchvision's first MNASNet (fixed-width stem, state_dict version 1) loads with the stem
    patched to its shapes and torchvision's warning, and computes what torchvision's model computes."""
    mn = pytest.importorskip("torchvision.models.mnasnet")
    old = randomize_(tv.models.mnasnet0_5(num_classes=3))
    depths = mn._get_depths(0.5)
    stem = [torch.nn.Conv2d(3, 32, 3, padding=1, stride=2, bias=False), torch.nn.BatchNorm2d(32),
            torch.nn.ReLU(inplace=True), torch.nn.Conv2d(32, 32, 3, padding=1, stride=1, groups=32, bias=False),
            torch.nn.BatchNorm2d(32), torch.nn.ReLU(inplace=True),
            torch.nn.Conv2d(32, 16, 1, padding=0, stride=1, bias=False), torch.nn.BatchNorm2d(16),
            mn._stack(16, depths[2], 3, 2, 3, 3, mn._BN_MOMENTUM)]
    for index, layer in enumerate(stem):
        old.layers[index] = layer
    old._version = 1
    randomize_(old)
    state = old.state_dict()
    assert state._metadata[""]["version"] == 1
    model = ev.models.mnasnet0_5(num_classes=3)
    with pytest.warns(UserWarning, match="A new version of MNASNet"):
        model.load_state_dict(_ember_state(state_dict_to_numpy(old), state._metadata), strict=True)
    assert model._version == 1
    x = np.random.default_rng(5).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = old.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, "MNASNet v1", 1e-4)


def test_googlenet_and_inception_aux_options_like_torchvision() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for name in ("googlenet", "inception_v3"):
            ours = getattr(ev.models, name)(num_classes=5, aux_logits=False, init_weights=False)
            theirs = getattr(tv.models, name)(num_classes=5, aux_logits=False, init_weights=False)
            assert list(ours.state_dict()) == list(theirs.state_dict())
        with pytest.warns(FutureWarning, match="default weight initialization of GoogleNet"):
            ev.models.GoogLeNet(num_classes=2)
    assert "googlenet" in ev.models.list_models() and "inception_v3" in ev.models.list_models()
    assert ev.models.get_model_weights("densenet121").DEFAULT.meta["num_params"] == 7978856
