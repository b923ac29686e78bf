"""The fused cross entropy's fast path for the common call (2-D logits, no ignored target): the same bits as the
general path, forward and backward, every reduction, float32/float64, special logits; the general path still
raises on an out-of-range class and handles ignored rows."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import losses_cross_entropy as ce


def _logits(n: int, c: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(n * 31 + c)
    x = (rng.standard_normal((n, c)) * 4).astype(dtype)
    if n > 2 and c > 2:
        x[0, 1], x[1, 0], x[2, 2] = 1e30, -1e30, 0.0
    return x


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, c", [(256, 10), (1, 1), (7, 3), (64, 10)])
@pytest.mark.parametrize("g", [1.0, 0.37, -2.5])
def test_fast_path_gives_the_general_paths_bits(reduction, dtype, n, c, g, monkeypatch) -> None:
    x = _logits(n, c, dtype)
    t = np.random.default_rng(n).integers(0, c, n)
    cot = np.asarray(g, dtype=dtype)
    assert ce._all_valid_2d(np, x, t, -100)
    loss, logp = ce._forward_impl(np, x, t, -100, reduction)
    grad = ce._backward_impl(np, cot, logp, t, -100, reduction)
    monkeypatch.setattr(ce, "_all_valid_2d", lambda *a: False)
    ref_loss, ref_logp = ce._forward_impl(np, x, t, -100, reduction)
    ref_grad = ce._backward_impl(np, cot, ref_logp, t, -100, reduction)
    assert loss.dtype == ref_loss.dtype and loss.shape == ref_loss.shape and loss.tobytes() == ref_loss.tobytes()
    assert grad.dtype == ref_grad.dtype and grad.tobytes() == ref_grad.tobytes()


def test_the_general_path_keeps_its_cases() -> None:
    x = _logits(5, 3, np.float32)
    assert not ce._all_valid_2d(np, x, np.array([0, 1, 2, 1, -100]), -100)  # an ignored row
    assert not ce._all_valid_2d(np, x, np.array([0, 1, 2, 1, 0]), 1)        # ignore_index is a class in use
    assert not ce._all_valid_2d(np, x, np.array([0, 1, 3, 1, 0]), -100)     # out of range: the error path
    assert not ce._all_valid_2d(np, x, np.array([], dtype=np.int64), -100)
    with pytest.raises(IndexError, match="out of bounds"):
        ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor([0, 1, 3, 1, 0]))
    loss = ember.nn.functional.cross_entropy(ember.tensor(x), ember.tensor([0, 1, 2, 1, -100]))
    rows = x[:4].astype(np.float64)
    top = rows.max(1)
    lse = top + np.log(np.exp(rows - top[:, None]).sum(1))  # float64 log-sum-exp (a logit is 1e30)
    want = (lse - rows[np.arange(4), [0, 1, 2, 1]]).mean()
    np.testing.assert_allclose(loss.item(), want, rtol=1e-5)
