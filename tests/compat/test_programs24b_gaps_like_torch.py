"""Gaps found running linear_operator's test suite under ember (programs24b), each compared with torch.

* ``Size`` stays a ``Size`` through ``+`` / ``*`` with tuples (``broadcast_shapes(a, b) + Size([m, n])`` then
  ``.numel()``), checks its items (torch's TypeError for a float) and takes integer 0-d tensors;
* a list holding a slice, None, ``...``, a tensor or a sequence indexes as a tuple (torch's legacy rule, with its
  deprecation warning): ``x[[slice(0, n), slice(None)]]``;
* ``.mT`` of a (batched) sparse COO tensor.
"""
from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _outcome(fn):
    try:
        out = fn()
    except TypeError as error:
        return "TypeError", str(error).replace("torch.", "").replace("ember.", "")
    return type(out).__name__, tuple(out)


@pytest.mark.parametrize("case", [
    lambda S: S([2]) + (1,), lambda S: (1,) + S([2]), lambda S: S([2]) * 2, lambda S: 2 * S([2]),
    lambda S: S([2, 3])[::-1], lambda S: S([2]) + (), lambda S: S([2]) + (1.5,), lambda S: (1.5,) + S([2]),
    lambda S: S([3.0]), lambda S: S([2]) + ("a",), lambda S: S([True, 2]), lambda S: S(np.array([2, 3])),
    lambda S: S(x for x in (4, 5)), lambda S: S([2]) + [1],
], ids=["add", "radd", "mul", "rmul", "slice", "add-empty", "add-float", "radd-float", "float", "add-str", "bool",
        "ndarray", "generator", "add-list"])
def test_size_arithmetic_and_items_as_torch(case):
    got, want = _outcome(lambda: case(ember.Size)), _outcome(lambda: case(torch.Size))
    if got[0] == "TypeError" and "list" in want[1]:
        assert want[0] == "TypeError"  # (torch's words for a list operand differ only in quoting)
    else:
        assert got == want


def test_size_of_integer_tensors_and_its_numel_pickle():
    for lib in (ember, torch):
        s = lib.Size([lib.tensor(3), 2])
        assert list(s) == [3, 2] and all(type(v) is int for v in s)
        with pytest.raises(TypeError, match="item 0 is 'Tensor'"):
            lib.Size([lib.tensor(2.0)])
    batch = ember.broadcast_shapes((2, 1), (3,)) + ember.Size([4, 5])
    assert type(batch) is ember.Size and batch.numel() == 2 * 3 * 4 * 5
    assert pickle.loads(pickle.dumps(batch)) == batch and type(pickle.loads(pickle.dumps(batch))) is ember.Size
    assert repr(ember.zeros(2, 3).shape[1:]) == "ember.Size([3])"


@pytest.mark.parametrize("key", [
    lambda L: [slice(0, L.tensor(2)), slice(None)], lambda L: [slice(0, 2), 1], lambda L: [None, 1],
    lambda L: [Ellipsis, 1], lambda L: [L.tensor(0), L.tensor(1)], lambda L: [[0, 1], [1, 0]],
    lambda L: [0, 2], lambda L: [True, False, True, True],
], ids=["tensor-slice", "slice-int", "none", "ellipsis", "tensors", "lists", "ints", "bools"])
def test_list_index_with_slices_is_a_tuple_as_torch(key):
    a = np.arange(24.0).reshape(4, 6)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        want = torch.tensor(a)[key(torch)]
    with warnings.catch_warnings(record=True) as got_seen:
        warnings.simplefilter("always")
        got = ember.tensor(a)[key(ember)]
    assert got.shape == want.shape and np.array_equal(got.numpy(), want.numpy())
    assert any("non-tuple sequence" in str(w.message) for w in got_seen) == \
        any("non-tuple sequence" in str(w.message) for w in seen)
    # and as the target of an assignment
    e, t = ember.tensor(a), torch.tensor(a)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e[key(ember)] = -1.0
        t[key(torch)] = -1.0
    assert np.array_equal(e.numpy(), t.numpy())


def test_sparse_coo_mT_batched_as_torch():
    i = [[0, 0, 1, 1], [0, 1, 1, 0], [2, 0, 1, 2]]
    v = [1.0, 2.0, 3.0, 4.0]
    got = ember.sparse_coo_tensor(i, v, (2, 2, 3)).mT
    want = torch.sparse_coo_tensor(i, v, (2, 2, 3)).mT
    assert got.shape == want.shape == (2, 3, 2)
    assert np.array_equal(got.to_dense().numpy(), want.to_dense().numpy())
    m = ember.sparse_coo_tensor([[0, 1], [2, 0]], [5.0, 6.0], (2, 3))
    assert np.array_equal(m.mT.to_dense().numpy(), m.to_dense().numpy().T)


@pytest.mark.parametrize("lib", [ember, torch], ids=["ember", "torch"])
def test_module_cpu_does_not_call_an_overridden_to(lib):
    class Util(lib.nn.Module):  # gpytorch's NNUtil: to() written with cpu()
        def __init__(self):
            super().__init__()
            self.register_buffer("b", lib.ones(2, dtype=lib.float64))

        def to(self, device):
            return self.cpu() if str(device) == "cpu" else self.cuda()

    util = Util().to("cpu")
    assert util.b.device.type == "cpu" and util.b.dtype == lib.float64
    assert util.cpu() is util
