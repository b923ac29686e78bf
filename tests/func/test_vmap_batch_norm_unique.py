"""vmap of training-mode batch_norm (samples as channel groups, one call of the fused op) and of unique (one
sort per row), against torch.func and NumPy; no per-sample loop may run (the loop warns, and warnings are
errors here)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.func as tf

import ember
import ember.func as ef

NO_LOOP = "vmap: there is no batching rule"


def _bn_loss(lib, with_affine=True):
    def f(x, w, b):
        y = lib.nn.functional.batch_norm(x, None, None, w if with_affine else None, b if with_affine else None,
                                         training=True, eps=1e-3)
        return (y ** 2 * x).sum()
    return f


@pytest.mark.parametrize("dims", [(0, None, None), (0, 0, 0), (1, None, 0), (None, 0, None), (-1, 0, None)])
@pytest.mark.parametrize("shape", [(4, 5), (4, 5, 6), (3, 5, 4, 4)])
def test_batch_norm_train_under_vmap_equals_torch(dims, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3,) + shape) * 2 + 0.5
    x = np.moveaxis(x, 0, dims[0]) if dims[0] is not None else x[0]
    w = rng.standard_normal((3, 5)) if dims[1] is not None else rng.standard_normal(5)
    b = rng.standard_normal((3, 5)) if dims[2] is not None else rng.standard_normal(5)
    ours = [ember.tensor(a) for a in (x, w, b)]
    theirs = [torch.tensor(a) for a in (x, w, b)]
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=NO_LOOP)
        got = ef.vmap(_bn_loss(ember), in_dims=dims)(*ours)
        grads = ef.vmap(ef.grad(_bn_loss(ember), argnums=(0, 1, 2)), in_dims=dims)(*ours)
        fwd = ef.vmap(lambda x_, w_, b_: ember.nn.functional.batch_norm(x_, None, None, w_, b_, training=True),
                      in_dims=dims)(*ours)
    np.testing.assert_allclose(got.numpy(), tf.vmap(_bn_loss(torch), in_dims=dims)(*theirs).numpy(), rtol=1e-10)
    want = tf.vmap(tf.grad(_bn_loss(torch), argnums=(0, 1, 2)), in_dims=dims)(*theirs)
    for g, h in zip(grads, want):
        assert tuple(g.shape) == tuple(h.shape)
        np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-9, atol=1e-11)
    want_fwd = tf.vmap(lambda x_, w_, b_: torch.nn.functional.batch_norm(x_, None, None, w_, b_, training=True),
                       in_dims=dims)(*theirs)
    np.testing.assert_allclose(fwd.numpy(), want_fwd.numpy(), rtol=1e-10, atol=1e-12)


def test_batch_norm_without_affine_nested_vmap_and_second_order():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 5))
    f_ours, f_torch = _bn_loss(ember, with_affine=False), _bn_loss(torch, with_affine=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=NO_LOOP)
        got = ef.vmap(ef.vmap(ef.grad(f_ours), in_dims=(0, None, None)), in_dims=(0, None, None))(
            ember.tensor(x), None, None)
        # second order: the vjp differentiates the composite under create_graph (the statistics move)
        hess = ef.vmap(ef.jacrev(ef.grad(f_ours)), in_dims=(0, None, None))(ember.tensor(x[0]), None, None)
    want = tf.vmap(tf.vmap(tf.grad(f_torch), in_dims=(0, None, None)), in_dims=(0, None, None))(
        torch.tensor(x), None, None)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-9, atol=1e-11)
    want_h = tf.vmap(tf.jacrev(tf.grad(f_torch)), in_dims=(0, None, None))(torch.tensor(x[0]), None, None)
    np.testing.assert_allclose(hess.numpy(), want_h.numpy(), rtol=1e-8, atol=1e-10)


def test_batch_norm_module_per_sample_gradients_and_running_stats_refused():
    """A model with BatchNorm (no running statistics) gives per-sample gradients as torch.func; with running
    statistics, training-mode vmap raises, as PyTorch's does (the per-sample update of shared buffers)."""
    def build(lib, track):
        lib.manual_seed(0)
        return lib.nn.Sequential(lib.nn.Conv2d(2, 3, 3), lib.nn.BatchNorm2d(3, track_running_stats=track),
                                 lib.nn.ReLU(), lib.nn.Flatten(), lib.nn.Linear(12, 2))

    x = np.random.default_rng(3).standard_normal((4, 2, 2, 4, 4)).astype(np.float32)
    values = {k: v.detach().numpy() for k, v in build(torch, track=False).named_parameters()}
    results = []
    for lib, func in ((ember, ef), (torch, tf)):
        model = build(lib, track=False)
        params = {k: lib.tensor(v) for k, v in values.items()}

        def loss(p, xi):
            return func.functional_call(model, p, (xi,)).square().mean()

        results.append(func.vmap(func.grad(loss), in_dims=(None, 0))(params, lib.tensor(x)))
    for key in results[1]:
        np.testing.assert_allclose(results[0][key].numpy(), results[1][key].numpy(), rtol=2e-4, atol=2e-6)
    model = build(ember, track=True)
    with pytest.raises(RuntimeError) as ours:
        ef.vmap(model)(ember.tensor(x))
    with pytest.raises(RuntimeError) as theirs:
        tf.vmap(build(torch, track=True))(torch.tensor(x))
    assert str(ours.value) == str(theirs.value)


