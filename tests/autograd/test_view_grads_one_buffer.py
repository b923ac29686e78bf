"""Gradients of several basic-index views of one tensor add into one buffer (ember/autograd/index_grad.py), and
embedding-style row scatter-adds run in exact rounds (ember/backends/cpu_scatter.py): both against torch and
against the full-array sums / ``np.add.at`` they replace."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.autograd.index_grad import IndexGrad, _region, accumulate
from ember.backends.cpu_scatter import scatter_add_rows


def _specials(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    g = rng.standard_normal(shape).astype(np.float32)
    flat = g.reshape(-1)
    flat[::97] = -0.0
    flat[5::211] = np.inf
    flat[7::307] = np.nan
    return g


def _pair(x: np.ndarray) -> tuple:
    return ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _same(a: ember.Tensor, b: torch.Tensor) -> None:
    np.testing.assert_array_equal(a.numpy(), b.numpy())  # NaN in the same places, equal values otherwise


def test_qkv_unpack_gradient_equals_torch():
    rng = np.random.default_rng(0)
    b, t, h, d = 2, 64, 3, 48  # 3 * b * h * t * d elements: above the lazy-gradient size
    x = rng.standard_normal((b, t, 3 * h * d)).astype(np.float32)
    gs = [_specials(rng, (b, h, t, d)) for _ in range(3)]
    ex, tx = _pair(x)
    outs = []
    for lib, xx in ((ember, ex), (torch, tx)):
        q, k, v = (xx * 1).view(b, t, 3, h, d).permute(2, 0, 3, 1, 4)
        lib.autograd.backward([q, k, v], [lib.tensor(g) for g in gs])
        outs.append(xx.grad)
    _same(*outs)


@pytest.mark.parametrize("used", [(0, 2), (1,), (0, 1, 2)])
def test_split_pieces_some_unused(used):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((40, 3 * 512)).astype(np.float32)
    ex, tx = _pair(x)
    grads = {i: _specials(rng, (40, 512)) for i in used}
    for lib, xx in ((ember, ex), (torch, tx)):
        pieces = (xx + 0).split(512, dim=-1)
        lib.autograd.backward([pieces[i] for i in used], [lib.tensor(grads[i]) for i in used])
    _same(ex.grad, tx.grad)


def test_overlapping_views_and_a_direct_use():
    """Overlapping slices, the tensor itself used too, in both orders: the sums torch makes."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 600)).astype(np.float32)
    w = rng.standard_normal((64, 600)).astype(np.float32)
    for direct_first in (True, False):
        ex, tx = _pair(x)
        for lib, xx in ((ember, ex), (torch, tx)):
            y = xx * 2
            ww = lib.tensor(w)
            parts = [(y * ww).sum()] if direct_first else []
            parts += [(y[:40] ** 2).sum(), (y[20:] * 3).sum(), y[5:50, 100:].sum()]
            if not direct_first:
                parts.append((y * ww).sum())
            sum(parts).backward()
        np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_leaf_views_and_hooks_see_full_arrays():
    x = np.arange(64 * 512, dtype=np.float32).reshape(64, 512) / 1000
    ex, tx = _pair(x)
    seen = {}
    for name, (lib, xx) in {"ember": (ember, ex), "torch": (torch, tx)}.items():
        y = xx + 1
        y.register_hook(lambda g, name=name: seen.__setitem__(name, np.array(g.detach().numpy())))
        (y[0].sum() + (y[1:] * 2).sum() + y[:, 0].sum()).backward()
    np.testing.assert_array_equal(seen["ember"], seen["torch"])
    _same(ex.grad, tx.grad)


