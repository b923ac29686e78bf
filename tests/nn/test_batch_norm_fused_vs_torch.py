"""The fused training-mode batch norm (ember/ops/normalization.py) against torch: forward, running
statistics, all three gradients, channels whose mean dwarfs their spread, and second derivatives
(which differentiate the composite)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _run(lib, x, w, b, g, affine: bool):
    tx = lib.tensor(x, requires_grad=True)
    tw = lib.tensor(w, requires_grad=True) if affine else None
    tb = lib.tensor(b, requires_grad=True) if affine else None
    rm, rv = lib.zeros(x.shape[1], dtype=tx.dtype), lib.ones(x.shape[1], dtype=tx.dtype)
    y = lib.nn.functional.batch_norm(tx, rm, rv, tw, tb, True, 0.3, 1e-3)
    y.backward(lib.tensor(g))
    grads = [tx.grad] + ([tw.grad, tb.grad] if affine else [])
    return [a.detach().numpy() for a in [y, rm, rv] + grads]


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (6, 2), (3, 4, 7)])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("offset", [0.0, 1e4])  # 1e4: a channel mean 1e4x its standard deviation
def test_batch_norm_train_matches_torch(shape, affine, offset) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape) + offset
    w, b = rng.standard_normal(shape[1]), rng.standard_normal(shape[1])
    g = rng.standard_normal(shape)
    for got, want in zip(_run(ember, x, w, b, g, affine), _run(torch, x, w, b, g, affine)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, offset))


def test_batch_norm_train_float32_close_to_float64() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 8, 6, 6)).astype(np.float32) * 3 + 2
    w, b = rng.standard_normal(8).astype(np.float32), rng.standard_normal(8).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    got = _run(ember, x, w, b, g, True)
    want = _run(torch, *(a.astype(np.float64) for a in (x, w, b, g)), True)
    for a, e in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, e, rtol=2e-4, atol=2e-4 * np.abs(e).max())


def test_batch_norm_second_derivative_matches_torch() -> None:
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((5, 3, 4)), rng.standard_normal(3), rng.standard_normal(3)

    def grad_norm(lib):
        tx, tw, tb = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = lib.nn.functional.batch_norm(tx, None, None, tw, tb, True)
        (gx,) = lib.autograd.grad((y ** 3).sum(), [tx], create_graph=True)
        (gx * gx).sum().backward()
        return tx.grad.detach().numpy(), tw.grad.detach().numpy()

    for got, want in zip(grad_norm(ember), grad_norm(torch)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_batch_norm_train_exports_to_onnx(tmp_path) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import ember.onnx as eonnx

    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32) + 2
    w, b = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    fn = lambda t, tw, tb: ember.nn.functional.batch_norm(t, None, None, tw, tb, True)  # noqa: E731
    inputs = [ember.tensor(a) for a in (x, w, b)]
    eonnx.export(fn, tuple(inputs), str(tmp_path / "bn.onnx"))
    (got,) = eonnx.run(str(tmp_path / "bn.onnx"), inputs)
    want = torch.nn.functional.batch_norm(torch.tensor(x), None, None, torch.tensor(w), torch.tensor(b), True)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
