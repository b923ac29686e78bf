"""``ember.vision.utils.make_grid`` / ``save_image`` against torchvision's (the reference, test-only)."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.vision.utils as vutils

CASES = [
    ((5, 1, 4, 6), {}),
    ((5, 3, 4, 6), dict(nrow=2, padding=1, pad_value=0.5)),
    ((8, 3, 3, 3), dict(nrow=4)),  # no empty slot
    ((1, 3, 4, 4), {}),
    ((3, 4, 4), {}),
    ((4, 4), {}),
    ((7, 3, 2, 3), dict(normalize=True)),
    ((7, 3, 2, 3), dict(normalize=True, scale_each=True)),
    ((3, 2, 5, 5), dict(normalize=True, value_range=(-0.5, 0.5), nrow=3, padding=0)),
]


@pytest.fixture(scope="module")
def tvu():
    torch = pytest.importorskip("torch")
    from torchvision_ref import import_torchvision

    try:
        return torch, import_torchvision().utils
    except ImportError:
        pytest.skip("torchvision (the reference) is not installed")


@pytest.mark.parametrize("shape,kwargs", CASES)
def test_make_grid_matches_torchvision(tvu, shape, kwargs) -> None:
    torch, reference = tvu
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    want = reference.make_grid(torch.tensor(x), **kwargs).numpy()
    got = vutils.make_grid(ember.tensor(x), **kwargs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-7)


def test_make_grid_of_a_list_and_its_gradient() -> None:
    images = [ember.full((1, 2, 2), float(i), requires_grad=True) for i in range(3)]
    grid = vutils.make_grid(images, nrow=3, padding=1, pad_value=-1.0)
    assert grid.shape == (3, 4, 10)
    assert grid[0, 1, 1:].tolist() == [0, 0, -1, 1, 1, -1, 2, 2, -1]
    grid.sum().backward()
    assert images[2].grad.tolist() == [[[3.0, 3.0], [3.0, 3.0]]]  # each pixel feeds three channels


def test_save_image_writes_what_torchvision_writes(tvu, tmp_path) -> None:
    image = pytest.importorskip("PIL.Image")
    torch, reference = tvu
    x = np.random.default_rng(1).random((4, 3, 5, 7)).astype(np.float32)
    reference.save_image(torch.tensor(x), tmp_path / "want.png", nrow=2)
    vutils.save_image(ember.tensor(x), tmp_path / "got.png", nrow=2)
    want = np.asarray(image.open(tmp_path / "want.png"))
    np.testing.assert_array_equal(np.asarray(image.open(tmp_path / "got.png")), want)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="make_grid: expected images"):
        vutils.make_grid(ember.zeros(1, 1, 1, 2, 2))
    with pytest.raises(TypeError, match="value_range must be a tuple"):
        vutils.make_grid(ember.zeros(2, 1, 2, 2), normalize=True, value_range=[0, 1])
