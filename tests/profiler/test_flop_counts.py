"""FLOPs from the op records against hand counts and torch.utils.flop_counter.FlopCounterMode."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.ops.cost import op_bytes, op_flops
from ember.ops.registry import OPS, Spec
from ember.utils.flop_counter import FlopCounterMode


def _count(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_flop_counts()["Global"]


def _s(*shape, dtype=ember.float32):
    return Spec(shape, dtype)


def test_rules_against_hand_counts():
    assert op_flops(OPS["matmul"], (_s(3, 5, 7), _s(7, 2)), (_s(3, 5, 2),), {}) == 2 * 3 * 5 * 2 * 7
    assert op_flops(OPS["linear"], (_s(4, 6), _s(9, 6), _s(9)), (_s(4, 9),), {}) == 2 * 4 * 9 * 6 + 4 * 9
    conv_attrs = {"stride": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 2}
    # N=2, C_in=4 (groups 2 -> 2 per group), C_out=6, 3x3 kernel, 8x8 -> 6x6
    assert op_flops(OPS["conv2d"], (_s(2, 4, 8, 8), _s(6, 2, 3, 3)), (_s(2, 6, 6, 6),), conv_attrs) == \
        2 * 2 * 6 * 36 * (2 * 3 * 3)
    assert op_flops(OPS["add"], (_s(4, 5), _s(5)), (_s(4, 5),), {}) == 20
    assert op_flops(OPS["exp"], (_s(4, 5),), (_s(4, 5),), {}) == 20
    assert op_flops(OPS["sum"], (_s(4, 5),), (_s(),), {}) == 20
    assert op_flops(OPS["softmax"], (_s(4, 5),), (_s(4, 5),), {"dim": 1}) == 5 * 20
    ln = {"count": 1, "eps": 1e-5, "has_weight": True}
    assert op_flops(OPS["layer_norm"], (_s(4, 5), _s(5), _s(5)), (_s(4, 5), _s(4, 1), _s(4, 1)), ln) == 7 * 20
    assert op_flops(OPS["permute"], (_s(4, 5),), (_s(5, 4),), {"dims": (1, 0)}) == 0
    assert op_flops(OPS["einsum"], (_s(3, 4), _s(4, 5)), (_s(3, 5),), {"equation": "ij,jk->ik"}) == 2 * 3 * 4 * 5
    # bytes: inputs read once + output written once; a view moves nothing
    assert op_bytes(OPS["add"], (_s(4, 5), _s(5)), (_s(4, 5),), {}) == (20 + 5 + 20) * 4
    assert op_bytes(OPS["permute"], (_s(4, 5),), (_s(5, 4),), {"dims": (1, 0)}) == 0


def test_known_layers_through_the_counter():
    x = ember.randn(8, 3, 16, 16)
    conv = nn.Conv2d(3, 12, 5, padding=2, bias=False)
    counts = _count(lambda: conv(x))
    assert counts == {"conv2d": 2 * 8 * 12 * 16 * 16 * 3 * 25}
    counts = _count(lambda: nn.Linear(32, 10)(ember.randn(7, 32)))
    assert counts == {"linear": 2 * 7 * 10 * 32 + 7 * 10}
    counts = _count(lambda: nn.LayerNorm(32)(ember.randn(7, 32)))
    assert counts == {"layer_norm": 7 * 7 * 32}
    counts = _count(lambda: F.max_pool2d(ember.randn(2, 3, 8, 8), 2))
    assert counts == {"max_pool2d": 2 * 3 * 4 * 4 * 4}
    a = ember.randn(4, 5)
    counts = _count(lambda: (a * 2 + 1).exp().sum())
    assert counts == {"mul": 20, "add": 20, "exp": 20, "sum": 20}


def test_backward_flops_and_module_attribution():
    model = nn.Sequential(nn.Linear(8, 16, bias=False), nn.ReLU(), nn.Linear(16, 4, bias=False))
    x = ember.randn(2, 8)
    with FlopCounterMode(model, display=False) as counter:
        model(x).sum().backward()
    counts = counter.get_flop_counts()
    first, last = counts["Sequential.0"], counts["Sequential.2"]
    # linear's backward: dW = g^T x is one matmul_t (the transpose folded in), dX = g W one matmul
    assert first == {"linear": 2 * 2 * 16 * 8, "matmul_t": 2 * 16 * 8 * 2}  # x needs no grad: dW only
    assert last == {"linear": 2 * 2 * 4 * 16, "matmul": 2 * 2 * 16 * 4, "matmul_t": 2 * 2 * 16 * 4}  # dX and dW
    assert counts["Sequential.1"] == {"relu": 32, "relu_grad": 32}
    assert counter.get_total_flops() == sum(counts["Global"].values())
    assert "Sequential.0" in counter.get_table(depth=2)


torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode as TorchFlopCounter  # noqa: E402


def _torch_total(fn):
    with TorchFlopCounter(display=False) as counter:
        fn()
    return counter.get_total_flops()


@pytest.mark.parametrize("shapes", [((64, 32), (32, 16)), ((3, 10, 20), (3, 20, 5)), ((7, 5, 3), (3, 4))])
def test_matmul_matches_torch(shapes):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    ours = _count(lambda: ember.tensor(a) @ ember.tensor(b))
    assert ours["matmul"] == _torch_total(lambda: torch.tensor(a) @ torch.tensor(b))


def test_linear_forward_and_backward_match_torch():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((6, 12)).astype(np.float32), rng.standard_normal((5, 12)).astype(np.float32)

    def run_ours():
        wt = ember.tensor(w, requires_grad=True)
        F.linear(ember.tensor(x, requires_grad=True), wt).sum().backward()

    def run_torch():
        wt = torch.tensor(w, requires_grad=True)
        torch.nn.functional.linear(torch.tensor(x, requires_grad=True), wt).sum().backward()

    ours = _count(run_ours)
    # torch counts only the GEMMs: the forward, dX (matmul) and dW (matmul_t)
    assert ours["linear"] + ours["matmul"] + ours["matmul_t"] == _torch_total(run_torch)


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), (2, 0, 1), (1, 2, 4)])
def test_conv_forward_and_backward_match_torch(stride, padding, groups):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 8, 11, 11)).astype(np.float32)
    w = rng.standard_normal((12, 8 // groups, 3, 3)).astype(np.float32)

    def run_ours():
        out = F.conv2d(ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True), stride=stride,
                       padding=padding, groups=groups)
        out.sum().backward()

    def run_torch():
        out = torch.nn.functional.conv2d(torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True),
                                         stride=stride, padding=padding, groups=groups)
        out.sum().backward()

    ours = _count(run_ours)
    forward = _torch_total(lambda: torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=stride,
                                                              padding=padding, groups=groups))
    assert ours["conv2d"] == forward
    # Each gradient is one convolution as large as the forward (per group: a GEMM of the same size).
    assert ours["conv2d_input_grad"] == ours["conv2d_weight_grad"] == forward
    if groups == 1:
        assert ours["conv2d"] + ours["conv2d_input_grad"] + ours["conv2d_weight_grad"] == _torch_total(run_torch)
    # With groups > 1 torch 2.13 counts the weight gradient `groups` times over (its convolution_backward
    # formula ignores groups for it): 5x the forward for groups=4 where the GEMMs run 2x.


def test_attention_matmuls_match_torch_sdpa():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 3, 9, 8)).astype(np.float32) for _ in range(3))
    ours = _count(lambda: F.scaled_dot_product_attention(ember.tensor(q), ember.tensor(k), ember.tensor(v)))
    # torch 2.13's counter gives 0 for SDPA's fused CPU kernel, so count the same attention written out.
    tq, tk, tv = torch.tensor(q), torch.tensor(k), torch.tensor(v)
    theirs = _torch_total(lambda: torch.softmax(tq @ tk.transpose(-2, -1) / 8 ** 0.5, -1) @ tv)
    assert theirs == 2 * (2 * 2 * 3 * 9 * 9 * 8)  # QK^T and AV
    # ember's attention is one record (ember/ops/attention.py): the two products plus, as ember's softmax
    # counts, 5 per score (max, subtract, exp, sum, divide) and 1 for the scale
    assert ours["scaled_dot_product_attention"] == theirs + 6 * 2 * 3 * 9 * 9
