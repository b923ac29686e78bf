"""Convolution, batch/group norm and 2-D pooling keep a channels-last input's layout, as PyTorch's CPU kernels.

Found by labml's DDPM U-Net: its attention block permutes back to NCHW (channels-last strides), the next
ResidualBlock's conv gave a row-major result in ember and a channels-last one in torch, so dropout (which
draws in memory order) dropped other elements under the same seed and the losses parted at step 0.
Strides, values and the seeded dropout mask are compared with torch 2.13.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _ops(F, lib):
    w = lib.tensor(np.random.default_rng(1).standard_normal((6, 4, 3, 3)), dtype=lib.float32)
    wt = lib.tensor(np.random.default_rng(2).standard_normal((4, 5, 2, 2)), dtype=lib.float32)
    return {
        "conv2d": lambda x: F.conv2d(x, w, padding=1),
        "conv2d_stride2": lambda x: F.conv2d(x, w, stride=2),
        "conv_transpose2d": lambda x: F.conv_transpose2d(x, wt, stride=2),
        "batch_norm_train": lambda x: F.batch_norm(x, None, None, training=True),
        "group_norm": lambda x: F.group_norm(x, 2),
        "max_pool2d": lambda x: F.max_pool2d(x, 2),
        "max_pool2d_indices": lambda x: F.max_pool2d(x, 2, return_indices=True)[1],
        "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
        "layer_norm": lambda x: F.layer_norm(x, (6,)),  # row-major in both
        "instance_norm": lambda x: F.instance_norm(x),  # row-major in both
    }


NAMES = list(_ops(TF, torch))


@pytest.mark.parametrize("layout", ["nchw", "permuted_nhwc", "channels_last", "batch1_tokens"])
@pytest.mark.parametrize("name", NAMES)
def test_result_strides_and_values_match_torch(name, layout):
    data = np.random.default_rng(0).standard_normal((2, 6, 6, 4)).astype(np.float32)  # NHWC
    xe, xt = ember.tensor(data), torch.tensor(data)
    if layout == "batch1_tokens":  # einops 'b h (x y) d -> b (h d) x y' at batch 1: strides (C, 1, W*C, C)
        xe, xt = (t[:1].reshape(1, 1, 36, 4).permute(0, 1, 3, 2).reshape(1, 4, 6, 6) for t in (xe, xt))
        assert xe.stride() == xt.stride() == (4, 1, 24, 4)  # channels-last by is_contiguous, not by c10's strides rule
    elif layout == "nchw":
        xe, xt = xe.permute(0, 3, 1, 2).contiguous(), xt.permute(0, 3, 1, 2).contiguous()
    elif layout == "permuted_nhwc":
        xe, xt = xe.permute(0, 3, 1, 2), xt.permute(0, 3, 1, 2)
    else:
        xe = xe.permute(0, 3, 1, 2).contiguous().contiguous(memory_format=ember.channels_last)
        xt = xt.permute(0, 3, 1, 2).contiguous().contiguous(memory_format=torch.channels_last)
    ye, yt = _ops(EF, ember)[name](xe), _ops(TF, torch)[name](xt)
    assert ye.stride() == yt.stride(), f"{name}/{layout}: strides {ye.stride()} vs torch {yt.stride()}"
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=2e-5, atol=2e-5)


def test_channels_last_weight_gives_channels_last_conv_result():
    x = np.random.default_rng(0).standard_normal((2, 4, 5, 5)).astype(np.float32)
    me, mt = ember.nn.Conv2d(4, 3, 3), torch.nn.Conv2d(4, 3, 3)
    me.to(memory_format=ember.channels_last)
    mt.to(memory_format=torch.channels_last)
    assert me(ember.tensor(x)).stride() == mt(torch.tensor(x)).stride() == (27, 1, 9, 3)


def test_seeded_dropout_after_conv_of_permuted_input_matches_torch():
    data = np.random.default_rng(3).standard_normal((2, 4, 4, 8)).astype(np.float32)
    w = np.random.default_rng(4).standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.1
    masks = []
    for lib, F in ((torch, TF), (ember, EF)):
        x = lib.tensor(data).permute(0, 3, 1, 2)  # what `.permute(0, 2, 1).view(b, c, h, w)` after attention gives
        lib.manual_seed(0)
        y = F.dropout(F.conv2d(x, lib.tensor(w), padding=1), 0.5)
        masks.append((y.detach().numpy() == 0))
    np.testing.assert_array_equal(masks[0], masks[1])


def test_seeded_dropout_after_conv_of_batch1_token_map_matches_torch():
    """lucidrains' ScalableViT at batch 1: attention output (1, h, HW, d) rearranged to (1, h*d, H, W), a 1x1
    conv, then dropout. torch's conv asks c10's strides rule, which calls this layout row-major (batch stride
    C < H*W*C), so the mask is drawn row-major; ember returned a channels-last result and dropped others."""
    data = np.random.default_rng(7).standard_normal((1, 2, 16, 4)).astype(np.float32)
    w = np.random.default_rng(8).standard_normal((6, 8, 1, 1)).astype(np.float32)
    masks = []
    for lib, F in ((torch, TF), (ember, EF)):
        x = lib.tensor(data).permute(0, 1, 3, 2).reshape(1, 8, 4, 4)
        lib.manual_seed(0)
        y = F.dropout(F.conv2d(x, lib.tensor(w)), 0.5)
        masks.append((y.detach().numpy() == 0, y.stride()))
    assert masks[0][1] == masks[1][1] == (96, 16, 4, 1)
    np.testing.assert_array_equal(masks[0][0], masks[1][0])


def test_gradients_unchanged_by_layout():
    data = np.random.default_rng(5).standard_normal((2, 5, 5, 4))
    xe = ember.tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    we = ember.tensor(np.random.default_rng(6).standard_normal((3, 4, 3, 3)), requires_grad=True)
    wt = torch.tensor(we.detach().numpy(), requires_grad=True)
    EF.max_pool2d(EF.group_norm(EF.conv2d(xe.permute(0, 3, 1, 2), we), 1), 2).pow(2).sum().backward()
    TF.max_pool2d(TF.group_norm(TF.conv2d(xt.permute(0, 3, 1, 2), wt), 1), 2).pow(2).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-10, atol=1e-12)
