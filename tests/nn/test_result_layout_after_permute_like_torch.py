"""Results of one-input elementwise ops, softmax, masked_fill, adaptive pooling and reflection padding are laid out
in memory as PyTorch's, for row-major, channels-last and permuted inputs.

Why it matters: ``dropout`` (and ``rand_like``) draw in memory order, so a seeded model whose GELU ran on a
permuted map (torch keeps the layout; ember's gelu kernel wrote row-major) or whose attention scores went through
``masked_fill`` (torch writes row-major; ember kept the permuted layout) dropped other elements than torch's.
Found by running lucidrains' vit-pytorch models against torch (docs/pytorch-compat.md, "models21").
Compared: which dims are outer in memory (strides of size-1 dims ignored), values, and the seeded dropout mask.
"""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as EF

torch = pytest.importorskip("torch")
TF = torch.nn.functional

OPS = {
    "gelu": lambda F, lib, x: F.gelu(x),
    "erf": lambda F, lib, x: lib.erf(x),
    "relu": lambda F, lib, x: F.relu(x),
    "softmax_dim1": lambda F, lib, x: x.softmax(1),
    "log_softmax_dim0": lambda F, lib, x: F.log_softmax(x, 0),
    "softmax_last": lambda F, lib, x: x.softmax(-1),
    "masked_fill": lambda F, lib, x: x.masked_fill(x > 0.5, -1.0),
    "adaptive_avg_pool2d": lambda F, lib, x: F.adaptive_avg_pool2d(x, 2),
    "pad_reflect": lambda F, lib, x: F.pad(x, (1, 1, 1, 1), mode="reflect"),
    "pad_replicate": lambda F, lib, x: F.pad(x, (1, 2, 0, 1), mode="replicate"),
}


def _layouts(lib, data):
    x = lib.tensor(data)  # (2, 5, 5, 4): NHWC values
    return {
        "nchw": x.permute(0, 3, 1, 2).contiguous(),
        "channels_last": x.permute(0, 3, 1, 2),
        "transposed": x.transpose(1, 2),
        "batch1_tokens": x[:1].reshape(1, 1, 25, 4).permute(0, 1, 3, 2).reshape(1, 4, 5, 5),
    }


def _order(t) -> tuple:
    return tuple(s if n > 1 else 0 for s, n in zip(t.stride(), t.shape))


@pytest.mark.parametrize("layout", ["nchw", "channels_last", "transposed", "batch1_tokens"])
@pytest.mark.parametrize("name", list(OPS))
def test_result_memory_order_and_values_like_torch(name, layout):
    data = np.random.default_rng(0).uniform(0.05, 0.95, (2, 5, 5, 4)).astype(np.float32)
    xe, xt = _layouts(ember, data)[layout], _layouts(torch, data)[layout]
    ye, yt = OPS[name](EF, ember, xe), OPS[name](TF, torch, xt)
    assert _order(ye) == _order(yt), f"{name}/{layout}: strides {ye.stride()} vs torch {yt.stride()}"
    np.testing.assert_allclose(ye.numpy(), yt.numpy(), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["gelu", "masked_fill", "softmax_dim1"])
def test_seeded_dropout_after_op_on_channels_last_map_like_torch(name):
    data = np.random.default_rng(1).uniform(0.05, 0.95, (2, 5, 5, 4)).astype(np.float32)
    masks = []
    for lib, F in ((torch, TF), (ember, EF)):
        x = _layouts(lib, data)["channels_last"]
        lib.manual_seed(0)
        masks.append(F.dropout(OPS[name](F, lib, x), 0.5).numpy() == 0)
    np.testing.assert_array_equal(masks[0], masks[1])


def test_gelu_gradient_of_permuted_input_like_torch():
    data = np.random.default_rng(2).standard_normal((2, 3, 4, 5))
    xe = ember.tensor(data, requires_grad=True)
    xt = torch.tensor(data, requires_grad=True)
    ge = np.random.default_rng(3).standard_normal((2, 5, 3, 4))
    (EF.gelu(xe.permute(0, 3, 1, 2)) * ember.tensor(ge)).sum().backward()
    (TF.gelu(xt.permute(0, 3, 1, 2)) * torch.tensor(ge)).sum().backward()
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
