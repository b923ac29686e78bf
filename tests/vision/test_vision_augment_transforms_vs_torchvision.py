"""ember.vision.transforms' augmentation classes and autoaugment policies against torchvision 0.28.

Random transforms are compared with their random parameters fixed (the same ``get_params`` result, or the
same recorded operation sequence, given to both), and their parameter draws are checked statistically
against the documented distributions and against torchvision's own draws.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.vision.transforms as T
from ember.vision.transforms import autoaugment as AA
from ember.vision.transforms import functional as F

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402
from cpu_rounding import assert_same_up_to_cpu_rounding  # noqa: E402

try:
    tv = import_torchvision()
    TT = tv.transforms
except ImportError:  # pragma: no cover
    tv = TT = None
pytestmark = pytest.mark.skipif(tv is None, reason="torchvision (test extra) is not installed")


def _image(shape=(3, 24, 30), seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    h, w = shape[-2:]
    yy, xx = np.mgrid[0:h, 0:w]
    base = 120 + 90 * np.sin(xx / 4.0) * np.cos(yy / 5.0)
    return np.clip(base + rng.normal(0, 25, shape), 0, 255).astype(np.uint8)


def _pair(array: np.ndarray):
    return ember.from_numpy(array.copy()), torch.from_numpy(array.copy())


def _same(got, expected, what="", grid: bool = False) -> None:
    """Bit-equal to torchvision (floats to 1e-6); `grid`: outputs sampled through torchvision's float32 grid or
    blurred by its float32 convolution, whose rounding depends on the CPU (tests/vision/cpu_rounding.py)."""
    got, expected = got.numpy(), expected.numpy()
    if grid:
        assert_same_up_to_cpu_rounding(got, expected, what)
        return
    assert got.shape == expected.shape and got.dtype == expected.dtype, what
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, expected, atol=1e-6, rtol=0, err_msg=what)
    else:
        np.testing.assert_array_equal(got, expected, err_msg=what)


def _fix(monkeypatch, name: str, value) -> None:
    """Make both libraries' ``<name>.get_params`` return ``value``."""
    monkeypatch.setattr(getattr(T, name), "get_params", staticmethod(lambda *a, **k: value))
    monkeypatch.setattr(getattr(TT, name), "get_params", staticmethod(lambda *a, **k: value))


# ------------------------------------------------------------------------------- fixed parameters: same pixels
@pytest.mark.parametrize("kwargs,angle", [
    (dict(degrees=30), 17.5), (dict(degrees=(-10, 50), expand=True, fill=(9, 99, 199)), 41.0),
    (dict(degrees=5, interpolation=T.InterpolationMode.BILINEAR, center=(4, 6), fill=128), -3.25),
])
def test_random_rotation_with_fixed_angle_matches(monkeypatch, kwargs, angle) -> None:
    _fix(monkeypatch, "RandomRotation", angle)
    tv_kwargs = dict(kwargs)
    if "interpolation" in kwargs:
        tv_kwargs["interpolation"] = TT.InterpolationMode(kwargs["interpolation"].value)
    for array in (_image(), _image((2, 3, 24, 30), seed=1)):
        mine, theirs = _pair(array)
        _same(T.RandomRotation(**kwargs)(mine), TT.RandomRotation(**tv_kwargs)(theirs), str(kwargs), grid=True)


def test_random_affine_with_fixed_params_matches(monkeypatch) -> None:
    _fix(monkeypatch, "RandomAffine", (12.0, (3, -2), 1.15, (8.0, -4.0)))
    mine, theirs = _pair(_image(seed=2))
    _same(T.RandomAffine(20, fill=(1, 2, 3))(mine), TT.RandomAffine(20, fill=(1, 2, 3))(theirs), grid=True)
    floats = _image(seed=3).astype(np.float32) / 255
    mine, theirs = _pair(floats)
    bilinear = dict(interpolation=T.InterpolationMode.BILINEAR)
    _same(T.RandomAffine(20, center=(0, 0), **bilinear)(mine),
          TT.RandomAffine(20, center=(0, 0), interpolation=TT.InterpolationMode.BILINEAR)(theirs), grid=True)


