"""torch.func.linearize and replace_all_batch_norm_modules_ against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.func as tf

import ember
import ember.func as ef


def _pair(lib):
    return lambda a, b: {"p": (a.sin().sum(0) * b).sum(-1), "q": a @ b.mT}


def test_linearize_equals_torch_for_many_tangents() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    out_e, jvp_e = ef.linearize(_pair(ember), ember.tensor(a), ember.tensor(b))
    out_t, jvp_t = tf.linearize(_pair(torch), torch.tensor(a), torch.tensor(b))
    for k in out_t:
        np.testing.assert_allclose(out_e[k].numpy(), out_t[k].numpy(), rtol=1e-12)
        assert not out_e[k].requires_grad
    for _ in range(3):  # one forward, many tangents
        ta, tb = rng.standard_normal(a.shape), rng.standard_normal(b.shape)
        got, want = jvp_e(ember.tensor(ta), ember.tensor(tb)), jvp_t(torch.tensor(ta), torch.tensor(tb))
        for k in want:
            np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=1e-12, atol=1e-12)


def test_linearize_errors_are_pytorch_s() -> None:
    _, jvp_e = ef.linearize(lambda x: x * 2, ember.ones(3, 4))
    with pytest.raises(RuntimeError, match=r"tangent:0 with shape ember.Size\(\[3, 5\]\) in flattened pytree doesn't "
                                           r"match the shape ember.Size\(\[3, 4\]\) of the corresponding primal."):
        jvp_e(ember.ones(3, 5))
    with pytest.raises(RuntimeError, match="tangent:0 with dtype ember.float32 in flattened pytree doesn't match the "
                                           "dtype ember.float64"):
        ef.linearize(lambda x: x * 2, ember.ones(2, dtype=ember.float64))[1](ember.ones(2))
    with pytest.raises(RuntimeError, match="Expected the tangents .* to have the same argspec as the primals"):
        jvp_e(ember.ones(3, 4), ember.ones(1))


def test_replace_all_batch_norm_modules_as_torch() -> None:
    def build(lib):
        return lib.nn.Sequential(lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 2),
                                 lib.nn.InstanceNorm1d(2, track_running_stats=True), lib.nn.BatchNorm2d(2))

    mine, theirs = build(ember), build(torch)
    assert ef.replace_all_batch_norm_modules_(mine) is mine
    tf.replace_all_batch_norm_modules_(theirs)
    for m, t in zip(mine, theirs):
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            assert (getattr(m, name, None) is None) == (getattr(t, name, None) is None), (type(m), name)
        assert getattr(m, "track_running_stats", None) == getattr(t, "track_running_stats", None), type(m)
    # a root that is itself a BatchNorm module; in training and eval mode it now normalizes with batch statistics
    root = ef.replace_all_batch_norm_modules_(ember.nn.BatchNorm1d(2).eval())
    x = ember.tensor([[1.0, 2.0], [3.0, 6.0]])
    np.testing.assert_allclose(root(x).detach().numpy(), [[-1.0, -1.0], [1.0, 1.0]], atol=1e-4)
