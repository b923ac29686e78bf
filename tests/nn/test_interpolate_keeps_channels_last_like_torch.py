"""``F.interpolate`` of a channels-last input writes a channels-last result, as PyTorch's upsampling kernels do.

DINO's (and DINOv2's) position-embedding resize is ``interpolate(pe.reshape(1, n, n, d).permute(0, 3, 1, 2), ...)``
followed by ``.permute(0, 2, 3, 1).view(1, -1, d)``: that ``view`` only works when the result is channels-last.
Strides, values and gradients are compared with torch 2.13."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F

torch = pytest.importorskip("torch")

MODES = [("nearest", {}), ("nearest-exact", {}), ("bilinear", {"align_corners": False}),
         ("bilinear", {"align_corners": True}), ("bicubic", {"align_corners": False}), ("area", {}),
         ("bilinear", {"antialias": True}), ("bicubic", {"antialias": True})]


def _pair(shape, order):
    data = np.random.default_rng(0).standard_normal(shape)
    return (ember.tensor(data, requires_grad=True), torch.tensor(data, requires_grad=True), order)


@pytest.mark.parametrize("mode,kw", MODES)
@pytest.mark.parametrize("size", [(10, 12), (3, 2), (5, 6)])
def test_4d_channels_last_result_like_torch(mode, kw, size):
    e, t, order = _pair((2, 5, 6, 3), (0, 3, 1, 2))
    ye = F.interpolate(e.permute(order), size=size, mode=mode, **kw)
    yt = torch.nn.functional.interpolate(t.permute(order), size=size, mode=mode, **kw)
    assert ye.stride() == yt.stride()
    assert ye.is_contiguous(memory_format=ember.channels_last) and not ye.is_contiguous()
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (ye * ember.tensor(w)).sum().backward()
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_dino_position_embedding_resize_views():
    n, d = 7, 8
    pe = np.random.default_rng(2).standard_normal((1, 1 + n * n, d)).astype(np.float32)

    def resize(T, pe):
        patch = pe[:, 1:]
        out = T.nn.functional.interpolate(patch.reshape(1, n, n, d).permute(0, 3, 1, 2),
                                          scale_factor=(3.1 / n, 3.1 / n), mode="bicubic")
        return T.cat((pe[:, 0].unsqueeze(0), out.permute(0, 2, 3, 1).view(1, -1, d)), dim=1)

    got, want = resize(ember, ember.tensor(pe)), resize(torch, torch.tensor(pe))
    assert tuple(got.shape) == tuple(want.shape) == (1, 10, d)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "trilinear", "area"])
def test_5d_like_torch(mode):
    e, t, order = _pair((1, 4, 4, 4, 3), (0, 4, 1, 2, 3))
    ye = F.interpolate(e.permute(order), size=(6, 5, 8), mode=mode)
    yt = torch.nn.functional.interpolate(t.permute(order), size=(6, 5, 8), mode=mode)
    assert ye.stride() == yt.stride()  # channels_last_3d, but row-major for 'area' (adaptive_avg_pool3d)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_3d_and_row_major_inputs_stay_row_major(mode):
    e, t, order = _pair((2, 7, 3), (0, 2, 1))
    ye = F.interpolate(e.permute(order), size=14, mode=mode)
    yt = torch.nn.functional.interpolate(t.permute(order), size=14, mode=mode)
    assert ye.stride() == yt.stride() == (42, 14, 1)
    x = ember.randn(2, 3, 5, 6)
    assert F.interpolate(x, size=(10, 12), mode="bilinear").is_contiguous()
    one_channel = ember.randn(2, 5, 6, 1).permute(0, 3, 1, 2)  # both layouts at once: row-major, as torch
    assert F.interpolate(one_channel, size=(10, 12)).is_contiguous()
