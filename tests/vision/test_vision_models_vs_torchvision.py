"""Every ember.vision model against real torchvision: same state_dict keys, strict loading, same outputs
(eval and train mode), same batch-norm statistics after a training-mode forward, same gradients."""
from __future__ import annotations

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

# name -> input side (the smallest convenient size each model accepts)
FAST = {"resnet18": 48, "mobilenet_v2": 48, "mobilenet_v3_small": 48, "efficientnet_b0": 48}
SLOW = {"alexnet": 64, "vgg11": 32, "vgg11_bn": 32, "vgg16": 32, "vgg16_bn": 32, "resnet34": 64, "resnet50": 64,
        "resnet101": 64, "resnet152": 64, "mobilenet_v3_large": 64, "vit_b_16": 224}
CASES = [pytest.param(n, s) for n, s in FAST.items()] + [pytest.param(n, s, marks=pytest.mark.slow)
                                                        for n, s in SLOW.items()]
TOL = 1e-4


def _pair(name: str, **kwargs):
    torch.manual_seed(0)
    reference = randomize_(getattr(tv.models, name)(num_classes=10, **kwargs))
    model = getattr(ev.models, name)(num_classes=10, **kwargs)
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()}, strict=True)
    return reference, model


def _close(ours, theirs, what: str, tol: float = TOL) -> None:
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, what
    scale = max(1.0, float(np.abs(theirs).max()))
    err = float(np.abs(ours - theirs).max())
    assert err <= tol * scale, f"{what}: max abs difference {err:.3g} (scale {scale:.3g})"


@pytest.mark.parametrize("name,size", CASES)
def test_eval_and_train_outputs_match_torchvision(name: str, size: int) -> None:
    reference, model = _pair(name)
    x = np.random.default_rng(1).standard_normal((2, 3, size, size)).astype(np.float32)
    reference.eval(), model.eval()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x)).numpy()
    got = model(ember.from_numpy(x)).detach().numpy()
    assert np.abs(expected).max() > 0.1, "outputs too small for a meaningful comparison"
    _close(got, expected, f"{name} eval output")

    no_dropout_(reference), no_dropout_(model)
    reference.train(), model.train()
    initial = state_dict_to_numpy(reference)
    with torch.no_grad():
        expected32 = reference(torch.from_numpy(x)).numpy()
    got32 = model(ember.from_numpy(x)).detach().numpy()
    buffers32 = ({k: v.numpy().copy() for k, v in model.named_buffers()},
                 {k: v.numpy().copy() for k, v in reference.named_buffers()})

    # The same step in float64 from the same state: outputs, batch-norm statistics, gradients. (In
    # float32 the libraries' last-bit differences can flip a ReLU mask at the kink, and deep
    # train-mode batch norm over few samples amplifies rounding: see _close32.)
    reference.double(), model.double()
    reference.load_state_dict({k: torch.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v)
                               for k, v in initial.items()})
    model.load_state_dict({k: ember.from_numpy(v.astype(np.float64) if v.dtype == np.float32 else v)
                           for k, v in initial.items()})
    expected = reference(torch.from_numpy(x.astype(np.float64)))
    got = model(ember.from_numpy(x.astype(np.float64)))
    _close(got.detach().numpy(), expected.detach().numpy(), f"{name} train output (float64)", tol=1e-9)
    _close32(got32, expected32, expected.detach().numpy(), f"{name} train output")
    ours64 = dict(model.named_buffers())
    for key, b in reference.named_buffers():
        _close(ours64[key].numpy(), b.numpy(), f"{name} buffer {key} after a training step (float64)", tol=1e-9)
        _close32(buffers32[0][key], buffers32[1][key], b.numpy(), f"{name} buffer {key} after a training step")
    weights = np.random.default_rng(2).standard_normal(tuple(expected.shape))
    (expected * torch.from_numpy(weights)).sum().backward()
    (got * ember.from_numpy(weights)).sum().backward()
    ours = dict(model.named_parameters())
    for key, p in reference.named_parameters():
        _close(ours[key].grad.numpy(), p.grad.numpy(), f"{name} grad of {key}", tol=1e-7)


def _close32(ours: np.ndarray, theirs: np.ndarray, exact: np.ndarray, what: str) -> None:
    """Float32 results agree within 1e-4; where they do not (ResNet-101/152 in training mode: ~100 batch
    norms over 8 samples each), ember must be at least as close to the float64 result as torch itself is."""
    ours, theirs, exact = (np.asarray(a, dtype=np.float64) for a in (ours, theirs, exact))
    scale = max(1.0, float(np.abs(theirs).max()))
    err = float(np.abs(ours - theirs).max())
    if err <= TOL * scale:
        return
    ours_off = float(np.abs(ours - exact).max())
    torch_off = float(np.abs(theirs - exact).max())
    assert ours_off <= 1.5 * torch_off, (f"{what} (float32): {err:.3g} from torch, {ours_off:.3g} from the float64 "
                                         f"result where torch is {torch_off:.3g} from it")


def test_resnet_options_match_torchvision() -> None:
    """groups / width_per_group / replace_stride_with_dilation / zero_init_residual give torchvision's layout."""
    for kwargs in ({"replace_stride_with_dilation": [False, True, True]}, {"groups": 4, "width_per_group": 8},
                   {"zero_init_residual": True}):
        reference = tv.models.ResNet(tv.models.resnet.Bottleneck, [1, 1, 1, 1], num_classes=5, **kwargs)
        model = ev.models.ResNet(ev.models.resnet.Bottleneck, [1, 1, 1, 1], num_classes=5, **kwargs)
        ref_sd = reference.state_dict()
        assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == {k: tuple(v.shape)
                                                                               for k, v in ref_sd.items()}
        if kwargs.get("zero_init_residual"):
            assert all(float(m.bn3.weight.abs().sum()) == 0.0 for m in model.modules()
                       if isinstance(m, ev.models.resnet.Bottleneck))
        randomize_(reference)
        model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()})
        x = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
        with torch.no_grad():
            expected = reference.eval()(torch.from_numpy(x)).numpy()
        _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, f"ResNet {kwargs}")


def test_small_vision_transformer_matches_torchvision() -> None:
    """The ViT code path at toy size (the real vit_b_16 runs in the slow set)."""
    config = dict(image_size=32, patch_size=16, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32, num_classes=7)
    torch.manual_seed(0)
    reference = randomize_(tv.models.VisionTransformer(**config))
    model = ev.models.VisionTransformer(**config)
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()}, strict=True)
    x = np.random.default_rng(4).standard_normal((3, 3, 32, 32)).astype(np.float32)
    for mode in ("eval", "train"):
        getattr(reference, mode)(), getattr(model, mode)()
        with torch.no_grad():
            expected = reference(torch.from_numpy(x)).numpy()
        _close(model(ember.from_numpy(x)).detach().numpy(), expected, f"ViT {mode}")


def test_mobilenet_options_match_torchvision() -> None:
    for name, kwargs in (("mobilenet_v3_small", {"width_mult": 0.75, "reduced_tail": True, "dilated": True}),
                         ("mobilenet_v2", {"width_mult": 0.5})):
        reference = getattr(tv.models, name)(num_classes=3, **kwargs)
        model = getattr(ev.models, name)(num_classes=3, **kwargs)
        assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == \
            {k: tuple(v.shape) for k, v in reference.state_dict().items()}
