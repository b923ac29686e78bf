"""``x.max()`` / ``x.min()`` share the gradient among the elements equal to the result, NaN elements matching a NaN
result (torch's evenly_distribute_backward; ember gave NaN everywhere), and a negative-order norm of a vector
holding both 0 and NaN is NaN (ember gave 0). Against torch 2.13, float64."""
from __future__ import annotations

import math

import pytest
import torch

import ember

NAN, INF = float("nan"), float("inf")
VECTORS = [[1.0, NAN, 3.0], [NAN, NAN, 1.0], [3.0, 3.0, 1.0], [INF, 1.0, INF], [2.0, -1.0, 0.5], [[1.0, NAN], [NAN, 0.0]]]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x == y or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("values", VECTORS, ids=str)
def test_full_max_min_gradient_like_torch(op, values):
    seen = []
    for lib in (torch, ember):
        x = lib.tensor(values, dtype=lib.float64, requires_grad=True)
        y = getattr(x, op)()
        (y * 2).backward()
        seen.append(([y.item()], x.grad.flatten().tolist(), type(y.grad_fn).__name__))
    assert _same(seen[0][0], seen[1][0]) and _same(seen[0][1], seen[1][1]) and seen[0][2] == seen[1][2]


@pytest.mark.parametrize("order", [-1, -2, -0.5])
@pytest.mark.parametrize("values", [[0.0, NAN, 1.0], [0.0, NAN], [0.0, 1.0], [NAN, 2.0]], ids=str)
def test_negative_order_norm_nan_wins_over_zero(order, values):
    want = torch.linalg.vector_norm(torch.tensor(values), ord=order).item()
    got = ember.linalg.vector_norm(ember.tensor(values), ord=order).item()
    assert _same([got], [want])
