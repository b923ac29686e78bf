"""``grad_fn`` graphs have torch's shape: node class names (``type(fn).__name__``, as torchviz reads them), which
inputs ``next_functions`` lists and in which order (``F.linear``: ``(bias, input, TBackward0(weight))``), one
``AccumulateGrad`` object per leaf. Each case is walked two levels deep in both libraries and compared as text."""
from __future__ import annotations

import pytest
import torch

import ember


def _walk(fn, depth: int = 0) -> str:
    if fn is None:
        return "None"
    name = type(fn).__name__
    assert fn.name().split("::")[-1] == name
    kids = [_walk(f, depth + 1) for f, _ in fn.next_functions] if depth < 2 else []
    return name + ("(" + ", ".join(kids) + ")" if kids else "")


def _cases(lib):
    F = lib.nn.functional
    g = lib.Generator().manual_seed(0)
    x = lib.randn(2, 3, generator=g, requires_grad=True)
    y = lib.randn(2, 3, generator=g, requires_grad=True)
    w = lib.randn(4, 3, generator=g, requires_grad=True)
    b = lib.randn(4, generator=g, requires_grad=True)
    img = lib.randn(1, 2, 5, 5, generator=g, requires_grad=True)
    cw = lib.randn(3, 2, 3, 3, generator=g, requires_grad=True)
    idx = lib.tensor([0, 1])
    mask = lib.tensor([[True, False, True], [False, True, False]])
    return {
        "linear": lambda: F.linear(x.relu(), w, b),
        "linear_no_bias": lambda: F.linear(x, w),
        "linear_3d": lambda: F.linear(x.unsqueeze(0), w, b),
        "mm": lambda: x.mm(w.t()),
        "addmm": lambda: lib.addmm(b, x, w.t()),
        "conv2d": lambda: F.conv2d(img, cw, b[:3]),
        "conv2d_no_bias": lambda: F.conv2d(img, cw),
        "scalar_ops": lambda: (x + 1) * 2 - x / 2 + (1 - x) - x.exp() ** 2,
        "pow_tensor": lambda: (2 ** x) + x ** y,
        "indexing": lambda: x[idx] + x[0] + x[:, 1:2].sum() + x.gather(1, lib.tensor([[0], [1]])).sum(),
        "where_masked_fill": lambda: lib.where(mask, x, y) + x.masked_fill(mask, 0),
        "reductions": lambda: x.sum(0) + x.mean() + x.amax(1).sum() + x.max(1)[0].sum(),
        "views": lambda: x.t().reshape(6).view(2, 3).flatten().unsqueeze(0),
        "losses": lambda: F.mse_loss(x, y.detach()) + F.cross_entropy(x, idx) + F.nll_loss(x, idx) + F.l1_loss(x, y),
        "norms": lambda: F.layer_norm(x, (3,), w[0], b[:3]) + F.layer_norm(x, (3,)) + x.norm(),
        "batch_norm": lambda: F.batch_norm(x, None, None, w[0], b[:3], training=True),
        "activations": lambda: F.softplus(x) + F.leaky_relu(x) + F.elu(x) + F.gelu(x) + F.silu(x) + F.softmax(x, 1),
        "blends": lambda: lib.add(x, y, alpha=2) + lib.addcmul(x, x, y) + lib.lerp(x, y, 0.5),
        "sort_family": lambda: x.topk(2)[0].sum() + x.sort()[0].sum() + x.repeat(2, 1).sum() + x.cumsum(1).sum(),
        "pooling": lambda: F.max_pool2d(img, 2).sum() + F.avg_pool2d(img, 2).sum(),
        "products": lambda: x[0].dot(y[0]) + (w @ x[0]).sum() + lib.bmm(x.unsqueeze(0), w.t().unsqueeze(0)).sum(),
        "module_linear": lambda: _module(lib)(x),
        "split_cat": lambda: lib.cat(x.split(1), 1).sum() + lib.cat(x.chunk(3, 1), 1).sum() + lib.stack(x.unbind(1)).sum(),
        "log1p": lambda: x.log1p() + x.expm1(),
    }


def _module(lib):
    lib.manual_seed(0)
    return lib.nn.Linear(3, 4)


@pytest.mark.parametrize("case", list(_cases(torch)))
def test_next_functions_like_torch(case):
    want = _walk(_cases(torch)[case]().grad_fn)
    got = _walk(_cases(ember)[case]().grad_fn)
    assert got == want


def test_one_accumulate_grad_object_per_leaf():
    x = ember.ones(2, requires_grad=True)
    y = x * x
    (a, _), (b, _) = y.grad_fn.next_functions
    assert a is b and a.variable is x
    assert type(a).__name__ == "AccumulateGrad" and repr(a).startswith("<AccumulateGrad object at")
