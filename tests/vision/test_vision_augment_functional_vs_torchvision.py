"""ember.vision.transforms.functional's augmentation functions against torchvision 0.28's own code run on torch.

uint8 tensors must be pixel-equal, float32 within 1e-6, float64 within 1e-12; PIL images must be equal to
what torchvision's PIL path gives; NumPy HWC images must give the tensor path's pixels.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.vision.transforms import functional as F

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402
from cpu_rounding import assert_same_up_to_cpu_rounding  # noqa: E402

try:
    tv = import_torchvision()
    TF = tv.transforms.functional
except ImportError:  # pragma: no cover
    tv = TF = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


def _uint8(shape: tuple, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def _smooth_uint8(shape: tuple, seed: int = 0) -> np.ndarray:
    """A uint8 image with structure (gradients + noise), so interpolation weights matter."""
    rng = np.random.default_rng(seed)
    h, w = shape[-2:]
    yy, xx = np.mgrid[0:h, 0:w]
    base = 127 + 100 * np.sin(xx / 3.0 + rng.uniform(0, 6)) * np.cos(yy / 4.0)
    return np.clip(base + rng.normal(0, 20, shape), 0, 255).astype(np.uint8)


def _both(array: np.ndarray):
    return ember.from_numpy(array.copy()), torch.from_numpy(array.copy())


def _check(got, expected, what: str = "", grid: bool = False) -> None:
    """Bit-equal to torchvision (floats to 1e-6/1e-12); `grid`: ops that sample through torchvision's float32 grid,
    whose rounding depends on the CPU's BLAS (tests/vision/cpu_rounding.py)."""
    got = got.numpy() if hasattr(got, "numpy") else np.asarray(got)
    expected = expected.numpy()
    if grid:
        assert_same_up_to_cpu_rounding(got, expected, what)
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype, (what, got.shape, expected.shape, got.dtype)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, atol=1e-12 if got.dtype == np.float64 else 1e-6, rtol=0,
                                   err_msg=what)
    else:
        mismatches = int((got != expected).sum())
        assert mismatches == 0, f"{what}: {mismatches} of {got.size} pixels differ"


def _images(shape=(3, 23, 31), seed=0):
    """uint8 CHW, a uint8 batch, float32 and float64 versions."""
    u8 = _smooth_uint8(shape, seed)
    batch = np.stack([_smooth_uint8(shape, seed + 1), _smooth_uint8(shape, seed + 2)])
    return {"uint8": u8, "batch": batch, "float32": u8.astype(np.float32) / 255,
            "float64": u8.astype(np.float64) / 255}


# ------------------------------------------------------------------------------------------------- geometry
ROTATIONS = [
    dict(angle=30.0), dict(angle=-47.5, interpolation="bilinear"), dict(angle=90), dict(angle=180.0),
    dict(angle=33.3, expand=True), dict(angle=-71.0, expand=True, interpolation="bilinear"),
    dict(angle=15.0, center=[3, 5]), dict(angle=200.0, fill=[10.0, 120.0, 250.0]),
    dict(angle=12.0, interpolation="bilinear", fill=[77.0]), dict(angle=45.0, expand=True, fill=[255.0, 0.0, 9.0]),
]


@pytest.mark.parametrize("kwargs", ROTATIONS, ids=[str(k) for k in ROTATIONS])
def test_rotate_matches_torchvision(kwargs) -> None:
    for kind, array in _images().items():
        kw = dict(kwargs)
        mode = kw.pop("interpolation", "nearest")
        fill = kw.pop("fill", None)
        if fill is not None and kind != "uint8" and kind != "batch":
            fill = [f / 255 for f in fill]
        mine, theirs = _both(array)
        expected = TF.rotate(theirs, interpolation=tv.transforms.InterpolationMode(mode), fill=fill, **kw)
        got = F.rotate(mine, interpolation=F.InterpolationMode(mode), fill=fill, **kw)
        _check(got, expected, f"{kind} {kwargs}", grid=True)


AFFINES = [
    dict(angle=0.0, translate=[3, -2], scale=1.0, shear=[0.0, 0.0]),
    dict(angle=25.0, translate=[1, 4], scale=1.3, shear=[10.0, 0.0]),
    dict(angle=-60.0, translate=[0, 0], scale=0.7, shear=[-12.0, 20.0], interpolation="bilinear"),
    dict(angle=10.0, translate=[-5, 2], scale=0.9, shear=7.0, center=[0, 0]),
    dict(angle=0.0, translate=[0, 0], scale=1.0, shear=[16.7, 0.0], center=[0, 0], fill=[128.0, 0.0, 255.0]),
    dict(angle=135.0, translate=[2, 2], scale=1.1, shear=[5.0, -5.0], interpolation="bilinear", fill=[60.0]),
    dict(angle=0.0, translate=[0, 0], scale=2.0, shear=[0.0, 0.0]),  # samples on half-pixels: rounding ties
]


