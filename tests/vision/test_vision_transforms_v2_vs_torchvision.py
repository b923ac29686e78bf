"""ember.vision.transforms.v2 and ember.vision.tv_tensors against torchvision 0.28's v2 on torch.

Boxes, masks and images of one sample must come out as torchvision's (boxes and masks exactly, images
pixel-equal where the v1 function is), with the random parameters fixed on both sides; the plain-tensor
heuristic, ToDtype's scaling rules and MixUp / CutMix's label mixing are compared directly.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.vision import tv_tensors
from ember.vision.transforms import v2
from ember.vision.transforms.v2 import functional as F

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402
from cpu_rounding import assert_same_up_to_cpu_rounding  # noqa: E402

try:
    tv = import_torchvision()
    import torchvision.transforms.v2  # noqa: F401  (a subpackage: not imported by torchvision itself)
    import torchvision.tv_tensors  # noqa: F401
    TV2 = tv.transforms.v2
    TF2 = TV2.functional
    TVT = tv.tv_tensors
except ImportError:  # pragma: no cover
    tv = TV2 = TF2 = TVT = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")

BOXES = {  # on a 40 x 60 canvas (H, W); some boxes reach outside it
    "XYXY": [[10, 5, 30, 25], [0, 0, 60, 40], [50, 30, 70, 45], [-5, 2, 12, 9]],
    "XYWH": [[10, 5, 20, 20], [0, 0, 60, 40], [50, 30, 20, 15], [-5, 2, 17, 7]],
    "CXCYWH": [[20, 15, 20, 20], [30, 20, 60, 40], [59, 37, 21, 15], [3, 5, 17, 7]],
}


def _sample(fmt: str, dtype: str, seed: int = 0):
    """(ember sample, torch sample): an image, a mask and boxes on a 40 x 60 canvas."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (3, 40, 60), dtype=np.uint8)
    mask = rng.integers(0, 5, (40, 60), dtype=np.uint8)
    boxes = np.asarray(BOXES[fmt], dtype=dtype)
    mine = (tv_tensors.Image(ember.from_numpy(image.copy())), tv_tensors.Mask(ember.from_numpy(mask.copy())),
            tv_tensors.BoundingBoxes(ember.from_numpy(boxes.copy()), format=fmt, canvas_size=(40, 60)))
    theirs = (TVT.Image(torch.from_numpy(image.copy())), TVT.Mask(torch.from_numpy(mask.copy())),
              TVT.BoundingBoxes(torch.from_numpy(boxes.copy()), format=fmt, canvas_size=(40, 60)))
    return mine, theirs


def _same_sample(got, expected, what="", grid: bool = False) -> None:
    """Each item bit-equal to torchvision's (floats to 1e-5); `grid`: images and masks sampled through torchvision's
    float32 grid, whose rounding depends on the CPU's BLAS (tests/vision/cpu_rounding.py)."""
    assert len(got) == len(expected)
    for g, e, kind in zip(got, expected, ("image", "mask", "boxes", "extra")):
        assert type(g).__name__ == type(e).__name__, (what, kind, type(g), type(e))
        g_np, e_np = g.numpy(), e.numpy()
        assert g_np.dtype == e_np.dtype and g_np.shape == e_np.shape, (what, kind, g_np.shape, e_np.shape)
        if grid and kind in ("image", "mask"):
            assert_same_up_to_cpu_rounding(g_np, e_np, f"{what} {kind}")
        elif g_np.dtype.kind == "f":
            np.testing.assert_allclose(g_np, e_np, atol=1e-5, rtol=0, err_msg=f"{what} {kind}")
        else:
            np.testing.assert_array_equal(g_np, e_np, err_msg=f"{what} {kind}")
        if kind == "boxes":
            assert g.canvas_size == tuple(e.canvas_size) and g.format.value == e.format.value, what


CASES = [(fmt, dtype) for fmt in BOXES for dtype in ("int64", "float32")]


