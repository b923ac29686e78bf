"""The paths that make per-sample gradients fast keep their values: stacked outer products (one einsum),
a stack of matrices against one matrix as one GEMM, linear's leaner backward, and no reference cycles left by
vmap(grad(f)) (a cycle keeps every batched activation alive until the cyclic collector runs)."""
from __future__ import annotations

import gc

import numpy as np
import pytest
import torch

import ember
import ember.func as ef
from ember import _config
from ember.backends import cpu_kernels
from ember.ops import linalg


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("lead", [(5,), (2, 3), (1,)])
def test_stacked_outer_products_equal_torch(dtype, lead) -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal(lead + (4, 1)).astype(dtype)
    b = rng.standard_normal(lead + (1, 6)).astype(dtype)
    if np.iscomplexobj(a):
        a = a + 1j * rng.standard_normal(a.shape).astype(dtype)
    a[..., 0, 0], a[..., 1, 0], b[..., 0, 1] = np.inf, -0.0, np.nan  # special values go through as in torch
    got = (ember.tensor(a) @ ember.tensor(b)).numpy()
    expected = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=0)


def test_stacked_outer_reads_strided_operands() -> None:
    rng = np.random.default_rng(1)
    g = rng.standard_normal((7, 1, 5)).astype(np.float32)  # a per-sample gradient row, transposed: a strided view
    x = rng.standard_normal((7, 3, 1)).astype(np.float32).transpose(0, 2, 1)
    got = linalg._matmul_impl(np, g.transpose(0, 2, 1), x)
    np.testing.assert_allclose(got, np.einsum("nik,nkj->nij", g.transpose(0, 2, 1), x), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernels", ["numba", "numpy"])
def test_outer_rows_kernel_equals_einsum_bit_for_bit(dtype, kernels, monkeypatch) -> None:
    """The native ``outer_rows`` pass (numba) and the NumPy einsum write the same products, special values too."""
    if kernels == "numba":
        pytest.importorskip("numba")
    monkeypatch.setattr(_config, "CPU_KERNELS", kernels)
    cpu_kernels.reset()
    try:
        rng = np.random.default_rng(4)
        a = rng.standard_normal((256, 64)).astype(dtype)
        b = rng.standard_normal((32, 256)).astype(dtype).T  # a strided operand
        a[0, :4] = [np.inf, -0.0, np.nan, 1e-45]
        b[1, :3] = [np.inf, 0.0, -np.inf]
        got = linalg.outer_rows(np, a, b)
        expected = a[:, :, None] * b[:, None, :]  # one IEEE multiply per element: an independent reference
        assert got.dtype == dtype and got.shape == (256, 64, 32)
        np.testing.assert_array_equal(got, expected)
        if kernels == "numba":
            assert cpu_kernels.get("outer_rows") is not None
    finally:
        cpu_kernels.reset()


@pytest.mark.parametrize("make", [
    lambda a: a,                                 # contiguous: one GEMM over all rows
    lambda a: np.ascontiguousarray(a.transpose(1, 0, 2)).transpose(1, 0, 2),  # strided stack
])
def test_stack_against_one_matrix_equals_torch(make) -> None:
    rng = np.random.default_rng(2)
    a = make(rng.standard_normal((6, 3, 8)))
    b = rng.standard_normal((8, 5))
    got = ember.tensor(a) @ ember.tensor(b)
    np.testing.assert_allclose(got.numpy(), (torch.from_numpy(np.array(a)) @ torch.from_numpy(b)).numpy(), rtol=1e-12)
    # and under vmap, rows of a per-sample matrix-vector product (the batch rule hands matmul the stack)
    v = ef.vmap(lambda row, w: row @ w, in_dims=(0, None))(ember.tensor(a[:, 0]), ember.tensor(b))
    np.testing.assert_allclose(v.numpy(), a[:, 0] @ b, rtol=1e-12)


@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 3, 5)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_gradients_equal_torch(shape, bias) -> None:
    rng = np.random.default_rng(3)
    x_np, w_np, b_np = rng.standard_normal(shape), rng.standard_normal((6, 5)), rng.standard_normal(6)
    g_np = rng.standard_normal(shape[:-1] + (6,))
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(x_np, requires_grad=True)
        w = lib.tensor(w_np, requires_grad=True)
        b = lib.tensor(b_np, requires_grad=True) if bias else None
        lib.nn.functional.linear(x, w, b).backward(lib.tensor(g_np))
        grads.append([t.grad.numpy() for t in (x, w, b) if t is not None])
    for mine, theirs in zip(*grads):
        assert mine.shape == theirs.shape
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


