"""Sparse COO tensors in files: ember.save writes torch's form (torch.load(weights_only=True) reads it), ember.load
reads torch's files, state_dicts with a sparse buffer round-trip, and a file cannot smuggle in bad indices."""
from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _dense(t):
    return t.to_dense().detach().cpu().numpy()


def test_ember_file_is_read_by_torch_and_back() -> None:
    s = ember.sparse_coo_tensor([[0, 1, 1], [1, 0, 0]], [1.0, 2.0, 3.0], (2, 3))
    buffer = io.BytesIO()
    ember.save({"uncoalesced": s, "coalesced": s.coalesce(), "hybrid": ember.ones(2, 2).to_sparse(1)}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert loaded["uncoalesced"].is_sparse and not loaded["uncoalesced"].is_coalesced()
    assert loaded["coalesced"].is_coalesced() and loaded["hybrid"].dense_dim() == 1
    for key in loaded:
        np.testing.assert_array_equal(_dense(loaded[key]), _dense({"uncoalesced": s, "coalesced": s,
                                                                   "hybrid": ember.ones(2, 2)}[key]))
    again = io.BytesIO()
    torch.save(loaded, again)
    again.seek(0)
    back = ember.load(again)
    assert back["uncoalesced"]._indices().tolist() == s._indices().tolist()
    assert back["coalesced"].is_coalesced() and not back["uncoalesced"].is_coalesced()
    np.testing.assert_array_equal(_dense(back["hybrid"]), np.ones((2, 2)))


def test_state_dict_with_a_sparse_buffer_round_trips() -> None:
    class Graph(ember.nn.Module):
        def __init__(self, adj):
            super().__init__()
            self.register_buffer("adj", adj)
            self.lin = ember.nn.Linear(3, 2)

    saved = Graph(ember.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 3.0]]).to_sparse())
    buffer = io.BytesIO()
    ember.save(saved.state_dict(), buffer)
    buffer.seek(0)
    fresh = Graph(ember.zeros(3, 3).to_sparse())
    fresh.load_state_dict(ember.load(buffer))
    assert fresh.adj.is_sparse and fresh.adj._nnz() == 3
    np.testing.assert_array_equal(_dense(fresh.adj), _dense(saved.adj))


def test_files_with_bad_sparse_tensors_are_refused() -> None:
    bad = torch.sparse_coo_tensor([[0, 5], [1, 0]], [1.0, 2.0], (2, 2), check_invariants=False)
    buffer = io.BytesIO()
    torch.save({"adj": bad}, buffer)
    buffer.seek(0)
    with pytest.raises(Exception, match="size is inconsistent with indices"):
        ember.load(buffer)


def test_pickle_and_deepcopy_keep_the_entries() -> None:
    s = ember.sparse_coo_tensor([[1, 0, 1], [0, 1, 0]], [1.0, 2.0, 3.0], (2, 2)).requires_grad_()
    for copied in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
        assert copied.is_sparse and copied._nnz() == 3 and not copied.is_coalesced()
        np.testing.assert_array_equal(_dense(copied), _dense(s))
    assert pickle.loads(pickle.dumps(s)).requires_grad
