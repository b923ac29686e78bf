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
from torchvision_ref import one_torch_thread  # noqa: E402,F401 (an autouse fixture)

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402

try:
    tv = import_torchvision()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")

# name -> (input side, builder keywords)
FAST = {"squeezenet1_1": (48, {}), "shufflenet_v2_x0_5": (32, {}), "mnasnet0_5": (32, {}),
        "googlenet": (32, {"init_weights": True}), "regnet_y_400mf": (64, {}), "regnet_x_400mf": (64, {})}
# (64 pixels where the net downsamples 32x: on 1x1 maps training-mode batch norm over two samples is degenerate)
SLOW = {"densenet121": (64, {}), "densenet161": (64, {}), "squeezenet1_0": (64, {}), "shufflenet_v2_x1_0": (64, {}),
        "mnasnet1_3": (64, {}), "convnext_tiny": (32, {}), "convnext_small": (32, {}), "regnet_y_1_6gf": (64, {}),
        "regnet_x_3_2gf": (64, {}), "swin_t": (56, {}), "swin_v2_t": (56, {}),
        "inception_v3": (299, {"init_weights": True})}
CASES = [pytest.param(n, *c) for n, c in FAST.items()] + [pytest.param(n, *c, marks=pytest.mark.slow)
                                                          for n, c in SLOW.items()]


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


def _float64_training_step_matches(reference, model, x, what: str) -> None:
    """From ``reference``'s weights in float64 and training mode: the same output (1e-9) and, for the loss
    ``sum(out ** 2)``, the same gradient of every parameter (1e-7)."""
    initial = state_dict_to_numpy(reference)
    reference.double().train(), model.double().train()
    reference.load_state_dict({k: torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v)
                               for k, v in initial.items()})
    model.load_state_dict(_ember_state(initial, reference.state_dict()._metadata, np.float64), strict=True)
    expected = reference(torch.from_numpy(x))
    got = model(ember.from_numpy(x))
    _close(got.detach().numpy(), expected.detach().numpy(), f"{what} (float64)", 1e-9)
    expected.pow(2).sum().backward()
    got.pow(2).sum().backward()
    ours = dict(model.named_parameters())
    for key, p in reference.named_parameters():
        _close(ours[key].grad.numpy(), p.grad.numpy(), f"{what} grad of {key}", 1e-7)


@pytest.mark.parametrize("v2", [False, True])
def test_small_swin_matches_torchvision(v2: bool) -> None:
    """Swin's code path at toy size: a 5x6 grid of 4x4 patches (padding), windows of 4 with shifts (the region
    mask), patch merging of an odd grid, train mode in float64 with gradients (the real ones run in the slow set)."""
    extra = {}
    if v2:
        extra = {"block": tv.models.swin_transformer.SwinTransformerBlockV2,
                 "downsample_layer": tv.models.swin_transformer.PatchMergingV2}
    config = dict(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                  num_classes=5)
    torch.manual_seed(0)
    reference = randomize_(tv.models.SwinTransformer(**config, **extra))
    ours_extra = {}
    if v2:
        ours_extra = {"block": ev.models.swin_transformer.SwinTransformerBlockV2,
                      "downsample_layer": ev.models.swin_transformer.PatchMergingV2}
    model = ev.models.SwinTransformer(**config, **ours_extra)
    assert list(model.state_dict()) == list(reference.state_dict())
    no_dropout_(reference), no_dropout_(model)
    _float64_training_step_matches(reference, model, np.random.default_rng(9).standard_normal((2, 3, 20, 24)),
                                   "small swin")


def test_small_maxvit_matches_torchvision() -> None:
    """MaxViT's code path at toy size (MBConv, window and grid attention with relative position bias), float64
    training step with gradients; maxvit_t's layout and parameter count."""
    config = dict(input_size=(32, 32), stem_channels=8, partition_size=2, block_channels=[8, 16], block_layers=[1, 2],
                  head_dim=4, stochastic_depth_prob=0.0, num_classes=3)
    torch.manual_seed(0)
    reference = randomize_(tv.models.MaxVit(**config))
    model = ev.models.MaxVit(**config)
    assert list(model.state_dict()) == list(reference.state_dict())
    theirs = dict(reference.named_buffers())
    for key, buffer in model.named_buffers():
        if "relative_position_index" in key:
            assert np.array_equal(buffer.numpy(), theirs[key].numpy()), key
    _float64_training_step_matches(reference, model, np.random.default_rng(10).standard_normal((2, 3, 32, 32)),
                                   "small MaxViT")
    with pytest.raises(ValueError, match="not divisible by partition size"):
        ev.models.MaxVit(**dict(config, input_size=(36, 36)))
    assert list(ev.models.maxvit_t().state_dict()) == list(tv.models.maxvit_t().state_dict())
    assert sum(p.numel() for p in ev.models.maxvit_t().parameters()) == \
        ev.models.MaxVit_T_Weights.DEFAULT.meta["num_params"]


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


BUILDERS_FAST = ["efficientnet_b1", "efficientnet_v2_s"]
BUILDERS_SLOW = ["vit_b_32", "efficientnet_b5", "efficientnet_v2_m", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet101_2",
                 "vit_l_32"]