# The modules whose objects a vmap(grad(f)) call creates: tensors, autograd nodes, transform levels, modules, ops.
TRANSFORM_MODULES = ("ember.tensor", "ember.autograd", "ember.func", "ember.nn", "ember.ops", "ember.interpreters",
                     "ember._", "ember.surface")


def test_per_sample_gradients_leave_no_reference_cycles() -> None:
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def loss(p, x, y):
        return ember.nn.functional.cross_entropy(ef.functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

    fn = ef.vmap(ef.grad(loss), in_dims=(None, 0, 0))
    x, y = ember.randn(5, 4), ember.tensor([0, 1, 2, 0, 1])
    fn(params, x, y)
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # keep what the collection frees, to see whose it is
    try:
        grads = fn(params, x, y)
        gc.collect()
        # Only the objects vmap(grad(f)) makes count: threads other tests left running (gloo's socket readers
        # and process groups, loader workers) free garbage of their own while this runs, ember's included.
        found = [o for o in gc.garbage if type(o).__module__.startswith(TRANSFORM_MODULES)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if enabled:
            gc.enable()
    assert not found, f"vmap(grad(f)) left {len(found)} ember objects in reference cycles: {found[:5]}"
    assert grads["0.weight"].shape == (5, 8, 4)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_single_row_cross_entropy_under_vmap_equals_torch(reduction) -> None:
    """One row per sample (the per-sample gradient case) takes the fused loss's single-row batch rules; a sample
    whose target is ignored gets PyTorch's mean of nothing (NaN) and its gradient."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((4, 5)).astype(np.float32)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    t = np.array([0, 3, -100, 4, 1, 2])

    def make(lib):
        def loss(weight, xi, ti):
            return lib.nn.functional.cross_entropy((xi @ weight).unsqueeze(0), ti.unsqueeze(0), reduction=reduction)
        return loss

    got_g = ef.vmap(ef.grad(make(ember)), in_dims=(None, 0, 0))(ember.tensor(w), ember.tensor(x), ember.tensor(t))
    want_g = torch.func.vmap(torch.func.grad(make(torch)), in_dims=(None, 0, 0))(
        torch.tensor(w), torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got_g.numpy(), want_g.numpy(), rtol=1e-5, atol=1e-6)
    got = ef.vmap(make(ember), in_dims=(None, 0, 0))(ember.tensor(w), ember.tensor(x), ember.tensor(t))
    want = torch.func.vmap(make(torch), in_dims=(None, 0, 0))(torch.tensor(w), torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)  # NaN where torch has NaN


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dims", [(0, 0), (0, None), (None, 0)])
def test_cross_entropy_with_rows_per_sample_under_vmap_equals_torch(reduction, dims) -> None:
    """Several rows per sample (the fused loss takes vmap's batch as one more leading dim, one call each way),
    ignored targets, a fully ignored sample (mean: NaN), logits or targets shared by the batch."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 3, 4)) * 3
    t = rng.integers(0, 4, (5, 3))
    t[1, 0] = -100
    t[2, :] = -100
    if dims[0] is None:
        x = x[0]
    if dims[1] is None:
        t = t[1]

    def make(lib):
        def loss(xi, ti):
            return lib.nn.functional.cross_entropy(xi, ti, reduction=reduction)
        return loss

    def total(lib):
        return lambda xi, ti: make(lib)(xi, ti).sum() if reduction == "none" else make(lib)(xi, ti)

    got = ef.vmap(make(ember), in_dims=dims)(ember.tensor(x), ember.tensor(t))
    want = torch.func.vmap(make(torch), in_dims=dims)(torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    got_g = ef.vmap(ef.grad(total(ember)), in_dims=dims)(ember.tensor(x), ember.tensor(t))
    want_g = torch.func.vmap(torch.func.grad(total(torch)), in_dims=dims)(torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got_g.numpy(), want_g.numpy(), rtol=1e-12, atol=1e-12)


def test_cross_entropy_nested_vmap_and_out_of_range_target() -> None:
    """Two vmap levels fold into two leading dims of the fused op; a bad class still raises the op's error."""
    rng = np.random.default_rng(8)
    x, t = rng.standard_normal((2, 3, 4, 5)), rng.integers(0, 5, (2, 3, 4))

    def make(lib):
        return lambda xi, ti: lib.nn.functional.cross_entropy(xi, ti)

    got = ef.vmap(ef.vmap(ef.grad(make(ember))))(ember.tensor(x), ember.tensor(t))
    want = torch.func.vmap(torch.func.vmap(torch.func.grad(make(torch))))(torch.tensor(x), torch.tensor(t))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)
    t[1, 2, 0] = 5
    with pytest.raises(IndexError, match="target 5 is out of bounds for 5 classes"):
        ef.vmap(ef.vmap(make(ember)))(ember.tensor(x), ember.tensor(t))
