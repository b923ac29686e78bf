"""ember.vision's GoogLeNet and Inception v3 against real torchvision: same state_dict keys, strict loading of
torchvision's weights, the same eval logits, training-mode outputs (with the auxiliary heads), gradients and
batch-norm statistics; the builders' weight-dependent argument rules."""
from __future__ import annotations

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


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pair(name, **kwargs):
    torch.manual_seed(0)
    reference = no_dropout_(randomize_(getattr(tv.models, name)(num_classes=7, init_weights=False, **kwargs)))
    model = no_dropout_(getattr(ev.models, name)(num_classes=7, init_weights=False, **kwargs))
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state_dict_to_numpy(reference).items()}, strict=True)
    return reference.double(), model.double()


def close(ours, theirs, what, tol=1e-9):
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape, what
    scale = max(1e-3, float(np.abs(theirs).max()))
    assert float(np.abs(ours - theirs).max()) <= tol * scale, what


def compare(name, size, **kwargs):
    reference, model = pair(name, **kwargs)
    x = np.random.default_rng(1).standard_normal((2, 3, size, size))
    reference.eval(), model.eval()
    with torch.no_grad():
        theirs = reference(torch.tensor(x))
    ours = model(ember.tensor(x))
    assert not isinstance(ours, tuple) and not isinstance(theirs, tuple)
    close(ours.detach().numpy(), theirs.numpy(), "eval logits")
    reference.train(), model.train()
    theirs = reference(torch.tensor(x))
    ours = model(ember.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__
    assert ours._fields == theirs._fields if hasattr(theirs, "_fields") else True
    outs_t = list(theirs) if isinstance(theirs, tuple) else [theirs]
    outs_e = list(ours) if isinstance(ours, tuple) else [ours]
    for i, (o, t) in enumerate(zip(outs_e, outs_t)):
        close(o.detach().numpy(), t.detach().numpy(), f"train output {i}")
    sum((o * (i + 1)).sum() for i, o in enumerate(outs_t)).backward()
    sum((o * (i + 1)).sum() for i, o in enumerate(outs_e)).backward()
    ours_params = dict(model.named_parameters())
    for pname, p in reference.named_parameters():
        close(ours_params[pname].grad.numpy(), p.grad.numpy(), f"grad {pname}", tol=1e-8)
    ours_buffers = dict(model.named_buffers())
    for bname, b in reference.named_buffers():
        close(ours_buffers[bname].numpy(), b.numpy(), f"buffer {bname}")


@pytest.mark.slow
@pytest.mark.parametrize("transform_input", [False, True])
def test_googlenet_with_aux_heads_matches_torchvision(transform_input):
    compare("googlenet", 40, transform_input=transform_input)


def test_googlenet_without_aux_heads_matches_torchvision():
    compare("googlenet", 40, aux_logits=False)


@pytest.mark.slow
def test_inception_v3_without_aux_head_matches_torchvision():
    compare("inception_v3", 75, aux_logits=False, transform_input=True)


@pytest.mark.slow
def test_inception_v3_with_aux_head_matches_torchvision():
    compare("inception_v3", 299)


def test_builders_follow_torchvisions_argument_rules():
    M = ev.models
    assert M.get_model_weights("googlenet") is M.GoogLeNet_Weights
    assert M.Inception_V3_Weights.IMAGENET1K_V1.transforms().crop_size == [299]
    assert M.Inception_V3_Weights.IMAGENET1K_V1.url == tv.models.Inception_V3_Weights.IMAGENET1K_V1.url
    assert M.GoogLeNet_Weights.DEFAULT.meta["num_params"] == sum(p.numel() for p in M.googlenet(
        aux_logits=False, init_weights=False).parameters())
    with pytest.warns(FutureWarning, match="default weight initialization of GoogleNet"):
        M.GoogLeNet(num_classes=3)
    with pytest.warns(FutureWarning, match="default weight initialization of inception_v3"):
        M.Inception3(num_classes=3, aux_logits=False)
    with pytest.raises(ValueError, match="blocks length should be 3"):
        M.GoogLeNet(blocks=[], init_weights=False)
    with pytest.raises(ValueError, match="The parameter 'aux_logits' expected value True but got False"):
        M.googlenet(weights=M.GoogLeNet_Weights.DEFAULT, aux_logits=False)
    assert "googlenet" in M.list_models() and "inception_v3" in M.list_models()
