"""layer_norm's native kernels (ember/backends/cpu_norm_kernels.py via ember/ops/layer_norm_split.py): values and
gradients against PyTorch in float64 and float64 finite differences, special rows (constant, tiny variance, a mean
far above the spread, huge values, inf/NaN), non-contiguous inputs, several normalized dims, and the same bits at
one and two threads."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.backends import cpu_kernels
from ember.ops import layer_norm_split, nn_ops

torch = pytest.importorskip("torch")
pytest.importorskip("numba")


def _kernel_taken(monkeypatch) -> list:
    """Records the native kernels the split module asks for."""
    asked: list = []
    real = layer_norm_split.native_kernel

    def spy(xp, name):
        asked.append(name)
        return real(xp, name)

    monkeypatch.setattr(layer_norm_split, "native_kernel", spy)
    return asked


def _torch_reference(x, w, b, g, shape):
    tx = torch.tensor(x.astype(np.float64), requires_grad=True)
    tw = None if w is None else torch.tensor(w.astype(np.float64), requires_grad=True)
    tb = None if b is None else torch.tensor(b.astype(np.float64), requires_grad=True)
    out = torch.nn.functional.layer_norm(tx, shape, tw, tb)
    out.backward(torch.tensor(g.astype(np.float64)))
    return out.detach().numpy(), [t.grad.numpy() if t is not None else None for t in (tx, tw, tb)]


def _ember(x, w, b, g, shape):
    ex = ember.tensor(x, requires_grad=True)
    ew = None if w is None else ember.tensor(w, requires_grad=True)
    eb = None if b is None else ember.tensor(b, requires_grad=True)
    out = ember.nn.functional.layer_norm(ex, shape, ew, eb)
    out.backward(ember.tensor(g))
    return out.detach().numpy(), [t.grad.numpy() if t is not None else None for t in (ex, ew, eb)]


@pytest.mark.parametrize("dtype,tol", [(np.float32, 2e-5), (np.float64, 1e-12)])
@pytest.mark.parametrize("shape,count,affine", [((4, 33, 96), 1, 2), ((3, 7, 8, 12), 2, 1), ((2, 5, 384), 1, 0),
                                                 ((65, 3), 1, 2), ((9,), 1, 2)])
def test_native_layer_norm_vs_torch(monkeypatch, dtype, tol, shape, count, affine):
    asked = _kernel_taken(monkeypatch)
    rng = np.random.default_rng(0)
    norm = shape[len(shape) - count:]
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    w = (1 + 0.5 * rng.standard_normal(norm)).astype(dtype) if affine >= 1 else None
    b = rng.standard_normal(norm).astype(dtype) if affine == 2 else None
    out, grads = _ember(x, w, b, g, norm)
    want, want_grads = _torch_reference(x, w, b, g, norm)
    assert "layer_norm_rows" in asked and "layer_norm_backward_rows" in asked
    assert out.dtype == dtype
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    for got, ref in zip(grads, want_grads):
        if ref is not None:
            assert got.dtype == dtype and got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max())))


def test_native_backward_by_finite_differences():
    rng = np.random.default_rng(1)
    x = ember.tensor(rng.standard_normal((3, 2, 5)) * 2 + 0.5, requires_grad=True)
    w = ember.tensor(1 + rng.standard_normal((2, 5)) * 0.3, requires_grad=True)
    b = ember.tensor(rng.standard_normal((2, 5)), requires_grad=True)
    assert ember.autograd.gradcheck(lambda x, w, b: ember.nn.functional.layer_norm(x, (2, 5), w, b),
                                    (x, w, b), eps=1e-6, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_rows(dtype):
    """Each row its own case; float32 rows are compared with torch in float64 (torch's float32 kernel loses the
    big-mean row's spread), inf/NaN rows with torch's own float result (NaN rows)."""
    n = 256
    rng = np.random.default_rng(2)
    rows = {
        "zeros": np.zeros(n),
        "constant": np.full(n, 3.5),
        "tiny variance": 1.0 + 1e-4 * rng.standard_normal(n),
        "big mean": 1e4 + rng.standard_normal(n),
        "huge": 1e30 * rng.standard_normal(n) if dtype == np.float32 else 1e150 * rng.standard_normal(n),
        "negative large": -7e3 + 50 * rng.standard_normal(n),
        "plain": rng.standard_normal(n),
    }
    x = np.stack(list(rows.values())).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    w = (1 + 0.1 * rng.standard_normal(n)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    out, grads = _ember(x, w, b, g, (n,))
    want, want_grads = _torch_reference(x, w, b, g, (n,))
    tol = 3e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    for name, got, ref in zip(rows, grads[0], want_grads[0]):  # each row to its own scale
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(np.abs(ref).max(), 1e-300), err_msg=name)
    for got, ref in zip(grads[1:], want_grads[1:]):
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * np.abs(ref).max())


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_inf_and_nan_rows_give_the_numpy_code_values(monkeypatch, bad):
    """A non-finite row sends the call to the NumPy code (the kernel reports it): the other rows stay exact,
    and the bad row is what the NumPy-only install gives (NaN, as PyTorch)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 64)).astype(np.float32)
    x[2, 7] = bad
    w, b = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
    attrs = {"count": 1, "eps": 1e-5, "has_weight": True}
    native = nn_ops._layer_norm_impl(np, x, w, b, **attrs)
    monkeypatch.setattr(layer_norm_split, "native_kernel", lambda xp, name: None)
    plain = nn_ops._layer_norm_impl(np, x, w, b, **attrs)
    for a, c in zip(native, plain):
        np.testing.assert_array_equal(a, c)
    want = torch.nn.functional.layer_norm(torch.tensor(x), (64,), torch.tensor(w), torch.tensor(b)).numpy()
    assert np.isnan(native[0][2]).all() and np.isnan(want[2]).all()
    np.testing.assert_allclose(np.delete(native[0], 2, 0), np.delete(want, 2, 0), rtol=1e-5, atol=1e-5)