def test_random_perspective_and_erasing_and_blur_with_fixed_params_match(monkeypatch) -> None:
    start, end = [[0, 0], [29, 0], [29, 23], [0, 23]], [[4, 2], [27, 1], [28, 20], [1, 22]]
    _fix(monkeypatch, "RandomPerspective", (start, end))
    mine, theirs = _pair(_image(seed=4))
    _same(T.RandomPerspective(p=1.0, fill=77)(mine), TT.RandomPerspective(p=1.0, fill=77)(theirs), grid=True)
    _fix(monkeypatch, "GaussianBlur", 1.3)
    _same(T.GaussianBlur((5, 3))(mine), TT.GaussianBlur((5, 3))(theirs), grid=True)  # float32 convolution sums
    value = np.array([0.5, -1.0, 2.0], dtype=np.float32)[:, None, None]
    monkeypatch.setattr(T.RandomErasing, "get_params", staticmethod(lambda *a, **k: (3, 4, 5, 6,
                                                                                     ember.from_numpy(value))))
    monkeypatch.setattr(TT.RandomErasing, "get_params", staticmethod(lambda *a, **k: (3, 4, 5, 6,
                                                                                      torch.from_numpy(value))))
    floats_mine, floats_theirs = _pair(_image(seed=5).astype(np.float32) / 255)
    _same(T.RandomErasing(p=1.0)(floats_mine), TT.RandomErasing(p=1.0)(floats_theirs))


def test_elastic_transform_with_fixed_displacement_matches(monkeypatch) -> None:
    displacement = np.random.default_rng(0).uniform(-0.1, 0.1, (1, 24, 30, 2)).astype(np.float32)
    monkeypatch.setattr(T.ElasticTransform, "get_params", staticmethod(lambda *a: ember.from_numpy(displacement)))
    monkeypatch.setattr(TT.ElasticTransform, "get_params", staticmethod(lambda *a: torch.from_numpy(displacement)))
    mine, theirs = _pair(_image(seed=6))
    _same(T.ElasticTransform(fill=40)(mine), TT.ElasticTransform(fill=40)(theirs), grid=True)


@pytest.mark.parametrize("name,args", [("RandomInvert", ()), ("RandomPosterize", (3,)), ("RandomSolarize", (140,)),
                                       ("RandomAdjustSharpness", (2.0,)), ("RandomAutocontrast", ()),
                                       ("RandomEqualize", ())])
def test_probability_one_colour_transforms_match(name, args) -> None:
    mine, theirs = _pair(_image(seed=7))
    _same(getattr(T, name)(*args, p=1.0)(mine), getattr(TT, name)(*args, p=1.0)(theirs), name)
    assert (getattr(T, name)(*args, p=0.0)(mine).numpy() == mine.numpy()).all()


def test_five_ten_crop_and_linear_transformation_match() -> None:
    mine, theirs = _pair(_image(seed=8))
    for got, expected in zip(T.TenCrop((10, 12), vertical_flip=True)(mine), TT.TenCrop((10, 12), True)(theirs)):
        _same(got, expected)
    assert len(T.FiveCrop(9)(mine)) == 5
    rng = np.random.default_rng(0)
    n = 2 * 3 * 4
    matrix, mean = rng.normal(size=(n, n)).astype(np.float32), rng.normal(size=n).astype(np.float32)
    data = rng.normal(size=(5, 2, 3, 4)).astype(np.float32)
    got = T.LinearTransformation(ember.from_numpy(matrix), ember.from_numpy(mean))(ember.from_numpy(data))
    expected = TT.LinearTransformation(torch.from_numpy(matrix), torch.from_numpy(mean))(torch.from_numpy(data))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="square"):
        T.LinearTransformation(ember.zeros(3, 4), ember.zeros(3))
    with pytest.raises(ValueError, match="incompatible shape"):
        T.LinearTransformation(ember.from_numpy(matrix), ember.from_numpy(mean))(ember.zeros(3, 3, 3))


