"""``torch.sparse.FloatTensor(indices, values, size)`` and the other legacy sparse types, as PyTorch 2.13's
(tkipf/pygcn builds its adjacency matrix this way): the result's dtype, layout, values, ``type()``,
``isinstance`` and the deprecation warning."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor"]
INDICES = [[0, 1, 2, 2], [1, 0, 2, 0]]


def quiet(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [str(w.message) for w in caught]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("values", ["float32", "float64", "int64"])
@pytest.mark.parametrize("with_size", [True, False])
def test_indices_values_size_constructor_like_torch(name, values, with_size):
    vals = np.array([1, 2, 3, 4]).astype(values)
    e_args = [ember.tensor(INDICES), ember.tensor(vals)] + ([ember.Size([3, 4])] if with_size else [])
    t_args = [torch.tensor(INDICES), torch.tensor(vals)] + ([torch.Size([3, 4])] if with_size else [])
    ours, our_warnings = quiet(getattr(ember.sparse, name), *e_args)
    theirs, their_warnings = quiet(getattr(torch.sparse, name), *t_args)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]  # the values' dtype, as torch
    assert ours.layout is ember.sparse_coo and theirs.layout is torch.sparse_coo
    assert tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.to_dense().numpy(), theirs.to_dense().numpy())
    assert ours.type() == theirs.type()
    # torch warns once per process (TORCH_WARN_ONCE), as ember: the messages agree where both warned
    known = {w.split(" (Triggered internally")[0] for w in their_warnings} | {
        "torch.sparse.SparseTensor(indices, values, shape, *, device=) is deprecated.  Please use "
        "torch.sparse_coo_tensor(indices, values, shape, dtype=, device=)."}
    assert set(our_warnings) <= known
    for other in ("FloatTensor", "LongTensor"):
        assert isinstance(ours, getattr(ember.sparse, other)) == isinstance(theirs, getattr(torch.sparse, other))
        assert isinstance(ours, getattr(ember, other)) == isinstance(theirs, getattr(torch, other))


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "LongTensor"])
@pytest.mark.parametrize("sizes", [(), (2, 3), (4,)])
def test_size_constructor_gives_an_empty_sparse_tensor_like_torch(name, sizes):
    ours, _ = quiet(getattr(ember.sparse, name), *sizes)
    theirs, _ = quiet(getattr(torch.sparse, name), *sizes)
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours._nnz() == theirs._nnz() == 0
    assert repr(getattr(ember.sparse, name)) == repr(getattr(torch.sparse, name))
    assert not isinstance(ember.ones(2), getattr(ember.sparse, name))


def test_pygcn_style_adjacency_product_and_gradient_like_torch():
    rng = np.random.default_rng(0)
    idx = np.stack([rng.integers(0, 5, 9), rng.integers(0, 5, 9)])
    vals = rng.uniform(size=9).astype(np.float32)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    a, _ = quiet(ember.sparse.FloatTensor, ember.from_numpy(idx), ember.from_numpy(vals), ember.Size([5, 5]))
    ta, _ = quiet(torch.sparse.FloatTensor, torch.from_numpy(idx), torch.from_numpy(vals), torch.Size([5, 5]))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ours, theirs = ember.spmm(a, ex), torch.spmm(ta, tx)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6, atol=1e-6)
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-6)
