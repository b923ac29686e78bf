"""Tensor crop/center_crop/pad/flip in ``transforms.functional`` are tensor ops, as torchvision's tensor path.

Found by labml's U-Net (``center_crop`` of the skip connection inside ``forward``): ember ran these on detached
NumPy copies, so the whole contracting path got no gradient through the skips. Compared with torchvision 0.28
run by torch: values, input gradients (float64), dtypes, and view semantics (a crop shares memory).
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.vision.transforms import functional as F

torch = pytest.importorskip("torch")
from torchvision_ref import import_torchvision  # noqa: E402

try:
    TF = import_torchvision().transforms.functional
except ImportError:  # pragma: no cover
    TF = None
pytestmark = pytest.mark.skipif(TF is None, reason="torchvision (test extra) is not installed")

CASES = [
    ("center_crop", lambda f, x: f.center_crop(x, [3, 4])),
    ("center_crop_larger", lambda f, x: f.center_crop(x, [9, 8])),  # pads with zeros first
    ("crop_inside", lambda f, x: f.crop(x, 1, 2, 3, 2)),
    ("crop_outside", lambda f, x: f.crop(x, -2, 3, 5, 6)),  # zero padding where the box leaves the image
    ("pad_constant", lambda f, x: f.pad(x, [1, 2, 3, 0], fill=0.5)),
    ("pad_edge", lambda f, x: f.pad(x, [2, 1], padding_mode="edge")),
    ("pad_reflect", lambda f, x: f.pad(x, 2, padding_mode="reflect")),
    ("pad_symmetric", lambda f, x: f.pad(x, [3, 1, 0, 2], padding_mode="symmetric")),
    ("pad_negative", lambda f, x: f.pad(x, [-1, 1, 0, -2])),
    ("hflip", lambda f, x: f.hflip(x)),
    ("vflip", lambda f, x: f.vflip(x)),
    ("five_crop", lambda f, x: f.five_crop(x, [2, 3])[3]),
    ("ten_crop", lambda f, x: f.ten_crop(x, 2)[7]),
]


@pytest.mark.parametrize("shape", [(2, 3, 5, 6), (3, 5, 6)])
@pytest.mark.parametrize("name,call", CASES, ids=[c[0] for c in CASES])
def test_values_and_gradients_match_torchvision(name, call, shape):
    data = np.random.default_rng(0).standard_normal(shape)
    xe = ember.tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    ye, yt = call(F, xe), call(TF, xt)
    assert tuple(ye.shape) == tuple(yt.shape)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=0, atol=1e-15)
    w = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (ye * ember.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    assert xe.grad is not None, f"{name}: no gradient reached the input"
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_uint8_pad_keeps_dtype_and_values(mode):
    data = np.random.default_rng(2).integers(0, 256, (3, 4, 5), dtype=np.uint8)
    ye = F.pad(ember.from_numpy(data.copy()), [2, 1, 1, 2], fill=7, padding_mode=mode)
    yt = TF.pad(torch.from_numpy(data.copy()), [2, 1, 1, 2], fill=7, padding_mode=mode)
    assert str(ye.dtype).split(".")[-1] == str(yt.dtype).split(".")[-1] == "uint8"
    np.testing.assert_array_equal(ye.numpy(), yt.numpy())


def test_crop_is_a_view_as_in_torchvision():
    xe, xt = ember.zeros(1, 4, 4), torch.zeros(1, 4, 4)
    F.center_crop(xe, 2).fill_(1.0)
    TF.center_crop(xt, 2).fill_(1.0)
    np.testing.assert_array_equal(xe.numpy(), xt.numpy())
    assert float(xe.sum()) == 4.0