@pytest.mark.parametrize("kwargs", AFFINES, ids=[str(k) for k in AFFINES])
def test_affine_matches_torchvision(kwargs) -> None:
    for kind, array in _images(seed=3).items():
        kw = dict(kwargs)
        mode = kw.pop("interpolation", "nearest")
        fill = kw.pop("fill", None)
        if fill is not None and kind in ("float32", "float64"):
            fill = [f / 255 for f in fill]
        mine, theirs = _both(array)
        expected = TF.affine(theirs, interpolation=tv.transforms.InterpolationMode(mode), fill=fill, **kw)
        got = F.affine(mine, interpolation=F.InterpolationMode(mode), fill=fill, **kw)
        _check(got, expected, f"{kind} {kwargs}", grid=True)


PERSPECTIVES = [
    ([[0, 0], [30, 0], [30, 22], [0, 22]], [[3, 2], [27, 1], [29, 20], [1, 21]], "bilinear", None),
    ([[0, 0], [30, 0], [30, 22], [0, 22]], [[6, 4], [25, 0], [30, 22], [4, 18]], "nearest", None),
    ([[0, 0], [30, 0], [30, 22], [0, 22]], [[0, 3], [28, 0], [26, 22], [2, 19]], "bilinear", [200.0, 20.0, 90.0]),
    ([[2, 1], [29, 3], [28, 21], [1, 20]], [[0, 0], [30, 0], [30, 22], [0, 22]], "nearest", [5.0]),
]


@pytest.mark.parametrize("start,end,mode,fill", PERSPECTIVES)
def test_perspective_matches_torchvision(start, end, mode, fill) -> None:
    assert F._get_perspective_coeffs(start, end) == pytest.approx(TF._get_perspective_coeffs(start, end), abs=1e-5)
    for kind, array in _images(seed=5).items():
        f = [v / 255 for v in fill] if fill is not None and kind in ("float32", "float64") else fill
        mine, theirs = _both(array)
        expected = TF.perspective(theirs, start, end, tv.transforms.InterpolationMode(mode), f)
        got = F.perspective(mine, start, end, F.InterpolationMode(mode), f)
        _check(got, expected, f"{kind} {end} {mode}", grid=True)


@pytest.mark.parametrize("mode,fill", [("bilinear", None), ("nearest", None), ("bilinear", [30.0, 60.0, 90.0])])
def test_elastic_transform_matches_torchvision(mode, fill) -> None:
    displacement = np.random.default_rng(7).uniform(-0.15, 0.15, (1, 23, 31, 2)).astype(np.float32)
    for kind, array in _images(seed=7).items():
        f = [v / 255 for v in fill] if fill is not None and kind in ("float32", "float64") else fill
        mine, theirs = _both(array)
        expected = TF.elastic_transform(theirs, torch.from_numpy(displacement), tv.transforms.InterpolationMode(mode),
                                        f)
        got = F.elastic_transform(mine, ember.from_numpy(displacement), F.InterpolationMode(mode), f)
        _check(got, expected, f"{kind} {mode}", grid=True)


def test_affine_matrix_helpers_match_torchvision() -> None:
    cases = [([0.0, 0.0], 30.0, [2.0, -1.0], 1.2, [5.0, -3.0]), ([3.5, -2.0], -110.0, [0.0, 0.0], 0.5, [0.0, 40.0])]
    for args in cases:
        for inverted in (True, False):
            assert F._get_inverse_affine_matrix(*args, inverted=inverted) == pytest.approx(
                TF._get_inverse_affine_matrix(*args, inverted=inverted), abs=1e-15)


def test_five_and_ten_crop_match_torchvision() -> None:
    array = _uint8((3, 20, 27))
    mine, theirs = _both(array)
    for size in (7, [9, 12], (20, 27)):
        for got, expected in zip(F.five_crop(mine, size), TF.five_crop(theirs, size)):
            _check(got, expected, f"five {size}")
        for vertical in (False, True):
            got_all, expected_all = F.ten_crop(mine, size, vertical), TF.ten_crop(theirs, size, vertical)
            assert len(got_all) == len(expected_all) == 10
            for got, expected in zip(got_all, expected_all):
                _check(got, expected, f"ten {size} {vertical}")
    with pytest.raises(ValueError, match="bigger than input size"):
        F.five_crop(mine, 21)