@pytest.mark.parametrize("fmt,dtype", CASES)
def test_functional_geometry_on_samples_matches_torchvision(fmt, dtype) -> None:
    mine, theirs = _sample(fmt, dtype)
    calls = [
        ("horizontal_flip", (), {}), ("vertical_flip", (), {}), ("crop", (4, 7, 25, 31), {}),
        ("crop", (-3, -2, 30, 70), {}), ("resize", ([20, 45],), dict(interpolation=v2.InterpolationMode.NEAREST)),
        ("resize", ([27],), dict(interpolation=v2.InterpolationMode.NEAREST)), ("center_crop", ([21, 33],), {}),
        ("center_crop", ([50, 65],), {}), ("pad", ([3, 4, 5, 6],), {}), ("pad", ([2],), dict(fill=9)),
        ("resized_crop", (5, 6, 20, 30, [16, 24]), dict(interpolation=v2.InterpolationMode.NEAREST)),
    ]
    for name, args, kwargs in calls:
        tv_kwargs = {k: (TV2.InterpolationMode(v.value) if k == "interpolation" else v) for k, v in kwargs.items()}
        got = [getattr(F, name)(x, *args, **kwargs) for x in mine]
        expected = [getattr(TF2, name)(x, *args, **tv_kwargs) for x in theirs]
        _same_sample(got, expected, f"{name}{args} {fmt} {dtype}")


@pytest.mark.parametrize("fmt,dtype", CASES)
def test_box_format_conversion_and_clamping_match_torchvision(fmt, dtype) -> None:
    mine, theirs = _sample(fmt, dtype)
    for new in ("XYXY", "XYWH", "CXCYWH"):
        got = F.convert_bounding_box_format(mine[2], new_format=new)
        expected = TF2.convert_bounding_box_format(theirs[2], new_format=new)
        _same_sample([got], [expected], f"{fmt}->{new}")
    _same_sample([v2.ClampBoundingBoxes()(mine[2])], [TV2.ClampBoundingBoxes()(theirs[2])], f"clamp {fmt}")
    unclamped_mine = tv_tensors.BoundingBoxes(mine[2], format=fmt, canvas_size=(40, 60), clamping_mode=None)
    unclamped_theirs = TVT.BoundingBoxes(theirs[2], format=fmt, canvas_size=(40, 60), clamping_mode=None)
    _same_sample([F.crop(unclamped_mine, 4, 7, 25, 31)], [TF2.crop(unclamped_theirs, 4, 7, 25, 31)], "no clamping")


def _fix(monkeypatch, name: str, params: dict) -> None:
    monkeypatch.setattr(getattr(v2, name), "make_params", lambda self, flat: dict(params))
    monkeypatch.setattr(getattr(TV2, name), "make_params", lambda self, flat: dict(params))


@pytest.mark.parametrize("fmt", list(BOXES))
def test_random_geometry_with_fixed_params_matches_torchvision(monkeypatch, fmt) -> None:
    mine, theirs = _sample(fmt, "float32", seed=1)
    _fix(monkeypatch, "RandomResizedCrop", dict(top=3, left=8, height=30, width=41))
    nearest = dict(interpolation=v2.InterpolationMode.NEAREST)
    _same_sample(v2.RandomResizedCrop((20, 28), **nearest)(mine),
                 TV2.RandomResizedCrop((20, 28), interpolation=TV2.InterpolationMode.NEAREST)(theirs), "rrc")
    crop_params = dict(needs_crop=True, top=5, left=2, height=32, width=48, needs_pad=True, padding=[4, 4, 4, 4])
    _fix(monkeypatch, "RandomCrop", crop_params)
    _same_sample(v2.RandomCrop((32, 48), padding=4, fill={tv_tensors.Mask: 255, "others": 0})(mine),
                 TV2.RandomCrop((32, 48), padding=4, fill={TVT.Mask: 255, "others": 0})(theirs), "random crop")
    _same_sample(v2.RandomHorizontalFlip(p=1.0)(mine), TV2.RandomHorizontalFlip(p=1.0)(theirs), "hflip")
    _same_sample(v2.RandomVerticalFlip(p=1.0)(mine), TV2.RandomVerticalFlip(p=1.0)(theirs), "vflip")
    composed = [v2.Compose([v2.CenterCrop(30), v2.Resize(24, **nearest)]),
                TV2.Compose([TV2.CenterCrop(30), TV2.Resize(24, interpolation=TV2.InterpolationMode.NEAREST)])]
    _same_sample(composed[0](*mine), composed[1](*theirs), "compose unpacked")
    _same_sample(composed[0](mine), composed[1](theirs), "compose packed")