def test_constructor_checks_match_torchvision() -> None:
    for bad in [lambda m: m.RandomRotation(-1), lambda m: m.RandomAffine(5, translate=(0.2, 1.5)),
                lambda m: m.RandomAffine(5, scale=(0.0, 1.0)), lambda m: m.GaussianBlur(4),
                lambda m: m.GaussianBlur(3, sigma=(2.0, 1.0)), lambda m: m.RandomErasing(value="noise"),
                lambda m: m.RandomErasing(p=1.5), lambda m: m.RandomAffine(5, shear=(1, 2, 3))]:
        with pytest.raises(Exception) as theirs:
            bad(TT)
        with pytest.raises(type(theirs.value)):
            bad(T)
    with pytest.raises(TypeError):
        T.ElasticTransform(alpha=50)  # an int, as torchvision refuses


# ------------------------------------------------------------------------------------ parameter statistics
def test_rotation_and_affine_params_follow_their_ranges() -> None:
    ember.manual_seed(0)
    angles = np.array([T.RandomRotation.get_params([-10.0, 30.0]) for _ in range(3000)])
    assert angles.min() >= -10 and angles.max() <= 30 and abs(angles.mean() - 10) < 0.6
    draws = [T.RandomAffine.get_params([-5.0, 5.0], [0.1, 0.2], [0.8, 1.2], [-3.0, 3.0, -7.0, 7.0], [50, 40])
             for _ in range(3000)]
    tx = np.array([d[1][0] for d in draws])
    ty = np.array([d[1][1] for d in draws])
    scale = np.array([d[2] for d in draws])
    shear_y = np.array([d[3][1] for d in draws])
    assert tx.dtype.kind == "i" and np.abs(tx).max() <= 5 and np.abs(ty).max() <= 8
    assert set(tx.tolist()) == set(range(-5, 6))  # round(uniform(-5, 5)) reaches both ends
    assert 0.8 <= scale.min() and scale.max() <= 1.2 and abs(scale.mean() - 1.0) < 0.01
    assert np.abs(shear_y).max() <= 7 and shear_y.std() > 3.5  # U(-7, 7): std 4.04
    assert T.RandomAffine.get_params([0.0, 0.0], None, None, None, [10, 10]) == (0.0, (0, 0), 1.0, (0.0, 0.0))


def test_perspective_params_match_torchvision_ranges() -> None:
    ember.manual_seed(1)
    torch.manual_seed(1)
    mine = np.array([T.RandomPerspective.get_params(40, 30, 0.5)[1] for _ in range(2000)])
    theirs = np.array([TT.RandomPerspective.get_params(40, 30, 0.5)[1] for _ in range(2000)])
    assert T.RandomPerspective.get_params(40, 30, 0.5)[0] == TT.RandomPerspective.get_params(40, 30, 0.5)[0]
    # the same support for each corner coordinate (discrete uniforms), and means within sampling noise
    for corner in range(4):
        for axis in range(2):
            assert set(mine[:, corner, axis].tolist()) == set(theirs[:, corner, axis].tolist())
    np.testing.assert_allclose(mine.mean(axis=0), theirs.mean(axis=0), atol=0.35)


def test_erasing_params_follow_scale_and_ratio() -> None:
    ember.manual_seed(2)
    img = ember.zeros(3, 60, 80)
    areas, ratios = [], []
    for _ in range(1000):
        i, j, h, w, v = T.RandomErasing.get_params(img, scale=(0.05, 0.2), ratio=(0.5, 2.0), value=[0.0])
        assert 0 <= i <= 60 - h and 0 <= j <= 80 - w and tuple(v.shape) == (1, 1, 1)
        areas.append(h * w / (60 * 80))
        ratios.append(h / w)
    areas, ratios = np.array(areas), np.array(ratios)
    assert 0.04 < areas.min() and areas.max() < 0.22 and abs(areas.mean() - 0.125) < 0.01
    assert 0.4 < ratios.min() and ratios.max() < 2.4 and abs(np.log(ratios).mean()) < 0.05
    _, _, h, w, noise = T.RandomErasing.get_params(img, scale=(0.05, 0.2), ratio=(0.5, 2.0), value=None)
    assert tuple(noise.shape) == (3, h, w) and noise.dtype == ember.float32
    whole = T.RandomErasing.get_params(img, scale=(1.0, 1.0), ratio=(1.0, 1.0))  # never fits: the image itself
    assert whole[:4] == (0, 0, 60, 80) and whole[4] is img


