"""Basic indexing records its node on the one-input path (getitem's later inputs take no gradient); gather checks
its index once: the nodes, values and gradients are as before and as torch's."""
import numpy as np
import pytest
import torch

import ember
from ember.ops import dispatch
from ember.ops.movement import GETITEM


def test_one_input_getitem_node_equals_the_general_paths():
    x = ember.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    y = x * 2.0
    for source in (x, y):  # a leaf and a node's output
        out = source[1:, :2]
        node = out.grad_fn
        general, general_needs = dispatch._record_node(GETITEM, (source,), node.attrs, GETITEM.nondiff_inputs,
                                                       GETITEM.save)
        assert node.needs_input_grad == general.needs_input_grad == general_needs == (True,)
        assert node.next_edges == general.next_edges
        assert node.next_edges[0][0] is (source if source.grad_fn is None else source.grad_fn)
        assert node.input_meta == general.input_meta
        assert node.saved == general.saved == (None,)


@pytest.mark.parametrize("case", ["int", "slices", "ellipsis", "none", "chunk", "gather", "gather_small_index"])
def test_basic_indexing_chunk_and_gather_gradients_match_torch(case):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 5, 6))
    index = rng.integers(0, 5, (4, 3, 6))
    ops = {
        "int": lambda lib, t, i: t[1] * 3.0,
        "slices": lambda lib, t, i: t[:, 1:4, ::2],
        "ellipsis": lambda lib, t, i: t[..., 2:] + t[0, :, :4],
        "none": lambda lib, t, i: t[:, None, 0],
        "chunk": lambda lib, t, i: lib.cat([c * (k + 1) for k, c in enumerate(t.chunk(3, -1))], -1),
        "gather": lambda lib, t, i: t.gather(1, lib.cat([i, i[:, :2]], 1)),
        "gather_small_index": lambda lib, t, i: t.gather(1, i[:, :, :4]),  # index smaller than t off the dim
    }
    results = []
    for lib in (ember, torch):
        t = lib.tensor(data, requires_grad=True)
        out = ops[case](lib, t, lib.tensor(index))
        (out * out).sum().backward()
        results.append((out.detach().numpy(), t.grad.numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12, atol=1e-12)


def test_gather_still_refuses_out_of_range_and_negative_indices():
    x = ember.ones(2, 3)
    for bad in (3, -1):
        with pytest.raises(RuntimeError, match=f"index {bad} is out of bounds for dimension 1 with size 3"):
            x.gather(1, ember.tensor([[0, bad], [1, 2]]))