def test_random_crop_parameters_cover_the_padded_image() -> None:
    ember.manual_seed(0)
    t = v2.RandomCrop(10, pad_if_needed=True)
    seen = set()
    for _ in range(300):
        params = t.make_params([ember.zeros(3, 6, 12)])
        assert params["padding"] == [0, 4, 0, 4]  # v2 pads both sides by the shortfall
        seen.add((params["top"], params["left"]))
    assert {top for top, _ in seen} == set(range(0, 5)) and {left for _, left in seen} == set(range(0, 3))


def test_plain_tensor_heuristic_and_dict_samples() -> None:
    img, labels = ember.arange(6.0).reshape(1, 2, 3), ember.tensor([1, 2, 3])
    out_img, out_labels = v2.RandomHorizontalFlip(p=1.0)(img, labels)
    assert out_img.tolist() == [[[2.0, 1.0, 0.0], [5.0, 4.0, 3.0]]] and out_labels.tolist() == [1, 2, 3]
    first, second = v2.RandomHorizontalFlip(p=1.0)(img, img)  # only the first plain tensor is the image
    assert first.tolist() != img.tolist() and second.tolist() == img.tolist()
    image = tv_tensors.Image(img)
    sample = {"image": image, "plain": img, "meta": "kept"}
    out = v2.RandomHorizontalFlip(p=1.0)(sample)
    assert type(out["image"]).__name__ == "Image" and out["plain"].tolist() == img.tolist()
    assert out["meta"] == "kept"
    torch_img = torch.arange(6.0).reshape(1, 2, 3)
    t_first, t_second = TV2.RandomHorizontalFlip(p=1.0)(torch_img, torch_img)
    assert t_first.tolist() == first.tolist() and t_second.tolist() == second.tolist()


@pytest.mark.parametrize("src,dst,scale", [("uint8", "float32", True), ("uint8", "float64", True),
                                           ("float32", "uint8", True), ("uint8", "int16", True),
                                           ("int16", "uint8", True), ("uint8", "float32", False),
                                           ("float64", "float32", True)])
def test_to_dtype_matches_torchvision(src, dst, scale) -> None:
    rng = np.random.default_rng(0)
    if src == "uint8":
        array = rng.integers(0, 256, (3, 9, 11), dtype=np.uint8)
    elif src == "int16":
        array = rng.integers(0, 32768, (3, 9, 11), dtype=np.int16)
    else:
        array = rng.random((3, 9, 11)).astype(src)
    got = v2.ToDtype(getattr(ember, dst), scale=scale)(tv_tensors.Image(ember.from_numpy(array.copy())))
    expected = TV2.ToDtype(getattr(torch, dst), scale=scale)(TVT.Image(torch.from_numpy(array.copy())))
    assert type(got).__name__ == "Image"
    np.testing.assert_array_equal(got.numpy(), expected.numpy())  # bit-equal, floats included
    mask = tv_tensors.Mask(ember.zeros(4, 4, dtype=ember.uint8))
    out_img, out_mask = v2.ToDtype({tv_tensors.Image: ember.float32, tv_tensors.Mask: ember.int64})(
        tv_tensors.Image(ember.from_numpy(array.copy())), mask)
    assert out_img.dtype == ember.float32 and out_mask.dtype == ember.int64 and type(out_mask).__name__ == "Mask"
    with pytest.raises(ValueError, match="No dtype was specified"):
        v2.ToDtype({tv_tensors.Image: ember.float32})(tv_tensors.Image(ember.zeros(3, 2, 2)), mask)