def test_elastic_displacement_statistics_match_torchvision() -> None:
    ember.manual_seed(3)
    torch.manual_seed(3)
    mine = np.stack([T.ElasticTransform.get_params([50.0, 30.0], [5.0, 5.0], [40, 60]).numpy() for _ in range(40)])
    theirs = np.stack([TT.ElasticTransform.get_params([50.0, 30.0], [5.0, 5.0], [40, 60]).numpy()
                       for _ in range(40)])
    assert mine.shape == theirs.shape == (40, 1, 40, 60, 2)
    for axis in range(2):  # the x field is scaled by alpha_x / width, the y field by alpha_y / height
        ratio = mine[..., axis].std() / theirs[..., axis].std()
        assert 0.9 < ratio < 1.1, (axis, ratio)


def test_blur_sigma_and_apply_probability() -> None:
    ember.manual_seed(4)
    sigmas = np.array([T.GaussianBlur.get_params(0.1, 2.0) for _ in range(2000)])
    assert 0.1 <= sigmas.min() and sigmas.max() <= 2.0 and abs(sigmas.mean() - 1.05) < 0.04
    img = ember.from_numpy(_image(seed=9))
    flips = sum(int((T.RandomInvert(p=0.3)(img).numpy() != img.numpy()).any()) for _ in range(2000))
    assert abs(flips / 2000 - 0.3) < 0.035  # binomial sd 0.010
    ember.manual_seed(5)
    first = T.RandomAffine(30, translate=(0.1, 0.1))(img).numpy()
    ember.manual_seed(5)
    assert (T.RandomAffine(30, translate=(0.1, 0.1))(img).numpy() == first).all()


def test_random_choice_and_order_are_random_transforms() -> None:
    assert isinstance(T.RandomChoice([T.RandomInvert()]), T.RandomTransforms)
    assert isinstance(T.RandomOrder([T.RandomInvert()]), T.RandomTransforms)
    with pytest.raises(TypeError, match="sequence"):
        T.RandomTransforms(T.RandomInvert())


def test_pil_images_through_the_random_transforms(monkeypatch) -> None:
    Image = pytest.importorskip("PIL.Image")
    pil = Image.fromarray(_image(seed=10).transpose(1, 2, 0).copy())
    _fix(monkeypatch, "RandomAffine", (12.0, (3, -2), 1.15, (8.0, -4.0)))
    np.testing.assert_array_equal(np.asarray(T.RandomAffine(20, fill=5)(pil)),
                                  np.asarray(TT.RandomAffine(20, fill=5)(pil)))
    _fix(monkeypatch, "RandomRotation", 33.0)
    np.testing.assert_array_equal(np.asarray(T.RandomRotation(40, expand=True)(pil)),
                                  np.asarray(TT.RandomRotation(40, expand=True)(pil)))
    assert isinstance(T.TrivialAugmentWide()(pil), Image.Image) and isinstance(T.AugMix()(pil), Image.Image)


# ---------------------------------------------------------------------------------------------- autoaugment
def test_policies_and_magnitude_bins_are_torchvisions() -> None:
    for policy in T.AutoAugmentPolicy:
        theirs = TT.AutoAugment(TT.AutoAugmentPolicy(policy.value))
        mine = T.AutoAugment(policy)
        assert mine.policies == theirs.policies
        space, tv_space = mine._augmentation_space(10, (33, 47)), theirs._augmentation_space(10, (33, 47))
        assert list(space) == list(tv_space)
        for key in space:
            assert space[key][1] == tv_space[key][1]
            np.testing.assert_array_equal(space[key][0], tv_space[key][0].numpy(), err_msg=key)
    pairs = [(T.RandAugment(num_magnitude_bins=31), TT.RandAugment(num_magnitude_bins=31), (31, (40, 28))),
             (T.RandAugment(num_magnitude_bins=17), TT.RandAugment(num_magnitude_bins=17), (17, (50, 20))),
             (T.TrivialAugmentWide(), TT.TrivialAugmentWide(), (31,)),
             (T.AugMix(all_ops=False), TT.AugMix(all_ops=False), (10, (30, 45))),
             (T.AugMix(), TT.AugMix(), (10, (9, 9)))]
    for mine, theirs, args in pairs:
        space, tv_space = mine._augmentation_space(*args), theirs._augmentation_space(*args)
        assert list(space) == list(tv_space)
        for key in space:
            assert space[key][1] == tv_space[key][1]
            np.testing.assert_array_equal(space[key][0], tv_space[key][0].numpy(), err_msg=key)