# BUILDERS_SLOW were slow with real builds (vit_l_32, the ResNeXt-101s: seconds of random init); on the meta device
# all nine take ~2 s of CPU together, so every one runs by default.
@pytest.mark.parametrize("name", BUILDERS_FAST + BUILDERS_SLOW)
def test_more_builders_have_torchvisions_layout(name: str) -> None:
    """The variants built from existing classes: torchvision's keys, shapes, batch-norm settings and the published
    parameter count of their weights. Structure only, so built on the meta device in both libraries (a full-size
    random init cost seconds per model; real builds are compared value for value in the tests around)."""
    with ember.device("meta"), torch.device("meta"):
        reference = getattr(tv.models, name)(num_classes=10)
        model = getattr(ev.models, name)(num_classes=10)
        full = getattr(ev.models, name)()
    assert list(model.state_dict()) == list(reference.state_dict())
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in reference.state_dict().items()}
    norms = [(m.eps, m.momentum) for m in model.modules() if isinstance(m, ember.nn.BatchNorm2d)]
    assert norms == [(m.eps, m.momentum) for m in reference.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    published = ev.models.get_model_weights(name).DEFAULT.meta["num_params"]
    assert sum(p.numel() for p in full.parameters()) == published


@pytest.mark.parametrize("name", ["efficientnet_b1", "efficientnet_v2_s"])
def test_more_efficientnets_match_torchvision(name: str) -> None:
    torch.manual_seed(0)
    reference = randomize_(getattr(tv.models, name)(num_classes=10))
    model = getattr(ev.models, name)(num_classes=10)
    model.load_state_dict(_ember_state(state_dict_to_numpy(reference), reference.state_dict()._metadata))
    x = np.random.default_rng(7).standard_normal((2, 3, 32, 32)).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, f"{name} eval", 1e-4)


def test_regnet_stage_plans_match_torchvision() -> None:
    """Every RegNet variant's stages (depths, widths, group widths, strides) as torchvision computes them."""
    from ember.vision.models import regnet

    for name, (depth, w_0, w_a, w_m, group_width, se_ratio) in regnet._VARIANTS.items():
        theirs = tv.models.regnet.BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m,
                                                               group_width=group_width, se_ratio=se_ratio)
        ours = regnet.BlockParams.from_init_params(depth=depth, w_0=w_0, w_a=w_a, w_m=w_m, group_width=group_width,
                                                   se_ratio=se_ratio)
        assert (ours.depths, ours.widths, ours.group_widths, ours.strides, ours.se_ratio) == (
            theirs.depths, theirs.widths, theirs.group_widths, theirs.strides, theirs.se_ratio), name
    assert sum(p.numel() for p in ev.models.regnet_x_800mf().parameters()) == \
        ev.models.RegNet_X_800MF_Weights.DEFAULT.meta["num_params"]


SEGMENTATION = [("lraspp_mobilenet_v3_large", {}), ("deeplabv3_mobilenet_v3_large", {"aux_loss": True}),
                pytest.param("fcn_resnet50", {"aux_loss": True}, marks=pytest.mark.slow),
                pytest.param("deeplabv3_resnet50", {"aux_loss": True}, marks=pytest.mark.slow)]


@pytest.mark.parametrize("name,kwargs", SEGMENTATION)
def test_segmentation_model_matches_torchvision(name: str, kwargs: dict) -> None:
    """Keys, strict loading and the ``{"out", "aux"}`` outputs at a non-square input size, eval mode."""
    from collections import OrderedDict

    torch.manual_seed(0)
    reference = randomize_(getattr(tv.models.segmentation, name)(weights=None, weights_backbone=None, num_classes=5,
                                                                  **kwargs))
    model = getattr(ev.models.segmentation, name)(weights=None, weights_backbone=None, num_classes=5, **kwargs)
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict(_ember_state(state_dict_to_numpy(reference), reference.state_dict()._metadata), strict=True)
    x = np.random.default_rng(8).standard_normal((2, 3, 40, 48)).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x))
    got = model.eval()(ember.from_numpy(x))
    assert isinstance(got, OrderedDict) and list(got) == list(expected)
    for key in expected:
        _close(got[key].detach().numpy(), expected[key].numpy(), f"{name} {key}", 1e-4)


def test_segmentation_builders_options_like_torchvision() -> None:
    seg = ev.models.segmentation
    with pytest.raises(NotImplementedError, match="does not use auxiliary loss"):
        seg.lraspp_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=True)
    model = seg.fcn_resnet50(weights=None, weights_backbone=None)
    assert model.classifier[-1].out_channels == 21 and model.aux_classifier is None
    with pytest.warns(UserWarning, match="'pretrained_backbone' is deprecated"):
        seg.lraspp_mobilenet_v3_large(weights=None, pretrained_backbone=False)
    weights = seg.DeepLabV3_ResNet50_Weights.DEFAULT
    assert weights.meta["categories"][:2] == ["__background__", "aeroplane"] and len(weights.meta["categories"]) == 21
    preset = weights.transforms()
    out = preset(np.zeros((30, 40, 3), dtype=np.uint8))
    assert tuple(out.shape) == (3, 520, 693)
    assert "deeplabv3_resnet50" in ev.models.list_models()
