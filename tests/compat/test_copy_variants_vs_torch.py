"""torch's ``*_copy`` functions and ``torch.alias``: values, dtypes and shapes equal to torch 2.13's, results that
own their memory (contiguous, no aliasing), gradients through the view op."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4, 5)).astype(np.float32)

CASES = [
    ("transpose_copy", (0, 2), {}),
    ("permute_copy", ((2, 0, 1),), {}),
    ("diagonal_copy", (), {"offset": 1, "dim1": 1, "dim2": 2}),
    ("select_copy", (1, 2), {}),
    ("slice_copy", (2, 1, 5, 2), {}),
    ("squeeze_copy", (), {}),
    ("unsqueeze_copy", (1,), {}),
    ("split_copy", (2, 1), {}),
    ("split_with_sizes_copy", ([1, 3], 1), {}),
    ("unbind_copy", (2,), {}),
    ("unfold_copy", (2, 2, 1), {}),
    ("view_copy", ((12, 5),), {}),
    ("view_copy", (ember.int32,), {}),
    ("detach_copy", (), {}),
    ("alias_copy", (), {}),
    ("as_strided_copy", ((2, 2), (1, 2), 3), {}),
    ("narrow_copy", (1, 1, 2), {}),
    ("expand_copy", ((2, 3, 4, 5),), {}),
]


def _torch_args(args):
    return tuple(getattr(torch, a.name) if isinstance(a, ember.dtype) else a for a in args)


@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_copy_variant_matches_torch_and_owns_memory(name, args, kwargs):
    x = ember.tensor(A)
    got = getattr(ember, name)(x, *args, **kwargs)
    want = getattr(torch, name)(torch.tensor(A), *_torch_args(args), **kwargs)
    got_list = list(got) if isinstance(got, tuple) else [got]
    want_list = list(want) if isinstance(want, tuple) else [want]
    assert len(got_list) == len(want_list)
    for g, w in zip(got_list, want_list):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_array_equal(g.numpy(), w.numpy())
        assert g.is_contiguous()
        before = x.numpy().copy()
        if g.numel():
            g.view(-1)[0] = 1234  # a write into the copy must not reach the input
        np.testing.assert_array_equal(x.numpy(), before)


def test_copy_variant_gradient_flows_like_the_view():
    a = RNG.standard_normal((3, 4))
    x = ember.tensor(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    w = RNG.standard_normal((4, 3))
    (ember.transpose_copy(x, 0, 1) * ember.tensor(w)).sum().backward()
    (torch.transpose_copy(tx, 0, 1) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_alias_shares_memory():
    x = ember.arange(3.0)
    ember.alias(x)[0] = 5.0
    assert x.tolist() == [5.0, 1.0, 2.0]