def test_accumulate_matches_the_full_array_sums():
    """Bits of the one-buffer sums against zeros-plus-slice arrays added as the engine did before."""
    rng = np.random.default_rng(3)
    shape = (6, 50, 40)
    cases = [((slice(0, 2),), (slice(2, 6),)), ((1,), (slice(0, 3),), (Ellipsis, slice(10, 20))),
             ((slice(None), 3), (5,), (slice(1, 4), slice(None), 7))]
    for indices in cases:
        values = [_specials(rng, np.zeros(shape)[i].shape) for i in indices]
        full = []
        for i, v in zip(indices, values):
            z = np.zeros(shape, np.float32)
            z[i] = v
            full.append(z)
        expected = full[0]
        for z in full[1:]:
            expected = expected + z
        total = IndexGrad(values[0], indices[0], shape)
        for i, v in zip(indices[1:], values[1:]):
            total = accumulate(total, IndexGrad(v, i, shape))
        got = total.materialize()
        nonzero = expected != 0  # signed zeros may differ only where two slices overlap with -0.0
        np.testing.assert_array_equal(got[nonzero | np.isnan(expected)], expected[nonzero | np.isnan(expected)])
        np.testing.assert_array_equal(got == 0, expected == 0)
        # an array first, then a view's slice
        dense = _specials(rng, shape)
        np.testing.assert_array_equal(accumulate(dense, IndexGrad(values[0], indices[0], shape)).materialize(),
                                      dense + full[0])
    assert accumulate(np.zeros(shape, np.float64), IndexGrad(values[0], indices[0], shape)) is None  # dtypes differ


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.int32)  # -0.0 and +0.0 differ, NaNs compared by payload


@pytest.mark.parametrize("how", ["unpack", "unbind", "chunk", "split_sizes"])
def test_views_covering_the_tensor_give_torch_bits_and_base_layout(how):
    """Every piece of one tensor gets a gradient: the buffer is filled by copies (no zero fill under them), so each
    element is its piece's value bit for bit (a -0.0 stays -0.0, as torch's stack/cat backward keeps it); the q/k/v
    unpack's buffer is laid out so that the view before the permute takes its gradient without a copy."""
    rng = np.random.default_rng(5)
    b, t, h, d = 2, 64, 3, 48
    x = rng.standard_normal((b, t, 3 * h * d)).astype(np.float32)
    ex, tx = _pair(x)
    layouts = {}
    for lib, xx in ((ember, ex), (torch, tx)):
        y = xx * 1
        y.register_hook(lambda g, lib=lib: layouts.__setitem__(lib.__name__, g.is_contiguous()) and None)
        if how == "unpack":
            pieces = list(y.view(b, t, 3, h, d).permute(2, 0, 3, 1, 4))
        elif how == "unbind":
            pieces = list(y.view(b, t, 3, h * d).unbind(2))
        elif how == "chunk":
            pieces = list(y.chunk(3, dim=-1))
        else:
            pieces = list(y.split([130, 150, 3 * h * d - 280], dim=-1))  # each above the lazy size (16K)
        grads = [_specials(np.random.default_rng(i), tuple(p.shape)) for i, p in enumerate(pieces)]
        lib.autograd.backward(pieces, [lib.tensor(g) for g in grads])
    np.testing.assert_array_equal(_bits(ex.grad.numpy()), _bits(tx.grad.numpy()))
    assert layouts["ember"] and layouts["torch"]


def test_pieces_partly_covering_zero_only_the_rest():
    """Pieces that do not cover the tensor: the gaps read +0.0 (not uninitialized memory), whatever the order; an
    overlapping piece after them adds."""
    shape = (5, 40, 30)
    rng = np.random.default_rng(6)
    for order in ([(0,), (3,)], [(3,), (0,)], [(slice(1, 3),), (4,)], [(slice(None), slice(30, 40)), (slice(None), 2)]):
        for trial in range(3):  # fresh buffers from the allocator: garbage would show
            values = [_specials(rng, np.zeros(shape)[i].shape) for i in order]
            want = np.zeros(shape, np.float32)
            for i, v in zip(order, values):
                want[i] = v
            total = IndexGrad(values[0], order[0], shape)
            for i, v in zip(order[1:], values[1:]):
                total = accumulate(total, IndexGrad(v, i, shape))
            np.testing.assert_array_equal(_bits(total.materialize()), _bits(want))
            single = IndexGrad(values[0], order[0], shape, dims=(2, 0, 1)).materialize()  # one piece, other layout
            alone = np.zeros(shape, np.float32)
            alone[order[0]] = values[0]
            np.testing.assert_array_equal(_bits(single), _bits(alone))
    a, b, c = (rng.standard_normal((2, 40, 30)).astype(np.float32) for _ in range(3))
    total = accumulate(accumulate(IndexGrad(a, (slice(0, 2),), shape), IndexGrad(b, (slice(3, 5),), shape)),
                       IndexGrad(c, (slice(1, 3),), shape))
    want = np.zeros(shape, np.float32)
    want[0:2] += a
    want[3:5] += b
    want[1:3] += c
    np.testing.assert_array_equal(total.materialize(), want)


