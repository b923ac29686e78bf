"""FLOPs of normalization layers (forward and backward) against hand counts (torch's counter has no rule for
them, so there is nothing to compare with there): the cost model's conventions in ember/ops/cost.py."""
from __future__ import annotations

import ember
import ember.nn as nn
from ember.utils.flop_counter import FlopCounterMode


def _counts(fn):
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_flop_counts()["Global"]


def test_batch_norm_train_forward_and_backward():
    n, c, h, w = 2, 3, 4, 5
    bn = nn.BatchNorm2d(c)
    x = ember.randn(n, c, h, w, requires_grad=True)
    forward = _counts(lambda: bn(x))
    # 7 per element: mean (sum), subtract, square-and-add, scale by rstd, affine scale and shift
    assert forward["batch_norm"] == 7 * n * c * h * w
    # the running statistics' update touches C-long vectors only
    assert sum(v for k, v in forward.items() if k != "batch_norm") <= 4 * c
    y = bn(x)
    backward = _counts(lambda: y.backward(ember.ones_like(y)))
    assert backward == {"batch_norm_backward": 8 * n * c * h * w}


def test_layer_norm_forward_and_backward():
    rows, features = 6, 10
    ln = nn.LayerNorm(features)
    x = ember.randn(rows, features, requires_grad=True)
    assert _counts(lambda: ln(x)) == {"layer_norm": (5 + 2) * rows * features}  # + 2 for the affine weight
    no_affine = nn.LayerNorm(features, elementwise_affine=False)
    assert _counts(lambda: no_affine(x)) == {"layer_norm": 5 * rows * features}
    y = ln(x)
    assert _counts(lambda: y.backward(ember.ones_like(y))) == {"layer_norm_backward": 8 * rows * features}


def test_softmax_and_elementwise_chain():
    x = ember.randn(4, 7)
    assert _counts(lambda: x.softmax(dim=1)) == {"softmax": 5 * 28}
    assert _counts(lambda: (x.tanh() * x + 1).sigmoid()) == {"tanh": 28, "mul": 28, "add": 28, "sigmoid": 28}
