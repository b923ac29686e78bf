"""ONNX exports of diagonal (Transpose + Reshape + Gather of static positions), searchsorted (a broadcast
compare counted with ReduceSum) and linalg.det (ONNX Det), run in onnxruntime against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import ember.onnx as eonnx  # noqa: E402


def _export_run(fn, arrays):
    tensors = tuple(ember.tensor(a) for a in arrays)
    return eonnx.run(eonnx.export(fn, tensors), list(arrays)), fn(*tensors)


@pytest.mark.parametrize("offset", [-3, -1, 0, 2, 4, 9])
@pytest.mark.parametrize("dims", [(0, 1), (1, 2), (2, 0), (-1, -3)])
def test_diagonal(offset, dims):
    x = np.arange(3 * 4 * 5, dtype=np.float32).reshape(3, 4, 5)
    (got,), eager = _export_run(lambda t: ember.diagonal(t, offset, *dims), [x])
    want = np.diagonal(x, offset, *dims)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(eager.numpy(), want)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_ties_ends_and_batches(right):
    side = "right" if right else "left"
    seq = np.array([-np.inf, -1.0, 0.0, 0.0, 0.0, 2.5, 7.0, np.inf], dtype=np.float32)
    values = np.array([[-np.inf, -5.0, -1.0, 0.0], [1e-30, 2.5, 8.0, np.inf]], dtype=np.float32)
    (got,), _ = _export_run(lambda s, v: ember.searchsorted(s, v, right=right), [seq, values])
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.searchsorted(seq, values, side=side))
    rows = np.sort(np.random.default_rng(0).integers(-3, 3, (3, 6)).astype(np.float32), axis=1)  # ties
    vals = np.random.default_rng(1).integers(-4, 4, (3, 5)).astype(np.float32)
    (got,), _ = _export_run(lambda s, v: ember.searchsorted(s, v, side=side), [rows, vals])
    np.testing.assert_array_equal(got, np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, vals)]))


def test_det_batches_singular_and_signs():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 3, 3)).astype(np.float32)
    a[1] = np.array([[1, 2, 3], [2, 4, 6], [0, 1, 1]], dtype=np.float32)  # singular
    a[2] = np.eye(3, dtype=np.float32)[[1, 0, 2]]  # a permutation: det -1
    (got,), eager = _export_run(ember.linalg.det, [a])
    want = np.linalg.det(a.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eager.numpy(), want, rtol=1e-5, atol=1e-5)