# ---------------------------------------------------------------------------------------------- pixel values
@pytest.mark.parametrize("name,args", [
    ("invert", ()), ("autocontrast", ()), ("adjust_sharpness", (0.0,)), ("adjust_sharpness", (0.3,)),
    ("adjust_sharpness", (1.7,)), ("adjust_sharpness", (3.9,)), ("adjust_gamma", (0.4,)), ("adjust_gamma", (2.2, 1.3)),
    ("adjust_gamma", (1.0, 0.5)), ("solarize", (0.5,)),
])
def test_value_functions_match_torchvision_on_every_dtype(name, args) -> None:
    for kind, array in _images(seed=11).items():
        call_args = args
        if name == "solarize" and kind in ("uint8", "batch"):
            call_args = (128,)
        mine, theirs = _both(array)
        _check(getattr(F, name)(mine, *call_args), getattr(TF, name)(theirs, *call_args), f"{name}{args} {kind}")


@pytest.mark.parametrize("bits", [0, 1, 3, 4, 7, 8])
def test_posterize_matches_torchvision(bits) -> None:
    array = _uint8((2, 3, 9, 11), seed=bits)
    mine, theirs = _both(array)
    _check(F.posterize(mine, bits), TF.posterize(theirs, bits), f"bits {bits}")


def test_equalize_matches_torchvision_including_degenerate_histograms() -> None:
    rng = np.random.default_rng(3)
    cases = {
        "random": _uint8((3, 17, 19)),
        "smooth": _smooth_uint8((3, 30, 40)),
        "batch": _uint8((2, 3, 8, 8), seed=4),
        "constant": np.full((1, 9, 9), 77, dtype=np.uint8),  # step 0: unchanged
        "two levels": rng.choice(np.array([10, 200], dtype=np.uint8), (3, 12, 12)),
        "narrow": rng.integers(100, 104, (1, 16, 16)).astype(np.uint8),
    }
    for what, array in cases.items():
        mine, theirs = _both(array)
        _check(F.equalize(mine), TF.equalize(theirs), what)


def test_autocontrast_of_constant_channels_is_identity() -> None:
    array = np.stack([np.full((6, 6), 40, np.uint8), _uint8((6, 6)), np.full((6, 6), 255, np.uint8)])
    mine, theirs = _both(array)
    _check(F.autocontrast(mine), TF.autocontrast(theirs), "constant channels")


@pytest.mark.parametrize("kernel,sigma", [(3, None), (5, 1.0), ([3, 7], [0.8, 2.5]), (9, 4.0), ([11, 1], [3.0, 0.5])])
def test_gaussian_blur_matches_torchvision(kernel, sigma) -> None:
    for kind, array in _images(seed=13).items():
        mine, theirs = _both(array)
        # grid=True: torch's float32 convolution sums in a CPU-dependent order (tests/vision/cpu_rounding.py)
        _check(F.gaussian_blur(mine, kernel, sigma), TF.gaussian_blur(theirs, kernel, sigma), f"{kind}", grid=True)


def test_erase_matches_torchvision_and_inplace_writes_through() -> None:
    array = _uint8((3, 10, 12))
    value = np.array([1.0, 2.0, 3.0], dtype=np.float32)[:, None, None]
    mine, theirs = _both(array)
    _check(F.erase(mine, 2, 3, 4, 5, ember.from_numpy(value)), TF.erase(theirs, 2, 3, 4, 5, torch.from_numpy(value)))
    assert (mine.numpy() == array).all()  # not in place
    F.erase(mine, 0, 0, 2, 2, ember.from_numpy(value), inplace=True)
    assert mine.numpy()[:, :2, :2].tolist() == [[[1, 1], [1, 1]], [[2, 2], [2, 2]], [[3, 3], [3, 3]]]