def test_to_image_from_every_kind() -> None:
    hwc = np.random.default_rng(0).integers(0, 256, (7, 9, 3), dtype=np.uint8)
    from_numpy = v2.ToImage()(hwc)
    expected = TV2.ToImage()(hwc)
    assert type(from_numpy).__name__ == "Image"
    np.testing.assert_array_equal(from_numpy.numpy(), expected.numpy())
    Image = pytest.importorskip("PIL.Image")
    pil = Image.fromarray(hwc)
    np.testing.assert_array_equal(v2.ToImage()(pil).numpy(), TV2.ToImage()(pil).numpy())
    gray = v2.ToImage()(np.zeros((5, 6), dtype=np.uint8))
    assert tuple(gray.shape) == (1, 5, 6)
    assert type(v2.ToPureTensor()(from_numpy)).__name__ == "Tensor"


def test_normalize_and_colour_jitter_with_fixed_params_match(monkeypatch) -> None:
    rng = np.random.default_rng(2)
    array = rng.random((3, 12, 14)).astype(np.float32)
    mine, theirs = tv_tensors.Image(ember.from_numpy(array.copy())), TVT.Image(torch.from_numpy(array.copy()))
    got = v2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.25])(mine)
    expected = TV2.Normalize([0.4, 0.5, 0.6], [0.2, 0.3, 0.25])(theirs)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-6)
    params = dict(fn_idx=[2, 0, 3, 1], brightness_factor=1.2, contrast_factor=0.7, saturation_factor=1.4,
                  hue_factor=-0.05)
    _fix(monkeypatch, "ColorJitter", params)
    got = v2.ColorJitter(0.4, 0.4, 0.4, 0.1)(mine)
    expected = TV2.ColorJitter(0.4, 0.4, 0.4, 0.1)(theirs)
    assert type(got).__name__ == "Image"
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)
    with pytest.raises(TypeError, match="PIL"):
        Image = pytest.importorskip("PIL.Image")
        v2.Normalize([0.5], [0.5])(Image.new("L", (4, 4)))


def test_random_erasing_with_fixed_params_matches(monkeypatch) -> None:
    value = np.array([0.25, 0.5, 0.75], dtype=np.float32)[:, None, None]
    monkeypatch.setattr(v2.RandomErasing, "make_params",
                        lambda self, flat: dict(i=2, j=3, h=4, w=5, v=ember.from_numpy(value)))
    monkeypatch.setattr(TV2.RandomErasing, "make_params",
                        lambda self, flat: dict(i=2, j=3, h=4, w=5, v=torch.from_numpy(value)))
    array = np.random.default_rng(3).random((3, 10, 12)).astype(np.float32)
    got = v2.RandomErasing(p=1.0)(tv_tensors.Image(ember.from_numpy(array.copy())))
    expected = TV2.RandomErasing(p=1.0)(TVT.Image(torch.from_numpy(array.copy())))
    assert type(got).__name__ == "Image"
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_random_erasing_draws_and_passes_masks_through() -> None:
    ember.manual_seed(1)
    img = tv_tensors.Image(ember.ones(3, 30, 40))
    mask = tv_tensors.Mask(ember.ones(30, 40))
    erased = 0
    for _ in range(50):
        with pytest.warns(UserWarning, match="passing through"):
            out_img, out_mask = v2.RandomErasing(p=1.0, value=0)(img, mask)
        assert (out_mask.numpy() == 1).all()
        zeros = int((out_img.numpy() == 0).sum()) // 3
        assert 0 <= zeros <= 0.33 * 1200 + 60
        erased += zeros > 0
    assert erased == 50


@pytest.mark.parametrize("name", ["MixUp", "CutMix"])
def test_mixup_and_cutmix_with_fixed_params_match(monkeypatch, name) -> None:
    rng = np.random.default_rng(4)
    images = rng.random((4, 3, 10, 12)).astype(np.float32)
    labels = np.array([0, 2, 1, 2])
    params = dict(lam=0.3) if name == "MixUp" else dict(box=(2, 3, 9, 8), lam_adjusted=1 - 35 / 120)
    _fix(monkeypatch, name, params)
    got_img, got_lab = getattr(v2, name)(num_classes=3)(ember.from_numpy(images.copy()), ember.from_numpy(labels))
    exp_img, exp_lab = getattr(TV2, name)(num_classes=3)(torch.from_numpy(images.copy()), torch.from_numpy(labels))
    np.testing.assert_allclose(got_img.numpy(), exp_img.numpy(), atol=1e-6)
    np.testing.assert_allclose(got_lab.numpy(), exp_lab.numpy(), atol=1e-6)
    sample = {"image": tv_tensors.Image(ember.from_numpy(images.copy())), "labels": ember.from_numpy(labels)}
    out = getattr(v2, name)(num_classes=3)(sample)
    assert type(out["image"]).__name__ == "Image"
    np.testing.assert_allclose(out["labels"].numpy(), exp_lab.numpy(), atol=1e-6)