def test_copies_and_fills_split_over_threads_give_the_same_bits(monkeypatch):
    """Large copies and gap fills run in blocks on ember's threads: the same bits as one call."""
    from ember import _config
    from ember.autograd import index_grad

    shape = (4, 48, 64, 36)
    rng = np.random.default_rng(9)
    values = [_specials(rng, shape[1:]) for _ in range(3)]
    results = []
    for threads, split in ((1, 1 << 20), (2, 1000)):
        monkeypatch.setattr(_config, "CPU_THREADS", threads)
        monkeypatch.setattr(index_grad, "_SPLIT", split)
        total = IndexGrad(values[0], (0,), shape, dims=(1, 0, 2, 3))
        total = accumulate(accumulate(total, IndexGrad(values[1], (3,), shape)), IndexGrad(values[2], (1,), shape))
        results.append(_bits(total.materialize()))
    np.testing.assert_array_equal(results[0], results[1])
    assert not results[0][2].any()  # the gap: +0.0


def test_regions_the_buffer_tracks():
    shape = (3, 4, 5)
    assert _region((1,), shape) == (0, 1, 2) and _region((-1,), shape) == (0, 2, 3)
    assert _region((slice(None), slice(1, 3)), shape) == (1, 1, 3)
    assert _region((slice(None), slice(None), np.int64(4)), shape) == (2, 4, 5)
    assert _region((), shape) == (0, 0, 3)
    for index in [(1, 2), (slice(0, 3, 2),), (Ellipsis, 1), (None, 1), (slice(None), slice(3, 1)), (True,)]:
        assert _region(index, shape) is None or index == (slice(None), slice(3, 1))
    assert _region((slice(None), slice(3, 1)), shape) == (1, 3, 3)  # empty: meets nothing


@pytest.mark.parametrize("rows,n,negative", [(65, 4096, False), (7, 300, True), (5000, 4096, False), (3, 640, False)])
def test_scatter_rounds_are_add_at_bit_for_bit(rows, n, negative):
    rng = np.random.default_rng(rows)
    idx = rng.integers(-rows if negative else 0, rows, (n // 64, 64))
    values = _specials(rng, idx.shape + (3, 17))
    expected = np.zeros((rows, 3, 17), np.float32)
    np.add.at(expected, (idx,), values)
    got = np.zeros_like(expected)
    assert scatter_add_rows(np, got, (idx,), values)
    np.testing.assert_array_equal(got.view(np.int32), expected.view(np.int32))


def test_scatter_declines_what_it_does_not_do():
    out = np.zeros((10, 4), np.float32)
    assert not scatter_add_rows(np, out, (np.zeros(100, np.int64),), np.ones((100, 4), np.float32))  # one row
    assert not scatter_add_rows(np, out, (np.arange(40) % 10,), np.ones(4, np.float32))  # broadcast value
    assert not scatter_add_rows(np, out, (np.arange(40) % 10, 1), np.ones(40, np.float32))  # two indices
    with pytest.raises(IndexError):  # out of range: add.at's error, through index_put
        ember.zeros(10, 4).index_put_((ember.tensor(np.arange(40) % 11),), ember.ones(40, 4), accumulate=True)


def test_embedding_gradient_equals_torch():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((65, 48)).astype(np.float32)
    idx = rng.integers(0, 65, (16, 64))
    g = _specials(rng, (16, 64, 48))
    ew, tw = _pair(w)
    ember.nn.functional.embedding(ember.tensor(idx), ew).backward(ember.tensor(g))
    torch.nn.functional.embedding(torch.tensor(idx), tw).backward(torch.tensor(g))
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)