OPS = [("ShearX", 0.25), ("ShearX", -0.3), ("ShearY", 0.17), ("TranslateX", 7.6), ("TranslateY", -9.0),
       ("Rotate", 23.0), ("Rotate", -11.5), ("Brightness", 0.4), ("Color", -0.6), ("Contrast", 0.7),
       ("Sharpness", 0.8), ("Sharpness", -0.9), ("Posterize", 5.0), ("Solarize", 140.0), ("AutoContrast", 0.0),
       ("Equalize", 0.0), ("Invert", 0.0), ("Identity", 0.0)]


GRID_OPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}  # sampled through the affine grid


@pytest.mark.parametrize("op,magnitude", OPS)
def test_each_operation_matches_torchvision(op, magnitude) -> None:
    mine, theirs = _pair(_image(seed=11))
    for mode, fill in [("nearest", None), ("bilinear", [10.0, 20.0, 30.0])]:
        got = AA._apply_op(mine, op, magnitude, F.InterpolationMode(mode), fill)
        expected = tv.transforms.autoaugment._apply_op(theirs, op, magnitude, TT.InterpolationMode(mode), fill)
        _same(got, expected, f"{op} {magnitude} {mode}", grid=op in GRID_OPS)
    Image = pytest.importorskip("PIL.Image")
    pil = Image.fromarray(_image(seed=12).transpose(1, 2, 0).copy())
    got = AA._apply_op(pil, op, magnitude, F.InterpolationMode.NEAREST, None)
    expected = tv.transforms.autoaugment._apply_op(pil, op, magnitude, TT.InterpolationMode.NEAREST, None)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected), err_msg=f"PIL {op}")


@pytest.mark.parametrize("policy", list(T.AutoAugmentPolicy))
def test_auto_augment_with_fixed_choices_matches(monkeypatch, policy) -> None:
    mine, theirs = _pair(_image(seed=13))
    for policy_id in range(0, 25, 3):
        params = (policy_id, [0.05, 0.5], [0, 1])
        monkeypatch.setattr(T.AutoAugment, "get_params", staticmethod(
            lambda n, p=params: (p[0], ember.tensor(p[1]), ember.tensor(p[2]))))
        monkeypatch.setattr(TT.AutoAugment, "get_params", staticmethod(
            lambda n, p=params: (p[0], torch.tensor(p[1]), torch.tensor(p[2]))))
        _same(T.AutoAugment(policy, fill=[5, 6, 7])(mine),
              TT.AutoAugment(TT.AutoAugmentPolicy(policy.value), fill=[5, 6, 7])(theirs), f"{policy} {policy_id}",
              grid=True)


def _record_ops(monkeypatch):
    calls = []
    real = AA._apply_op

    def recording(img, op_name, magnitude, interpolation, fill):
        calls.append((op_name, magnitude))
        return real(img, op_name, magnitude, interpolation, fill)

    monkeypatch.setattr(AA, "_apply_op", recording)
    return calls


def test_rand_augment_draws_uniform_ops_at_the_fixed_magnitude(monkeypatch) -> None:
    calls = _record_ops(monkeypatch)
    img = ember.from_numpy(_image((3, 20, 22), seed=14))
    ember.manual_seed(6)
    aug = T.RandAugment(num_ops=2, magnitude=9)
    for _ in range(700):
        aug(img)
    assert len(calls) == 1400
    space = TT.RandAugment()._augmentation_space(31, (20, 22))
    counts = {name: 0 for name in space}
    for name, magnitude in calls:
        counts[name] += 1
        bins, signed = space[name]
        expected = float(bins[9]) if bins.ndim > 0 else 0.0
        assert magnitude in ((expected, -expected) if signed else (expected,)), (name, magnitude)
    assert min(counts.values()) > 1400 / 14 * 0.6 and max(counts.values()) < 1400 / 14 * 1.4, counts
    negative = sum(1 for name, m in calls if space[name][1] and m < 0)
    signed_total = sum(1 for name, _ in calls if space[name][1])
    assert abs(negative / signed_total - 0.5) < 0.06