def test_mixup_cutmix_draws_and_errors() -> None:
    ember.manual_seed(2)
    lams = [v2.MixUp(alpha=1.0, num_classes=3).make_params([])["lam"] for _ in range(2000)]
    assert abs(np.mean(lams) - 0.5) < 0.02 and abs(np.var(lams) - 1 / 12) < 0.008  # Beta(1, 1) = U(0, 1)
    cut = v2.CutMix(num_classes=3)
    for _ in range(200):
        params = cut.make_params([ember.zeros(2, 3, 20, 30)])
        x1, y1, x2, y2 = params["box"]
        assert 0 <= x1 <= x2 <= 30 and 0 <= y1 <= y2 <= 20
        assert params["lam_adjusted"] == pytest.approx(1 - (x2 - x1) * (y2 - y1) / 600)
    images, labels = ember.zeros(2, 3, 4, 4), ember.tensor([0, 1])
    with pytest.raises(ValueError, match="num_classes must be passed"):
        v2.MixUp()(images, labels)
    with pytest.raises(ValueError, match="batch size"):
        v2.MixUp(num_classes=2)(ember.zeros(3, 3, 4, 4), labels)
    with pytest.raises(ValueError, match="does not support"):
        v2.CutMix(num_classes=2)(images, labels, tv_tensors.Mask(ember.zeros(2, 4, 4)))


def test_auto_augment_family_on_images_and_refusal_with_boxes() -> None:
    img = tv_tensors.Image((ember.rand(3, 20, 20) * 255).to(ember.uint8))
    for t in (v2.RandAugment(), v2.TrivialAugmentWide(), v2.AutoAugment(), v2.AugMix()):
        out = t(img)
        assert type(out).__name__ == "Image" and tuple(out.shape) == (3, 20, 20) and out.dtype == ember.uint8
    boxes = tv_tensors.BoundingBoxes([[1, 1, 5, 5]], format="XYXY", canvas_size=(20, 20))
    with pytest.raises(TypeError, match="not supported"):
        v2.RandAugment()(img, boxes)


