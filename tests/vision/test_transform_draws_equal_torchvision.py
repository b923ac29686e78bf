"""Random transforms make torchvision's draws: with the same seed, ember's parameters and pixels equal
torchvision's (the real torchvision, run here on real torch)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import ember
import ember.vision.transforms as ET

torch = pytest.importorskip("torch")
torchvision_ref = pytest.importorskip("torchvision_ref")


@pytest.fixture(scope="module")
def TT():
    try:
        return torchvision_ref.import_torchvision().transforms
    except ImportError:
        pytest.skip("torchvision is not installed")


def _seed(seed: int) -> None:
    torch.manual_seed(seed)
    ember.manual_seed(seed)
    random.seed(seed)


def _image(seed: int = 0, shape=(3, 20, 24)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


PARAMS = {
    "RandomCrop": lambda T, img: T.RandomCrop.get_params(img, (11, 13)),
    "RandomResizedCrop": lambda T, img: T.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3]),
    "RandomResizedCrop_narrow": lambda T, img: T.RandomResizedCrop.get_params(img, [0.9, 1.0], [0.2, 0.3]),
    "ColorJitter": lambda T, img: [list(map(int, v)) if hasattr(v, "__iter__") else v
                                   for v in T.ColorJitter.get_params((0.6, 1.4), (0.7, 1.3), (0.5, 1.5), (-0.1, 0.1))],
    "RandomRotation": lambda T, img: T.RandomRotation.get_params([-30.0, 30.0]),
    "RandomAffine": lambda T, img: T.RandomAffine.get_params([-10.0, 10.0], [0.1, 0.2], [0.8, 1.2],
                                                             [-5.0, 5.0, -3.0, 3.0], [24, 20]),
    "RandomPerspective": lambda T, img: T.RandomPerspective.get_params(24, 20, 0.5),
    "RandomErasing": lambda T, img: T.RandomErasing.get_params(img, (0.02, 0.33), (0.3, 3.3), [0.0])[:4],
    "GaussianBlur": lambda T, img: T.GaussianBlur.get_params(0.1, 2.0),
    "AutoAugment": lambda T, img: [v if isinstance(v, int) else v.tolist() for v in T.AutoAugment.get_params(25)],
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(PARAMS))
def test_get_params_equal_torchvision(TT, name: str, seed: int) -> None:
    raw = _image(seed)
    _seed(seed)
    expected = PARAMS[name](TT, torch.from_numpy(raw))
    got = PARAMS[name](ET, ember.from_numpy(raw))
    assert got == expected
    np.testing.assert_array_equal(ember.rand(2).numpy(), torch.rand(2).numpy())  # the stream stays in step


def _pipelines(T):
    return {
        "cifar": T.Compose([T.RandomCrop(16, padding=4), T.RandomHorizontalFlip()]),
        "flips_gray": T.Compose([T.RandomVerticalFlip(0.3), T.RandomGrayscale(0.5), T.RandomHorizontalFlip(0.7)]),
        "apply_order_choice": T.Compose([T.RandomApply([T.RandomHorizontalFlip(1.0)], p=0.4),
                                         T.RandomOrder([T.RandomVerticalFlip(1.0), T.RandomCrop(18)]),
                                         T.RandomChoice([T.RandomHorizontalFlip(1.0), T.CenterCrop(10)], p=[0.3, 0.7])]),
        "erasing": T.Compose([T.ConvertImageDtype(torch.float32 if T.__name__.startswith("torchvision")
                                                  else ember.float32), T.RandomErasing(p=0.8, value="random")]),
        "pointwise": T.Compose([T.RandomInvert(0.5), T.RandomSolarize(128, 0.5), T.RandomPosterize(4, 0.5)]),
        "autoaugment": T.AutoAugment(),
        "randaugment": T.RandAugment(),
        "trivialaugment": T.TrivialAugmentWide(),
    }


@pytest.mark.parametrize("name", ["cifar", "flips_gray", "apply_order_choice", "erasing", "pointwise", "autoaugment",
                                  "randaugment", "trivialaugment"])
def test_pipelines_give_torchvisions_pixels(TT, name: str) -> None:
    theirs, ours = _pipelines(TT)[name], _pipelines(ET)[name]
    for seed in range(6):
        raw = _image(seed)
        _seed(seed)
        expected = theirs(torch.from_numpy(raw)).numpy()
        random.seed(seed)  # Python's random module is shared by both libraries' RandomOrder/RandomChoice
        got = ours(ember.from_numpy(raw)).numpy()
        np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}")


def test_serial_loader_with_augmentation_equals_torch(TT) -> None:
    """A seeded DataLoader (no workers) over an augmenting dataset gives torch's batches, epoch after epoch."""
    images = np.random.default_rng(3).integers(0, 256, (10, 3, 12, 12), dtype=np.uint8)

    def batches(T, tv):
        crop = tv.Compose([tv.RandomCrop(8, padding=2), tv.RandomHorizontalFlip()])

        class Augmented(T.utils.data.Dataset):
            def __len__(self):
                return len(images)

            def __getitem__(self, i):
                return crop(T.from_numpy(images[i])), i

        loader = T.utils.data.DataLoader(Augmented(), batch_size=4, shuffle=True)
        return [[x.numpy(), y.numpy()] for _ in range(2) for x, y in loader]

    _seed(4)
    expected = batches(torch, TT)
    _seed(4)
    got = batches(ember, ET)
    assert len(got) == len(expected)
    for (gx, gy), (ex, ey) in zip(got, expected):
        np.testing.assert_array_equal(gy, ey)
        np.testing.assert_array_equal(gx, ex)


def _v2_pipelines(T):
    return {
        "crop_flip": T.Compose([T.RandomCrop(16, padding=4), T.RandomHorizontalFlip(), T.RandomVerticalFlip(0.3)]),
        "containers": T.Compose([T.RandomApply([T.RandomHorizontalFlip(1.0)], p=0.4),
                                 T.RandomOrder([T.RandomVerticalFlip(1.0), T.RandomCrop(18)]),
                                 T.RandomChoice([T.RandomHorizontalFlip(1.0), T.CenterCrop(10)], p=[0.3, 0.7])]),
        "photometric": T.Compose([T.RandomPhotometricDistort(p=0.7), T.RandomChannelPermutation()]),
        "zoom_rotate": T.Compose([T.RandomZoomOut(fill=0, p=0.9), T.RandomRotation(20)]),
        "resized_crop": T.RandomResizedCrop(12, antialias=True),
    }


@pytest.mark.parametrize("name", ["crop_flip", "containers", "photometric", "zoom_rotate", "resized_crop"])
def test_v2_pipelines_make_torchvisions_draws(TT, name: str) -> None:
    import ember.vision.transforms.v2 as ET2
    import importlib
    TT2 = importlib.import_module(TT.__name__ + ".v2")
    theirs, ours = _v2_pipelines(TT2)[name], _v2_pipelines(ET2)[name]
    for seed in range(5):
        raw = _image(seed)
        _seed(seed)
        expected = theirs(torch.from_numpy(raw)).numpy()
        random.seed(seed)
        got = ours(ember.from_numpy(raw)).numpy()
        assert got.shape == expected.shape, f"seed {seed}"
        if name in ("photometric", "zoom_rotate", "resized_crop"):  # interpolation may differ by one level
            assert np.abs(got.astype(int) - expected.astype(int)).max() <= 1, f"seed {seed}"
        else:
            np.testing.assert_array_equal(got, expected, err_msg=f"seed {seed}")
        np.testing.assert_array_equal(ember.rand(2).numpy(), torch.rand(2).numpy())