def test_trivial_augment_draws_op_and_magnitude_uniformly(monkeypatch) -> None:
    calls = _record_ops(monkeypatch)
    img = ember.from_numpy(_image((3, 16, 16), seed=15))
    ember.manual_seed(7)
    for _ in range(800):
        T.TrivialAugmentWide()(img)
    space = TT.TrivialAugmentWide()._augmentation_space(31)
    seen_rotate = set()
    for name, magnitude in calls:
        bins, signed = space[name]
        values = {float(b) for b in bins} if bins.ndim > 0 else {0.0}
        allowed = values | {-v for v in values} if signed else values
        assert magnitude in allowed, (name, magnitude)
        if name == "Rotate":
            seen_rotate.add(abs(magnitude))
    assert len({name for name, _ in calls}) == 14 and len(seen_rotate) > 20


def test_aug_mix_mixes_chains_with_dirichlet_weights_as_torchvision(monkeypatch) -> None:
    """With the Dirichlet draws fixed and every chain step replaced by the same deterministic operation, the
    mixture must equal torchvision's (this checks the weighting, the shapes and the final cast)."""
    m = [[0.3, 0.7]]
    weights = [[0.2, 0.5, 0.3]]

    def fake_dirichlet(params, library):
        return library.tensor(m if params.shape[-1] == 2 else weights, dtype=library.float32)

    monkeypatch.setattr(T.AugMix, "_sample_dirichlet", lambda self, p: fake_dirichlet(p, ember))
    monkeypatch.setattr(TT.AugMix, "_sample_dirichlet", lambda self, p: fake_dirichlet(p, torch))
    monkeypatch.setattr(AA, "_apply_op", lambda img, *a, **k: F.invert(img))
    monkeypatch.setattr(tv.transforms.autoaugment, "_apply_op",
                        lambda img, *a, **k: tv.transforms.functional.invert(img))
    for array in (_image(seed=16), _image(seed=17).astype(np.float32) / 255):
        mine, theirs = _pair(array)
        _same(T.AugMix(chain_depth=1)(mine), TT.AugMix(chain_depth=1)(theirs))
        inverted = (255 - array.astype(np.float32)) if array.dtype == np.uint8 else 1 - array
        independent = (np.float32(0.3) * array + np.float32(0.7 * 0.2) * inverted + np.float32(0.7 * 0.5) * inverted
                       + np.float32(0.7 * 0.3) * inverted).astype(array.dtype)
        assert np.abs(T.AugMix(chain_depth=1)(mine).numpy().astype(float) - independent).max() <= 1


def test_aug_mix_dirichlet_draws_are_normalized_and_centered() -> None:
    ember.manual_seed(8)
    draws = np.stack([T.AugMix(alpha=1.0)._sample_dirichlet(ember.tensor([[1.0, 1.0, 1.0]])).numpy()[0]
                      for _ in range(3000)])
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(draws.mean(axis=0), [1 / 3] * 3, atol=0.02)
    assert abs(draws[:, 0].var() - 1 / 18) < 0.006  # Dirichlet(1,1,1) marginal: Beta(1, 2), variance 1/18
    assert math.isclose(float(T.AugMix()._PARAMETER_MAX), 10.0)


def test_tensors_on_the_standin_cuda_device_come_back_on_it() -> None:
    """The pixel math runs on host copies taken explicitly; results return to the input's device."""
    array = _image(seed=20)
    with ember.testing.standin_cuda():
        img = ember.from_numpy(array.copy()).to("cuda")
        outputs = [F.rotate(img, 30.0), F.affine(img, 5.0, [1, 2], 1.1, [3.0, 0.0]), F.equalize(img),
                   F.resize(img, 12), T.AutoAugment()(img), T.AugMix()(img), T.RandomErasing(p=1.0)(img),
                   T.ElasticTransform()(img), T.GaussianBlur(3)(img)]
        assert all(out.device.type == "cuda" for out in outputs)
        np.testing.assert_array_equal(outputs[0].cpu().numpy(), F.rotate(ember.from_numpy(array.copy()), 30.0).numpy())
