"""ember.vision.transforms against torchvision's tensor path (and Pillow's for PIL images)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.vision.transforms as T
from ember.vision.transforms import functional as F

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402

try:
    tv = import_torchvision()
    TF = tv.transforms.functional
except ImportError:  # pragma: no cover
    tv = TF = None
needs_tv = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


def _image(h: int = 37, w: int = 53, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _chw(img: np.ndarray):
    return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))


def _hwc(t) -> np.ndarray:
    return t.numpy().transpose(1, 2, 0)


@needs_tv
@pytest.mark.parametrize("size,mode,antialias", [
    ((16, 20), "bilinear", True), ((25, 61), "bilinear", True), ((9, 70), "bilinear", True),
    ((16, 20), "bilinear", False), ((80, 90), "bilinear", False), ((16, 20), "bicubic", True),
    ((50, 70), "bicubic", False), ((16, 20), "nearest", True), ((50, 77), "nearest", True),
    ((16, 20), "nearest-exact", True), ([20], "bilinear", True),
])
def test_resize_matches_torchvision(size, mode, antialias) -> None:
    img = _image()
    interp = F.InterpolationMode(mode)
    tv_interp = tv.transforms.InterpolationMode(mode)
    expected = TF.resize(_chw(img), size, interpolation=tv_interp, antialias=antialias)
    got = F.resize(img, size, interpolation=interp, antialias=antialias)
    assert got.shape == _hwc(expected).shape and got.dtype == np.uint8
    # torch's uint8 kernels use fixed-point weights and round between the two passes: off by one at most
    diff = np.abs(got.astype(int) - _hwc(expected).astype(int))
    assert diff.max() <= 1 and diff.mean() < 0.2, (diff.max(), diff.mean())
    floats = img.transpose(2, 0, 1).astype(np.float32) / 255
    expected_f = TF.resize(torch.from_numpy(floats), size, interpolation=tv_interp, antialias=antialias).numpy()
    got_f = F.resize(ember.from_numpy(floats), size, interpolation=interp, antialias=antialias).numpy()
    np.testing.assert_allclose(got_f, expected_f, atol=2e-5 if mode != "bicubic" else 1e-4)


@needs_tv
def test_resize_of_pil_images_uses_pillow_and_agrees_with_the_array_path() -> None:
    Image = pytest.importorskip("PIL.Image")
    img = _image(64, 48)
    pil = Image.fromarray(img)
    ours = F.resize(pil, (20, 30))
    theirs = TF.resize(pil, [20, 30])
    assert isinstance(ours, Image.Image)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    # Pillow's fixed-point resampler and the NumPy path agree to one grey level
    assert np.abs(np.asarray(ours).astype(int) - F.resize(img, (20, 30)).astype(int)).max() <= 1
    assert F.resize(pil, 24).size == TF.resize(pil, 24).size


@needs_tv
def test_resize_shorter_edge_and_max_size() -> None:
    img = _image(30, 50)
    assert F.resize(img, 10).shape == (10, 16, 3)
    assert F.resize(img, 10, max_size=12).shape[:2] == tuple(TF.resize(_chw(img), 10, max_size=12).shape[1:])
    with pytest.raises(ValueError, match="max_size"):
        F.resize(img, 10, max_size=8)


@needs_tv
def test_geometry_matches_torchvision() -> None:
    img = _image(20, 30)
    t = _chw(img)
    np.testing.assert_array_equal(F.center_crop(img, 11), _hwc(TF.center_crop(t, [11])))
    np.testing.assert_array_equal(F.center_crop(img, (25, 40)), _hwc(TF.center_crop(t, [25, 40])))
    np.testing.assert_array_equal(F.crop(img, -3, 25, 10, 9), _hwc(TF.crop(t, -3, 25, 10, 9)))
    for mode in ("constant", "edge", "reflect", "symmetric"):
        np.testing.assert_array_equal(F.pad(img, [1, 2, 3, 4], padding_mode=mode),
                                      _hwc(TF.pad(t, [1, 2, 3, 4], padding_mode=mode)), err_msg=mode)
    np.testing.assert_array_equal(F.pad(img, 2, fill=7), _hwc(TF.pad(t, [2], fill=7)))
    np.testing.assert_array_equal(F.hflip(img), _hwc(TF.hflip(t)))
    np.testing.assert_array_equal(F.vflip(img), _hwc(TF.vflip(t)))
    np.testing.assert_array_equal(F.resized_crop(img, 2, 3, 12, 20, [8, 8]),
                                  _hwc(TF.resized_crop(t, 2, 3, 12, 20, [8, 8], antialias=True)).astype(np.uint8))
    batch = ember.from_numpy(np.stack([img.transpose(2, 0, 1)] * 2))
    assert tuple(F.center_crop(batch, 8).shape) == (2, 3, 8, 8)


@needs_tv
@pytest.mark.parametrize("fn,factor", [("adjust_brightness", 1.7), ("adjust_brightness", 0.3),
                                       ("adjust_contrast", 1.6), ("adjust_contrast", 0.2),
                                       ("adjust_saturation", 2.0), ("adjust_saturation", 0.0),
                                       ("adjust_hue", 0.2), ("adjust_hue", -0.45), ("adjust_hue", 0.0)])
def test_colour_adjustments_match_torchvision(fn: str, factor: float) -> None:
    img = _image(12, 17)
    expected = _hwc(getattr(TF, fn)(_chw(img), factor))
    got = getattr(F, fn)(img, factor)
    np.testing.assert_array_equal(got, expected)  # pixel-equal (adjust_hue rescales as convert_image_dtype does)
    floats = img.transpose(2, 0, 1).astype(np.float32) / 255
    expected_f = getattr(TF, fn)(torch.from_numpy(floats), factor).numpy()
    np.testing.assert_allclose(getattr(F, fn)(ember.from_numpy(floats), factor).numpy(), expected_f, atol=1e-5)


@needs_tv
def test_colour_adjustments_of_pil_images_match_torchvision() -> None:
    Image = pytest.importorskip("PIL.Image")
    pil = Image.fromarray(_image(12, 17))
    for fn, factor in (("adjust_brightness", 1.3), ("adjust_contrast", 0.5), ("adjust_saturation", 1.5),
                       ("adjust_hue", 0.1)):
        np.testing.assert_array_equal(np.asarray(getattr(F, fn)(pil, factor)),
                                      np.asarray(getattr(TF, fn)(pil, factor)), err_msg=fn)
    np.testing.assert_array_equal(np.asarray(F.rgb_to_grayscale(pil)), np.asarray(TF.rgb_to_grayscale(pil)))


@needs_tv
def test_conversions_and_normalize_match_torchvision() -> None:
    img = _image(5, 6)
    np.testing.assert_array_equal(T.ToTensor()(img).numpy(), tv.transforms.ToTensor()(img).numpy())
    np.testing.assert_array_equal(T.PILToTensor()(img).numpy(), _chw(img).numpy())
    x = T.ToTensor()(img)
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    np.testing.assert_allclose(T.Normalize(mean, std)(x).numpy(),
                               tv.transforms.Normalize(mean, std)(torch.from_numpy(x.numpy())).numpy(), atol=1e-6)
    np.testing.assert_allclose(F.convert_image_dtype(ember.from_numpy(_chw(img).numpy())).numpy(),
                               TF.convert_image_dtype(_chw(img), torch.float32).numpy(), atol=1e-7)
    np.testing.assert_array_equal(F.convert_image_dtype(x, ember.uint8).numpy(),
                                  TF.convert_image_dtype(torch.from_numpy(x.numpy()), torch.uint8).numpy())
    np.testing.assert_array_equal(F.rgb_to_grayscale(img, 3), _hwc(TF.rgb_to_grayscale(_chw(img), 3)))


@needs_tv
def test_weights_preset_matches_torchvision() -> None:
    Image = pytest.importorskip("PIL.Image")
    from ember.vision.models import ResNet50_Weights

    img = _image(300, 260, seed=3)
    ours = ResNet50_Weights.IMAGENET1K_V2.transforms()
    theirs = tv.models.ResNet50_Weights.IMAGENET1K_V2.transforms()
    assert ours.resize_size == theirs.resize_size == [232] and ours.crop_size == [224]
    np.testing.assert_allclose(ours(ember.from_numpy(_chw(img).numpy())).numpy(), theirs(_chw(img)).numpy(),
                               atol=2.5 / 255 / 0.224)  # one grey level of uint8 rounding, normalized
    np.testing.assert_allclose(ours(Image.fromarray(img)).numpy(), theirs(Image.fromarray(img)).numpy(), atol=1e-6)
    out = ours(img)  # NumPy HWC
    assert tuple(out.shape) == (3, 224, 224) and out.dtype == ember.float32


def test_random_crop_with_padding_is_a_window_of_the_padded_image() -> None:
    ember.manual_seed(0)
    img = _image(32, 32)
    padded = F.pad(img, 4)
    seen = set()
    for _ in range(20):
        out = T.RandomCrop(32, padding=4)(img)
        assert out.shape == (32, 32, 3)
        hits = [(i, j) for i in range(9) for j in range(9) if np.array_equal(padded[i:i + 32, j:j + 32], out)]
        assert hits, "the crop is not a window of the padded image"
        seen.add(hits[0])
    assert len(seen) > 5
    small = _image(5, 6)
    assert T.RandomCrop(8, pad_if_needed=True)(small).shape == (8, 8, 3)
    with pytest.raises(ValueError, match="larger than input image size"):
        T.RandomCrop(8)(small)


def test_random_resized_crop_params_follow_scale_and_ratio() -> None:
    ember.manual_seed(1)
    img = np.zeros((100, 120, 3), np.uint8)
    for _ in range(200):
        top, left, h, w = T.RandomResizedCrop.get_params(img, (0.08, 1.0), (3 / 4, 4 / 3))
        assert 0 <= top <= 100 - h and 0 <= left <= 120 - w
        area = h * w / (100 * 120)
        assert 0.07 <= area <= 1.0 and (3 / 4 - 0.05 <= w / h <= 4 / 3 + 0.05 or (h, w) == (100, 120))
    assert T.RandomResizedCrop(24)(img).shape == (24, 24, 3)
    # impossible ratio: falls back to a centre crop clamped to the ratio range
    assert T.RandomResizedCrop.get_params(np.zeros((10, 100, 3)), (0.9, 1.0), (1.0, 1.0))[2:] == (10, 10)


def test_flips_and_color_jitter_use_ember_random_state() -> None:
    img = _image(8, 9)
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=1.0)(img), img[:, ::-1])
    np.testing.assert_array_equal(T.RandomHorizontalFlip(p=0.0)(img), img)
    np.testing.assert_array_equal(T.RandomVerticalFlip(p=1.0)(img), img[::-1])
    jitter = T.ColorJitter(brightness=0.5, contrast=0.4, saturation=0.3, hue=0.1)
    ember.manual_seed(5)
    first = jitter(img)
    ember.manual_seed(5)
    order, b, c, s, h = T.ColorJitter.get_params(jitter.brightness, jitter.contrast, jitter.saturation, jitter.hue)
    assert 0.5 <= b <= 1.5 and 0.6 <= c <= 1.4 and 0.7 <= s <= 1.3 and -0.1 <= h <= 0.1
    expected = img
    for index in order:
        expected = [F.adjust_brightness, F.adjust_contrast, F.adjust_saturation, F.adjust_hue][index](
            expected, [b, c, s, h][index])
    np.testing.assert_array_equal(first, expected)
    assert T.ColorJitter().brightness is None
    with pytest.raises(ValueError, match="hue"):
        T.ColorJitter(hue=0.7)


def test_compose_pipeline_on_numpy_and_errors() -> None:
    pipeline = T.Compose([T.RandomResizedCrop(16), T.RandomHorizontalFlip(), T.ColorJitter(0.2, 0.2, 0.2),
                          T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    out = pipeline(_image(40, 30))
    assert tuple(out.shape) == (3, 16, 16) and out.dtype == ember.float32
    with pytest.raises(TypeError, match="PIL Image, a NumPy array"):
        F.resize([[1, 2]], 4)
    with pytest.raises(ValueError, match="not non-negative"):
        F.adjust_brightness(_image(), -1)