def test_batch_norm_under_vmap_on_standin_device():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((3, 4, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    want = tf.vmap(tf.grad(_bn_loss(torch), argnums=1), in_dims=(0, None, None))(
        torch.tensor(x), torch.tensor(w), torch.zeros(5))
    with ember.testing.standin_cuda():
        args = [ember.tensor(a).to("cuda") for a in (x, w, np.zeros(5, np.float32))]
        got = ef.vmap(ef.grad(_bn_loss(ember), argnums=1), in_dims=(0, None, None))(*args)
        assert got.device.type == "cuda"
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", ["int64", "float64", "float32"])
def test_unique_under_vmap_equals_numpy_per_sample(dtype):
    rng = np.random.default_rng(5)
    x = np.stack([rng.permutation(np.repeat(np.arange(4), [1, 2, 3, 2])) for _ in range(6)]).astype(dtype)
    x[1] *= -3
    x = x.reshape(6, 2, 4)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=NO_LOOP)
        values, inverse, counts = ef.vmap(lambda a: ember.unique(a, return_inverse=True, return_counts=True))(
            ember.tensor(x))
        moved = ef.vmap(ember.unique, in_dims=2)(ember.tensor(np.ascontiguousarray(np.moveaxis(x, 0, 2))))
    for i in range(6):
        ev, ei, ec = np.unique(x[i], return_inverse=True, return_counts=True)
        np.testing.assert_array_equal(values[i].numpy(), ev)
        np.testing.assert_array_equal(inverse[i].numpy(), ei.reshape(x[i].shape))
        np.testing.assert_array_equal(counts[i].numpy(), ec)
        assert values.dtype == ember.tensor(x).dtype and inverse.dtype == counts.dtype == ember.int64
    np.testing.assert_array_equal(moved.numpy(), values.numpy())  # in_dims=2: the same samples


def test_unique_under_vmap_special_values_and_errors():
    x = np.array([[np.nan, 1.0, np.nan, -0.0, np.inf], [0.0, -np.inf, 2.0, 2.0, np.nan]])
    values, counts = ef.vmap(lambda a: ember.unique(a, return_counts=True))(ember.tensor(x))
    for i in range(2):
        ev, ec = np.unique(x[i], return_counts=True)
        np.testing.assert_array_equal(values[i].numpy(), ev)
        np.testing.assert_array_equal(counts[i].numpy(), ec)
    with pytest.raises(RuntimeError, match=r"unique gives outputs of different shapes for different samples"):
        ef.vmap(ember.unique)(ember.tensor(np.array([[1, 1, 2], [1, 2, 3]])))
    empty = ef.vmap(ember.unique)(ember.zeros(3, 0))
    assert tuple(empty.shape) == (3, 0)
    # dim= takes the per-sample loop; its results equal NumPy's per sample
    x2 = np.array([[[1, 2], [1, 2], [0, 3]], [[5, 5], [4, 4], [5, 5]]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = ef.vmap(lambda a: ember.unique(a, dim=0))(ember.tensor(x2))
    for i in range(2):
        np.testing.assert_array_equal(rows[i].numpy(), np.unique(x2[i], axis=0))