def test_non_contiguous_input_and_gradient():
    rng = np.random.default_rng(4)
    base = rng.standard_normal((6, 40, 10)).astype(np.float32)
    x = base.transpose(0, 2, 1)[:, ::2]  # (6, 5, 40), strided both ways
    g = rng.standard_normal((6, 40, 5)).astype(np.float32).transpose(0, 2, 1)
    ex = ember.tensor(base, requires_grad=True)
    view = ex.permute(0, 2, 1)[:, ::2]
    out = ember.nn.functional.layer_norm(view, (40,))
    out.backward(ember.tensor(g))
    want, want_grads = _torch_reference(np.ascontiguousarray(x), None, None, np.ascontiguousarray(g), (40,))
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=2e-5, atol=2e-5)
    full = np.zeros(base.shape)
    full.transpose(0, 2, 1)[:, ::2] = want_grads[0]
    np.testing.assert_allclose(ex.grad.numpy(), full, rtol=2e-5, atol=2e-5)


def test_same_bits_at_one_and_two_threads(monkeypatch):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 256, 384)).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    w, b = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    attrs = {"count": 1, "eps": 1e-5, "has_weight": True}
    results, calls = [], []
    for threads in (1, 2):
        def counting(fn, total, min_chunk=1, threads=threads):
            calls.append(threads)
            pieces = np.linspace(0, total, threads + 1).astype(int)
            for lo, hi in zip(pieces[:-1], pieces[1:]):
                fn(int(lo), int(hi))

        monkeypatch.setattr(layer_norm_split, "parallel_for", counting)
        y, mean, rstd = nn_ops._layer_norm_impl(np, x, w, b, **attrs)
        results.append((y, mean, rstd) + nn_ops._layer_norm_backward_impl(np, g, x, mean, rstd, w, count=1))
    assert calls == [1, 1, 2, 2]
    for a, c in zip(*results):
        np.testing.assert_array_equal(a, c)


def test_kernels_absent_without_numba(monkeypatch):
    """The NumPy-only install (no kernel table) runs the NumPy code and agrees with the kernels to rounding."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 16, 32)).astype(np.float32)
    w = rng.standard_normal(32).astype(np.float32)
    native = nn_ops._layer_norm_impl(np, x, w, count=1, eps=1e-5, has_weight=True)
    monkeypatch.setattr(cpu_kernels, "_KERNELS", {})
    plain = nn_ops._layer_norm_impl(np, x, w, count=1, eps=1e-5, has_weight=True)
    for a, c in zip(native, plain):
        np.testing.assert_allclose(a, c, rtol=2e-6, atol=2e-6)
