"""MViT (``models.video.mvit_v1_b`` / ``mvit_v2_s``) against real torchvision 0.28 on the same random weights: keys
in torchvision's order, strict loading, eval logits in float32, training outputs and every gradient in float64. The
default run builds small ``MViT``s in both libraries (non-square maps, so the relative-position tables are resampled,
and pooled key grids at non-integer ratios such as 5 -> 3); the full-size builders are in the slow set."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision, randomize_, state_dict_to_numpy  # noqa: E402
from torchvision_ref import one_torch_thread  # noqa: E402,F401 (an autouse fixture)

import ember  # noqa: E402
import ember.vision as ev  # noqa: E402

try:
    tv = import_torchvision()
except ImportError:  # pragma: no cover - torchvision is in the test extra
    tv = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


# (heads, in, out, kernel_q, kernel_kv, stride_q, stride_kv): v2-like (every block pools) and v1-like (some don't)
V2 = [(1, 8, 8, [3, 3, 3], [3, 3, 3], [1, 1, 1], [1, 2, 2]), (2, 8, 16, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 2, 2]),
      (2, 16, 16, [3, 3, 3], [3, 3, 3], [1, 1, 1], [1, 1, 1])]
V1 = [(1, 8, 16, [], [3, 3, 3], [], [1, 2, 2]), (2, 16, 16, [3, 3, 3], [3, 3, 3], [1, 2, 2], [1, 2, 2]),
      (2, 16, 24, [], [3, 3, 3], [], [1, 1, 1])]
FLAGS = {"v2": dict(residual_pool=True, residual_with_cls_embed=False, rel_pos_embed=True, proj_after_attn=True),
         "v1": dict(residual_pool=False, residual_with_cls_embed=False, rel_pos_embed=False, proj_after_attn=False),
         "v2_cls": dict(residual_pool=True, residual_with_cls_embed=True, rel_pos_embed=True, proj_after_attn=False)}


def _small(library, kind: str, **kwargs):
    video = library.models.video.mvit
    rows = V1 if kind == "v1" else V2
    setting = [video.MSBlockConfig(*row) for row in rows]
    # 40 x 24 pixels -> a 10 x 6 token map: non-square (tables resampled), 5 -> 3 key pooling after the first merge
    return video.MViT((40, 24), 4, setting, num_classes=7, **FLAGS[kind], **kwargs)


def _pair(kind: str, dtype=None, **kwargs):
    torch.manual_seed(0)
    if kind in FLAGS:
        reference, model = randomize_(_small(tv, kind, **kwargs)), _small(ev, kind, **kwargs)
    else:
        reference = randomize_(getattr(tv.models.video, kind)(num_classes=7))
        model = getattr(ev.models.video, kind)(num_classes=7)
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


@pytest.mark.parametrize("kind", ["v2", "v1", "v2_cls"])
def test_small_mvit_eval_logits_match_torchvision(kind: str) -> None:
    reference, model = _pair(kind)
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 40, 24)).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, kind, 1e-5)


@pytest.mark.parametrize("kind", ["v2", "v1"])
def test_small_mvit_training_gradients_match_torchvision_in_float64(kind: str) -> None:
    """Head dropout 0 (its masks are each library's own draws): outputs within 1e-12, every parameter gradient
    within 1e-9 of its array's largest."""
    reference, model = _pair(kind, dtype=torch.float64, dropout=0.0)
    model.double().train(), reference.train()
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 40, 24))
    weight = np.random.default_rng(3).standard_normal((2, 7))
    out = reference(torch.from_numpy(x))
    (out * torch.from_numpy(weight)).sum().backward()
    ours = model(ember.from_numpy(x))
    _close(ours.detach().numpy(), out.detach().numpy(), "train output", 1e-12)
    (ours * ember.from_numpy(weight)).sum().backward()
    theirs = dict(reference.named_parameters())
    largest = max(float(p.grad.abs().max()) for p in theirs.values())
    for key, param in model.named_parameters():
        expected = theirs[key].grad.numpy()
        # floor: the key bias's gradient is mathematically zero (softmax is shift-invariant), rounding noise here
        scale = max(float(np.abs(expected).max()), 1e-6 * largest)
        err = float(np.abs(param.grad.numpy() - expected).max())
        assert err <= 1e-9 * scale, f"{key}: gradient differs by {err:.3g} (scale {scale:.3g})"


def test_relative_position_distances_truncate_like_torchvision() -> None:
    """The float32 ``arange * ratio`` distances, truncated, for grids whose ratio is not a power of two."""
    from ember.vision.models.video.mvit import _distances

    for q, k in [(5, 3), (3, 5), (7, 4), (14, 7), (6, 6), (11, 2)]:
        q_ratio, k_ratio = max(k / q, 1.0), max(q / k, 1.0)
        expected = (torch.arange(q)[:, None] * q_ratio - (torch.arange(k)[None, :] + (1.0 - k)) * k_ratio).long()
        np.testing.assert_array_equal(_distances(q, k), expected.numpy())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mvit_v1_b", "mvit_v2_s"])
def test_full_size_mvit_matches_torchvision(name: str) -> None:
    """The published shape: a 16 x 224 x 224 clip (~8 s of CPU per model in ember, ~1.8 s in torch)."""
    reference, model = _pair(name)
    x = np.random.default_rng(4).standard_normal((1, 3, 16, 224, 224)).astype(np.float32)
    with torch.no_grad():
        expected = reference.eval()(torch.from_numpy(x)).numpy()
    _close(model.eval()(ember.from_numpy(x)).detach().numpy(), expected, name, 1e-5)
    assert ev.models.video.MViT_V2_S_Weights.DEFAULT.meta["num_params"] == \
        sum(p.numel() for p in ev.models.video.mvit_v2_s().parameters())


@pytest.mark.parametrize("name", ["v2", "v1", *(pytest.param(n, marks=pytest.mark.slow)
                                                for n in ("mvit_v1_b", "mvit_v2_s", "swin3d_t"))])
def test_feature_extraction_node_names_match_torchvision(name: str) -> None:
    """``get_graph_node_names`` (train and eval) as torchvision's: the same calls in the same order
    (``tensor_split``, in-place ``add_``, ``size()``) and the same wrapped helpers. Small MViTs by default, the
    full-size builders on the meta device in the slow set (~2 s of CPU each)."""
    from torchvision.models.feature_extraction import get_graph_node_names as theirs

    from ember.vision.models.feature_extraction import get_graph_node_names as ours

    if name in FLAGS:
        reference, model = _small(tv, name), _small(ev, name)
    else:
        with torch.device("meta"):
            reference = tv.models.get_model(name)
        with ember.device("meta"):
            model = ev.models.get_model(name)
    assert ours(model) == theirs(reference)