def test_tv_tensors_behave_like_torchvisions() -> None:
    boxes = tv_tensors.BoundingBoxes([1, 2, 5, 6], format="xywh", canvas_size=(10, 12))
    assert tuple(boxes.shape) == (1, 4) and boxes.format == tv_tensors.BoundingBoxFormat.XYWH
    assert type(boxes + 1).__name__ == "Tensor"  # operations unwrap, as in torchvision
    wrapped = tv_tensors.wrap(boxes + 1, like=boxes)
    assert type(wrapped).__name__ == "BoundingBoxes" and wrapped.canvas_size == (10, 12)
    assert tuple(tv_tensors.Image(ember.zeros(4, 5)).shape) == (1, 4, 5)
    with pytest.raises(ValueError, match="1D or 2D"):
        tv_tensors.BoundingBoxes(ember.zeros(1, 2, 4), format="XYXY", canvas_size=(3, 3))
    with pytest.raises(ValueError, match="not one of"):
        tv_tensors.BoundingBoxes([[0, 0, 1, 1, 0]], format="XYWHR", canvas_size=(3, 3))
    x = ember.ones(2, 2, requires_grad=True)
    image = tv_tensors.Image(x * 2)
    (image.sum() * 1.0).backward()  # the wrapper keeps the autograd history
    assert x.grad.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_a_torchvision_training_pipeline_runs_under_ember_run(tmp_path) -> None:
    """A typical torchvision augmentation script, unchanged, through `ember run` (torchvision -> ember.vision)."""
    import os
    import subprocess
    import sys
    import textwrap

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = tmp_path / "augment.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torchvision.transforms as T
        from torchvision.transforms import autoaugment, functional as TF
        from torchvision.transforms import v2
        from torchvision import tv_tensors
        import ember
        assert T.RandomRotation.__module__.startswith("ember.vision")
        torch.manual_seed(0)
        img = (torch.rand(3, 32, 32) * 255).to(torch.uint8)
        train = T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), autoaugment.TrivialAugmentWide(),
                           T.RandomAffine(10, translate=(0.1, 0.1)), T.ConvertImageDtype(torch.float),
                           T.RandomErasing(p=1.0)])
        assert train(img).shape == (3, 24, 24)
        pipeline = v2.Compose([v2.ToImage(), v2.RandomResizedCrop(20), v2.RandAugment(),
                               v2.ToDtype(torch.float32, scale=True)])
        out = pipeline(img)
        assert isinstance(out, tv_tensors.Image) and out.dtype == torch.float32
        batch, labels = v2.CutMix(num_classes=10)(torch.rand(4, 3, 8, 8), torch.tensor([1, 2, 3, 4]))
        assert labels.shape == (4, 10)
        assert TF.rotate(img, 90).shape == (3, 32, 32)
        print("ok")
    """))
    env = dict(os.environ, PYTHONPATH=root)
    env.pop("EMBER_RUN_NO_VISION", None)
    done = subprocess.run([sys.executable, "-m", "ember.cli", "run", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def _mask_kwargs(kwargs: dict) -> dict:
    """Masks take no interpolation and one fill value."""
    return {k: v for k, v in kwargs.items() if k != "interpolation" and not (k == "fill" and isinstance(v, list))}


V2_ROTATIONS = [dict(angle=30.0), dict(angle=90.0), dict(angle=180.0), dict(angle=-90.0, expand=True),
                dict(angle=450.0), dict(angle=37.5, expand=True, fill=17), dict(angle=-12.0, center=[5, 9], fill=3),
                dict(angle=25.0, interpolation=v2.InterpolationMode.BILINEAR, fill=[10.0, 20.0, 30.0])]


@pytest.mark.parametrize("kwargs", V2_ROTATIONS, ids=[str(k) for k in V2_ROTATIONS])
def test_v2_rotate_of_images_and_masks_matches_torchvision(kwargs) -> None:
    mine, theirs = _sample("XYXY", "float32", seed=5)
    square_mine, square_theirs = (_sample("XYXY", "float32", seed=6)[i][0] for i in (0, 1))
    tv_kwargs = {k: (TV2.InterpolationMode(v.value) if k == "interpolation" else v) for k, v in kwargs.items()}
    mask_kwargs = _mask_kwargs(kwargs)
    square = (F.crop(square_mine, 0, 0, 40, 40), TF2.crop(square_theirs, 0, 0, 40, 40))
    for got_in, exp_in in [(mine[0], theirs[0]), square,
                           (F.to_dtype(mine[0], ember.float32, scale=True),
                            TF2.to_dtype(theirs[0], torch.float32, scale=True))]:
        _same_sample([F.rotate(got_in, **kwargs)], [TF2.rotate(exp_in, **tv_kwargs)], f"image {kwargs}", grid=True)
    _same_sample([F.rotate(mine[1], **mask_kwargs)], [TF2.rotate(theirs[1], **mask_kwargs)], f"mask {kwargs}",
                 grid=True)
    box_kwargs = {k: v for k, v in mask_kwargs.items() if k != "fill"}
    for fmt, dtype in CASES:
        boxes_mine, boxes_theirs = (side[2] for side in _sample(fmt, dtype))
        _same_sample([F.rotate(boxes_mine, **box_kwargs)], [TF2.rotate(boxes_theirs, **box_kwargs)],
                     f"boxes {fmt} {dtype} {kwargs}")


@pytest.mark.parametrize("kwargs", [dict(angle=20.0, translate=[3, -2], scale=1.2, shear=[5.0, 2.0]),
                                    dict(angle=0.0, translate=[0, 0], scale=1.0, shear=[15.0, 0.0], center=[0, 0]),
                                    dict(angle=-40.0, translate=[1, 4], scale=0.8, shear=7.0, fill=99),
                                    dict(angle=60.0, translate=[2, 2], scale=1.0, shear=[0.0, 0.0],
                                         interpolation=v2.InterpolationMode.BILINEAR, fill=[1.0, 2.0, 3.0])])
def test_v2_affine_of_images_and_masks_matches_torchvision(kwargs) -> None:
    mine, theirs = _sample("XYXY", "float32", seed=7)
    tv_kwargs = {k: (TV2.InterpolationMode(v.value) if k == "interpolation" else v) for k, v in kwargs.items()}
    _same_sample([F.affine(mine[0], **kwargs)], [TF2.affine(theirs[0], **tv_kwargs)], f"image {kwargs}", grid=True)
    floats = (F.to_dtype(mine[0], ember.float32, scale=True), TF2.to_dtype(theirs[0], torch.float32, scale=True))
    _same_sample([F.affine(floats[0], **kwargs)], [TF2.affine(floats[1], **tv_kwargs)], f"float {kwargs}", grid=True)
    mask_kwargs = _mask_kwargs(kwargs)
    _same_sample([F.affine(mine[1], **mask_kwargs)], [TF2.affine(theirs[1], **mask_kwargs)], f"mask {kwargs}",
                 grid=True)
    box_kwargs = _mask_kwargs(kwargs)
    box_kwargs.pop("fill", None)
    for fmt, dtype in CASES:
        boxes_mine, boxes_theirs = (side[2] for side in _sample(fmt, dtype))
        _same_sample([F.affine(boxes_mine, **box_kwargs)], [TF2.affine(boxes_theirs, **box_kwargs)],
                     f"boxes {fmt} {dtype} {kwargs}")


def test_v2_random_rotation_affine_and_photometric_with_fixed_params(monkeypatch) -> None:
    mine, theirs = _sample("XYXY", "float32", seed=8)
    _fix(monkeypatch, "RandomRotation", dict(angle=33.0))
    fill = {tv_tensors.Mask: 255, "others": 7}
    _same_sample(v2.RandomRotation(40, fill=fill, expand=True)(mine),
                 TV2.RandomRotation(40, fill={TVT.Mask: 255, "others": 7}, expand=True)(theirs), "rotation")
    _fix(monkeypatch, "RandomAffine", dict(angle=-8.0, translate=(2, 3), scale=1.1, shear=(4.0, -1.0)))
    _same_sample(v2.RandomAffine(10)(mine), TV2.RandomAffine(10)(theirs), "affine")
    for name, args in [("RandomInvert", ()), ("RandomPosterize", (3,)), ("RandomSolarize", (100,)),
                       ("RandomAdjustSharpness", (2.0,)), ("RandomAutocontrast", ()), ("RandomEqualize", ()),
                       ("RandomGrayscale", ())]:
        _same_sample(getattr(v2, name)(*args, p=1.0)(mine), getattr(TV2, name)(*args, p=1.0)(theirs), name)
    _same_sample(v2.Grayscale(3)(mine), TV2.Grayscale(3)(theirs), "grayscale")


@pytest.mark.parametrize("fmt", list(BOXES))
def test_sanitize_bounding_boxes_matches_torchvision(fmt) -> None:
    boxes = np.asarray(BOXES[fmt] + [[5, 5, 5, 9] if fmt == "XYXY" else [5, 5, 0, 4]], dtype=np.float32)
    labels = np.arange(len(boxes))
    masks = np.random.default_rng(0).integers(0, 2, (len(boxes), 40, 60), dtype=np.uint8)
    mine = {"boxes": tv_tensors.BoundingBoxes(ember.from_numpy(boxes), format=fmt, canvas_size=(40, 60)),
            "labels": ember.from_numpy(labels), "masks": tv_tensors.Mask(ember.from_numpy(masks)), "id": 3}
    theirs = {"boxes": TVT.BoundingBoxes(torch.from_numpy(boxes), format=fmt, canvas_size=(40, 60)),
              "labels": torch.from_numpy(labels), "masks": TVT.Mask(torch.from_numpy(masks)), "id": 3}
    for kwargs in (dict(), dict(min_size=15.0), dict(min_area=300.0)):
        got, expected = v2.SanitizeBoundingBoxes(**kwargs)(mine), TV2.SanitizeBoundingBoxes(**kwargs)(theirs)
        assert got["id"] == 3 and got["labels"].tolist() == expected["labels"].tolist(), kwargs
        _same_sample([got["boxes"], got["masks"]], [expected["boxes"], expected["masks"]], f"{fmt} {kwargs}")
    with pytest.raises(ValueError, match="must match the number of labels"):
        v2.SanitizeBoundingBoxes()({"boxes": mine["boxes"], "labels": ember.zeros(2)})


def test_detection_recipe_transforms_with_fixed_params_match(monkeypatch) -> None:
    mine, theirs = _sample("XYXY", "float32", seed=9)
    _fix(monkeypatch, "RandomZoomOut", dict(padding=[7, 3, 11, 5]))
    fill = {tv_tensors.Mask: 0, "others": 123}
    _same_sample(v2.RandomZoomOut(fill=fill, p=1.0)(mine),
                 TV2.RandomZoomOut(fill={TVT.Mask: 0, "others": 123}, p=1.0)(theirs), "zoom out")
    base = dict(brightness_factor=1.1, contrast_factor=0.8, saturation_factor=1.3, hue_factor=0.03)
    for contrast_before in (True, False):
        params = dict(base, contrast_before=contrast_before)
        monkeypatch.setattr(v2.RandomPhotometricDistort, "make_params",
                            lambda self, flat, p=params: dict(p, channel_permutation=[2, 0, 1]))
        monkeypatch.setattr(TV2.RandomPhotometricDistort, "make_params",
                            lambda self, flat, p=params: dict(p, channel_permutation=torch.tensor([2, 0, 1])))
        got, expected = v2.RandomPhotometricDistort()(mine), TV2.RandomPhotometricDistort()(theirs)
        _same_sample(got, expected, "photometric distort")
        floats = (F.to_dtype(mine[0], ember.float32, scale=True), TF2.to_dtype(theirs[0], torch.float32, scale=True))
        np.testing.assert_allclose(v2.RandomPhotometricDistort()(floats[0]).numpy(),
                                   TV2.RandomPhotometricDistort()(floats[1]).numpy(), atol=1e-5)
    monkeypatch.setattr(v2.RandomChannelPermutation, "make_params", lambda self, flat: dict(permutation=[1, 2, 0]))
    monkeypatch.setattr(TV2.RandomChannelPermutation, "make_params",
                        lambda self, flat: dict(permutation=torch.tensor([1, 2, 0])))
    _same_sample(v2.RandomChannelPermutation()(mine), TV2.RandomChannelPermutation()(theirs), "permutation")


def test_zoom_out_draws_stay_in_the_side_range() -> None:
    ember.manual_seed(3)
    t = v2.RandomZoomOut(side_range=(1.5, 3.0))
    for _ in range(200):
        left, top, right, bottom = t.make_params([ember.zeros(3, 20, 30)])["padding"]
        assert min(left, top, right, bottom) >= 0
        assert 1.5 * 30 - 1 <= 30 + left + right <= 90 and 1.5 * 20 - 1 <= 20 + top + bottom <= 60


@pytest.mark.parametrize("name,args", [("adjust_saturation", (1.3,)), ("adjust_saturation", (0.2,)),
                                       ("adjust_contrast", (0.8,)), ("adjust_contrast", (1.7,)),
                                       ("adjust_hue", (0.03,)), ("adjust_hue", (-0.4,)), ("rgb_to_grayscale", (3,)),
                                       ("adjust_brightness", (1.2,))])
def test_v2_colour_kernels_are_v2s(name, args) -> None:
    """v2 rewrote grey, blend and HSV (fused multiply-adds, 1/6 instead of /6): pixel-equal to v2, not only v1."""
    array = np.random.default_rng(11).integers(0, 256, (2, 3, 20, 30), dtype=np.uint8)
    for x in (array, array.astype(np.float32) / 255):
        got = getattr(F, name)(tv_tensors.Image(ember.from_numpy(x.copy())), *args)
        expected = getattr(TF2, name)(TVT.Image(torch.from_numpy(x.copy())), *args)
        _same_sample([got], [expected], f"{name}{args} {x.dtype}")
