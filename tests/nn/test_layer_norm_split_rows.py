"""layer_norm and its backward by row blocks in cache, split over ember's threads (ember/ops/layer_norm_split.py),
the NumPy-only install's path: the same bits on one thread and two, the one-call impls' accuracy (against a
long double run: the blocks' row sums are BLAS products, not NumPy's reductions), the one-call result where a rare
correction sends the call back to it, the split really taken, and values and gradients against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.ops import layer_norm_split, nn_ops

torch = pytest.importorskip("torch")


def _threads(monkeypatch: pytest.MonkeyPatch, n: int) -> list:
    """``n`` ember threads for the split module, without its native kernels (the NumPy-only install's path;
    tests/nn/test_layer_norm_native.py tests the kernels); returns a list that records each row-block run."""
    runs: list = []
    monkeypatch.setattr(layer_norm_split, "native_kernel", lambda xp, name: None)
    real = layer_norm_split.parallel_for

    def spy(fn, total, min_chunk=1):
        runs.append(total)
        real(fn, total, min_chunk)

    monkeypatch.setattr(layer_norm_split, "num_threads", lambda: n)
    monkeypatch.setattr(layer_norm_split, "parallel_for", spy)
    return runs


def _both_ways(monkeypatch, fn):
    """(the one-call impl's result, the split's on 2 threads, the split's row-block runs); the split on one
    thread (cache-sized pieces, no hand-off) must give the same bits as on two."""
    _threads(monkeypatch, 1)
    with monkeypatch.context() as one_call:
        one_call.setattr(layer_norm_split, "worth_splitting", lambda *a, **k: False)
        whole = fn()
    one_thread = fn()
    runs = _threads(monkeypatch, 2)
    two_threads = fn()
    for a, b in zip(one_thread if isinstance(one_thread, tuple) else (one_thread,),
                    two_threads if isinstance(two_threads, tuple) else (two_threads,)):
        assert np.array_equal(a, b, equal_nan=True)
    return whole, two_threads, runs


def _inputs(rng, shape, count, dtype, affine):
    x = rng.standard_normal(shape).astype(dtype) * 3 + 1
    norm = shape[len(shape) - count:]
    params = (rng.standard_normal(norm).astype(dtype), rng.standard_normal(norm).astype(dtype))[:affine]
    return x, params


def _as_accurate(split, whole, exact, dtype) -> None:
    """Each split result as close to the long double (x87) result as the one-call impl's (2x its error, plus 4 units of
    rounding at the values' scale)."""
    unit = float(np.finfo(dtype).eps)
    for s, w, e in zip(split, whole, exact):
        assert s.dtype == w.dtype and s.shape == w.shape
        scale = float(np.max(np.abs(e)))
        assert float(np.max(np.abs(s - e))) <= 2 * float(np.max(np.abs(w - e))) + 4 * unit * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count", [1, 2])
@pytest.mark.parametrize("affine", [0, 1, 2])
def test_split_is_as_accurate_as_one_call(monkeypatch, dtype, count, affine):
    rng = np.random.default_rng(0)
    x, params = _inputs(rng, (6, 128, 48, 8), count, dtype, affine)
    attrs = {"count": count, "eps": 1e-5, "has_weight": affine >= 1}
    with monkeypatch.context() as one_call:
        one_call.setattr(layer_norm_split, "worth_splitting", lambda *a, **k: False)
        exact = nn_ops._layer_norm_impl(np, x.astype(np.longdouble), *(p.astype(np.longdouble) for p in params), **attrs)
    whole, split, runs = _both_ways(monkeypatch, lambda: nn_ops._layer_norm_impl(np, x, *params, **attrs))
    assert len(runs) == 1  # the blocks went to parallel_for once
    _as_accurate(split, whole, exact, dtype)
    y, mean, rstd = whole
    g = rng.standard_normal(x.shape).astype(dtype)
    weight = params[:1] if affine >= 1 else ()
    with monkeypatch.context() as one_call:
        one_call.setattr(layer_norm_split, "worth_splitting", lambda *a, **k: False)
        exact_b = nn_ops._layer_norm_backward_impl(np, g.astype(np.longdouble), x.astype(np.longdouble), *(
            a.astype(np.longdouble) for a in (mean, rstd) + weight), count=count)
    whole_b, split_b, runs = _both_ways(
        monkeypatch, lambda: nn_ops._layer_norm_backward_impl(np, g, x, mean, rstd, *weight, count=count))
    assert len(runs) == 1  # the blocks went to parallel_for once
    _as_accurate(split_b, whole_b, exact_b, dtype)


@pytest.mark.parametrize("special", ["big_mean", "overflow", "nan", "inf"])
def test_rare_corrections_in_one_block_give_the_one_call_result(monkeypatch, special):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 64, 512)).astype(np.float32)
    row = x[7, 3]  # in the last block only
    if special == "big_mean":
        row[:] = 1e7 + np.arange(512, dtype=np.float32)
    elif special == "overflow":
        row[:] = np.float32(3e19) * np.sign(row)
    else:
        row[5] = np.nan if special == "nan" else np.inf
    w, b = rng.standard_normal(512).astype(np.float32), rng.standard_normal(512).astype(np.float32)
    attrs = {"count": 1, "eps": 1e-5, "has_weight": True}
    whole, split, _ = _both_ways(monkeypatch, lambda: nn_ops._layer_norm_impl(np, x, w, b, **attrs))
    for a, c in zip(whole, split):
        np.testing.assert_array_equal(a, c)
    g = rng.standard_normal(x.shape).astype(np.float32)
    whole_b, split_b, _ = _both_ways(
        monkeypatch, lambda: nn_ops._layer_norm_backward_impl(np, g, x, whole[1], whole[2], w, count=1))
    for a, c in zip(whole_b, split_b):
        if special == "big_mean":  # the backward's one correction: the one-call impl's bits
            np.testing.assert_array_equal(a, c)
        else:  # no correction in the backward: the blocks' sums, NaN where the one call has NaN
            np.testing.assert_allclose(c, a, rtol=1e-5, atol=1e-5)


def test_split_layer_norm_vs_torch(monkeypatch):
    runs = _threads(monkeypatch, 2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 256, 384)).astype(np.float32)
    w, b = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    ours = [ember.tensor(a, requires_grad=True) for a in (x, w, b)]
    theirs = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in (x, w, b)]
    out = ember.nn.functional.layer_norm(ours[0], (384,), ours[1], ours[2])
    want = torch.nn.functional.layer_norm(theirs[0], (384,), theirs[1], theirs[2])
    g = rng.standard_normal(x.shape).astype(np.float32)
    out.backward(ember.tensor(g))
    want.backward(torch.tensor(g.astype(np.float64)))
    assert len(runs) == 2  # forward and backward
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, t in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_small_or_half_inputs_are_not_split(monkeypatch):
    runs = _threads(monkeypatch, 2)
    rng = np.random.default_rng(3)
    for shape, dtype in [((4, 64, 32), np.float32), ((1, 512, 512), np.float32), ((8, 256, 256), np.float16)]:
        x = ember.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
        ember.nn.functional.layer_norm(x, shape[-1:]).sum().backward()
    assert runs == []