def test_numpy_hwc_images_give_the_tensor_paths_pixels() -> None:
    chw = _smooth_uint8((3, 21, 25), seed=17)
    hwc = chw.transpose(1, 2, 0).copy()
    tensor = ember.from_numpy(chw.copy())
    calls = [
        lambda x: F.rotate(x, 37.0, interpolation=F.InterpolationMode.BILINEAR, expand=True, fill=[9.0, 8.0, 7.0]),
        lambda x: F.affine(x, 12.0, [2, 1], 1.1, [4.0, 0.0]),
        lambda x: F.perspective(x, [[0, 0], [24, 0], [24, 20], [0, 20]], [[2, 1], [22, 0], [24, 19], [1, 18]]),
        F.equalize, F.autocontrast, F.invert, lambda x: F.posterize(x, 3), lambda x: F.solarize(x, 99),
        lambda x: F.adjust_sharpness(x, 2.0), lambda x: F.adjust_gamma(x, 0.7), lambda x: F.gaussian_blur(x, 5, 1.2),
    ]
    for call in calls:
        from_numpy, from_tensor = call(hwc), call(tensor).numpy()
        assert isinstance(from_numpy, np.ndarray)
        np.testing.assert_array_equal(from_numpy, from_tensor.transpose(1, 2, 0))


def test_get_image_num_channels_and_errors() -> None:
    assert F.get_image_num_channels(ember.zeros(3, 4, 5)) == 3
    assert F.get_image_num_channels(ember.zeros(4, 5)) == 1
    assert F.get_image_num_channels(np.zeros((4, 5, 3), np.uint8)) == 3
    with pytest.raises(TypeError, match="uint8"):
        F.posterize(ember.zeros(3, 4, 4), 2)
    with pytest.raises(TypeError, match="uint8"):
        F.equalize(ember.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="between 0 and 8"):
        F.posterize(ember.zeros(3, 4, 4, dtype=ember.uint8), 9)
    with pytest.raises(TypeError, match="Threshold"):
        F.solarize(ember.zeros(3, 4, 4), 2.0)
    with pytest.raises(ValueError, match="unsupported with Tensor input"):
        F.rotate(ember.zeros(3, 4, 4), 10.0, interpolation=F.InterpolationMode.BICUBIC)
    with pytest.raises(ValueError, match="cannot broadcast"):
        F.rotate(ember.zeros(3, 4, 4), 10.0, fill=[1.0, 2.0])
    with pytest.raises(ValueError, match="odd and positive"):
        F.gaussian_blur(ember.zeros(3, 4, 4), 4)
    with pytest.raises(ValueError, match="displacement shape"):
        F.elastic_transform(ember.zeros(3, 4, 4), ember.zeros(1, 4, 5, 2))


# ------------------------------------------------------------------------------------------------ PIL images
def test_pil_images_match_torchvision_pil_path() -> None:
    Image = pytest.importorskip("PIL.Image")
    rgb = Image.fromarray(_smooth_uint8((3, 26, 33), seed=19).transpose(1, 2, 0).copy())
    gray = rgb.convert("L")
    start, end = [[0, 0], [32, 0], [32, 25], [0, 25]], [[3, 2], [30, 0], [31, 24], [2, 22]]
    calls = [
        ("rotate", (25.0,), dict(fill=[10, 20, 30])), ("rotate", (-60.0,), dict(expand=True, center=None)),
        ("rotate", (45.0,), dict(interpolation=2)),
        ("affine", (20.0, [2, -3], 1.2, [8.0, 3.0]), dict(fill=5)),
        ("affine", (0.0, [0, 0], 1.0, [14.0, 0.0]), dict(center=[0, 0])),
        ("perspective", (start, end), dict(fill=[1, 2, 3])),
        ("invert", (), {}), ("posterize", (3,), {}), ("solarize", (100,), {}), ("adjust_sharpness", (2.5,), {}),
        ("autocontrast", (), {}), ("equalize", (), {}), ("adjust_gamma", (0.6, 1.1), {}),
        ("gaussian_blur", (5, 1.3), {}), ("to_grayscale", (3,), {}),
    ]
    for name, args, kwargs in calls:
        for img in (rgb, gray):
            if name in ("rotate", "affine", "perspective") and img is gray and "fill" in kwargs:
                kwargs = {**kwargs, "fill": 7}
            got, expected = getattr(F, name)(img, *args, **kwargs), getattr(TF, name)(img, *args, **kwargs)
            assert isinstance(got, Image.Image) and got.mode == expected.mode, (name, got.mode, expected.mode)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(expected), err_msg=f"{name} {img.mode}")
    assert F.get_image_num_channels(rgb) == 3 and F.get_image_num_channels(gray) == 1
    displacement = np.random.default_rng(1).uniform(-0.1, 0.1, (1, 26, 33, 2)).astype(np.float32)
    got = F.elastic_transform(rgb, ember.from_numpy(displacement))
    expected = TF.elastic_transform(rgb, torch.from_numpy(displacement))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
