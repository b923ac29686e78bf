"""The nineteenth session's per-op paths (docs/cpu-performance.md, "w1eager19") against torch and NumPy: views by
the array's own methods, the error state of sigmoid set without ``np.errstate``, tiny matmuls without the GEMM
choice, and index bounds read as Python ints for small indices (gather, index_select, embedding, cross entropy)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import ember
from ember.ops import fp_quiet, movement

F, TF = ember.nn.functional, torch.nn.functional


@pytest.mark.parametrize("op", ["view", "reshape", "t", "transpose", "permute", "unsqueeze", "flatten"])
def test_views_share_memory_version_and_grads_as_torch(op):
    """Each view aliases its base (a write through the base shows), shares its version counter, and passes the
    gradient back as torch's; a non-contiguous source (a transposed tensor) included where torch's op is a view of
    it (a reshape of a transposed tensor copies, in both libraries)."""
    calls = {"view": lambda t: t.reshape(-1).view(3, 4), "reshape": lambda t: t.reshape(2, 6),
             "t": lambda t: t.t(), "transpose": lambda t: t.transpose(0, 1), "permute": lambda t: t.permute(1, 0),
             "unsqueeze": lambda t: t.unsqueeze(1), "flatten": lambda t: t.flatten()}
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    results = []
    for lib in (ember, torch):
        base = lib.tensor(x, requires_grad=True)
        sources = (base * 1,) if op in ("view", "reshape", "flatten") else (base * 1, (base * 1).t())
        for source in sources:
            out = calls[op](source)
            version = out._version
            with lib.no_grad():
                source.add_(1.0)
            assert out._version == version + 1  # one counter
            assert float(out.detach().sum()) == float(source.detach().sum())  # the write shows through the view
        (out * lib.arange(out.numel(), dtype=lib.float32).reshape(out.shape)).sum().backward()
        results.append((out.detach().numpy().copy(), base.grad.numpy().copy(), tuple(out.shape)))
    (e_out, e_grad, e_shape), (t_out, t_grad, t_shape) = results
    assert e_shape == t_shape
    np.testing.assert_array_equal(e_out, t_out)
    np.testing.assert_array_equal(e_grad, t_grad)


def test_fp_quiet_keeps_the_callers_other_settings_and_restores():
    """``enter(OVER)`` silences overflow only: a caller's divide="raise" still raises inside, and the state before
    is back after ``leave``, nested or not; the NumPy 1.x route (np.errstate itself) does the same."""
    before = np.geterr()
    with np.errstate(divide="raise"):
        token = fp_quiet.enter(fp_quiet.OVER)
        try:
            assert np.geterr()["over"] == "ignore" and np.geterr()["divide"] == "raise"
            with pytest.raises(FloatingPointError):
                np.float32(1.0) / np.float32(0.0)
            inner = fp_quiet.enter(fp_quiet.DIVIDE_INVALID)
            try:
                assert np.geterr()["divide"] == "ignore" and np.geterr()["over"] == "ignore"
            finally:
                fp_quiet.leave(inner)
            assert np.geterr()["divide"] == "raise"
        finally:
            fp_quiet.leave(token)
        assert np.geterr()["over"] == before["over"]
    assert np.geterr() == before


def test_fp_quiet_without_numpys_context_variable(monkeypatch):
    monkeypatch.setattr(fp_quiet, "_VAR", None)
    before = np.geterr()
    token = fp_quiet.enter(fp_quiet.OVER)
    try:
        assert np.geterr()["over"] == "ignore"
    finally:
        fp_quiet.leave(token)
    assert np.geterr() == before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sigmoid_silent_and_equal_to_the_formula_and_torch(dtype):
    """No overflow warning far below -88 (float32) / -709 (float64), the formula's bits exactly, torch's values
    within an ulp, and the gradient as torch's."""
    x = np.array([-1e4, -800.0, -100.0, -88.8, -20.0, -1e-3, 0.0, -0.0, 1e-3, 20.0, 100.0, np.inf, -np.inf, np.nan],
                 dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = ember.tensor(x, requires_grad=True)
        out = e.sigmoid()
        out.sum().backward()
    with np.errstate(over="ignore"):
        expected = 1 / (1 + np.exp(-x))
    np.testing.assert_array_equal(out.detach().numpy(), expected)
    t = torch.tensor(x, requires_grad=True)
    t_out = t.sigmoid()
    t_out.sum().backward()
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), rtol=2 * np.finfo(dtype).eps, atol=0)
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=4 * np.finfo(dtype).eps, atol=1e-45)


@pytest.mark.parametrize("shapes", [((4, 3), (3, 5)), ((1, 1), (1, 1)), ((0, 3), (3, 2)), ((3, 0), (0, 2)),
                                    ((64, 64), (64, 65))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_tiny_and_edge_matmuls_as_torch(shapes, dtype):
    """The tiny-product path (and the first size past it, 266K multiply-adds) gives torch's values and dtype,
    empty products included."""
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(shapes[0]) * 4).astype(dtype)
    b = (rng.standard_normal(shapes[1]) * 4).astype(dtype)
    e, t = ember.tensor(a).mm(ember.tensor(b)), torch.tensor(a).mm(torch.tensor(b))
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("size", [1, 5, movement.SMALL_RANGE, movement.SMALL_RANGE + 1, 1000])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, np.int8])
def test_int_range_is_numpys_min_and_max(size, dtype):
    rng = np.random.default_rng(size)
    data = rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=(size, 1), endpoint=True).astype(dtype)
    lo, hi = movement.int_range(data)
    assert (lo, hi) == (int(data.min()), int(data.max())) and type(lo) is int and type(hi) is int


@pytest.mark.parametrize("n", [3, movement.SMALL_RANGE + 7])
@pytest.mark.parametrize("bad", [None, -1, "size"])
def test_gather_index_select_embedding_cross_entropy_bounds_as_torch(n, bad):
    """Values and gradients as torch's for in-range indices of both sizes; an index of -1 or of the dimension's
    size raises in every op, as in torch (cross entropy: the IndexError family torch raises)."""
    rng = np.random.default_rng(n)
    classes = 6
    x = rng.standard_normal((n, classes)).astype(np.float32)
    rows = rng.integers(0, n, n)
    cols = rng.integers(0, classes, n)
    if bad is not None:
        rows[n // 2] = -1 if bad == -1 else n
        cols[n // 2] = -1 if bad == -1 else classes
    results = []
    for lib in (ember, torch):
        calls = [lambda v: v.gather(1, lib.tensor(cols).reshape(-1, 1)),
                 lambda v: v.index_select(0, lib.tensor(rows)),
                 lambda v: lib.nn.functional.embedding(lib.tensor(rows), v),
                 lambda v: lib.nn.functional.cross_entropy(v, lib.tensor(cols))]
        outs = []
        for call in calls:
            v = lib.tensor(x, requires_grad=True)
            if bad is not None:
                with pytest.raises((IndexError, RuntimeError)):
                    call(v)
                continue
            out = call(v)
            out.sum().backward()
            outs.append((out.detach().numpy(), v.grad.numpy()))
        results.append(outs)
    for (e_out, e_grad), (t_out, t_grad) in zip(*results):
        np.testing.assert_allclose(e_out, t_out, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(e_grad, t_grad, rtol=1e-6, atol=1e-6)
