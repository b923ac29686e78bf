"""einsum with '...' (broadcast batch dims), implicit output, diagonals, repeated operands and the
operand-list / sublist call forms, checked against torch 2.13, numpy.einsum and finite differences."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember
from ember.autograd.gradcheck import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")

CASES = [
    ("...ij,...jk", [(5, 2, 3), (3, 4)]),
    ("...ij,...jk", [(2, 1, 2, 3), (3, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 3), (3, 4)]),
    ("bij,...j->bi", [(2, 3, 4), (7, 4)]),
    ("bij,...j->bi", [(2, 3, 4), (4,)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("...ii", [(2, 3, 3)]),
    ("...ij,...j->...i", [(2, 3, 4), (5, 1, 4)]),
    ("i...->i", [(2, 3, 4)]),
    ("...", [(2, 3)]),
    ("ba,...", [(2, 3), (4,)]),
    ("i...j,j...k->i...k", [(2, 3, 4), (4, 3, 2)]),
    ("ij...,jk...->ik...", [(2, 3, 4), (3, 2, 1)]),
    ("...ij->...ji", [(2, 3)]),
    ("i,i->i", [(3,), (1,)]),
    ("Ab,bA", [(2, 3), (3, 2)]),
    ("...a,...a->...", [(2, 3), (3,)]),
    ("...ij,...jk,...kl->...il", [(2, 2, 3), (3, 4), (1, 4, 2)]),
]


def _arrays(shapes: list, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("equation,shapes", CASES, ids=[f"{e}|{s}" for e, s in CASES])
def test_forward_and_grads_match_torch(equation: str, shapes: list) -> None:
    arrays = _arrays(shapes)
    xs = [ember.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = ember.einsum(equation, *xs), torch.einsum(equation, *ts)
    assert tuple(out.shape) == tuple(want.shape)
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12)
    seed = np.random.default_rng(1).standard_normal(tuple(want.shape))
    (out * ember.tensor(seed)).sum().backward()
    (want * torch.tensor(seed)).sum().backward()
    for x, t in zip(xs, ts):
        assert x.grad.shape == x.shape
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


NUMPY_CASES = [c for c in CASES if c[0] not in ("bij,...j->bi", "i...->i")]  # NumPy can't sum '...' dims away


@pytest.mark.parametrize("equation,shapes", NUMPY_CASES, ids=[f"{e}|{s}" for e, s in NUMPY_CASES])
def test_forward_matches_numpy(equation: str, shapes: list) -> None:
    arrays = _arrays(shapes, seed=3)
    out = ember.einsum(equation, *[ember.tensor(a) for a in arrays])
    np.testing.assert_allclose(out.numpy(), np.einsum(equation, *arrays), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("equation,shapes", [
    ("...ij,...jk", [(2, 1, 2, 3), (3, 3, 2)]),
    ("bij,...j->bi", [(2, 3, 4), (2, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i,i->i", [(3,), (1,)]),
    ("...ij,...jk,...kl->...il", [(2, 2, 3), (3, 2), (1, 2, 2)]),
])
def test_finite_differences_first_and_second_order(equation: str, shapes: list) -> None:
    xs = [ember.tensor(a, requires_grad=True) for a in _arrays(shapes, seed=4)]

    def fn(*args: Any) -> Any:
        return ember.einsum(equation, *args)

    assert gradcheck(fn, xs)
    assert gradgradcheck(lambda *args: fn(*args) ** 2, xs)


def test_repeated_operand_gets_both_gradients() -> None:
    a = _arrays([(2, 3, 3)])[0]
    x, t = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    ember.einsum("...ij,...jk->...ik", x, x).sum().backward()
    torch.einsum("...ij,...jk->...ik", t, t).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12)
    x = ember.tensor(a, requires_grad=True)
    assert gradgradcheck(lambda u: ember.einsum("...ij,...ij->...", u, u), (x,))


def test_operand_list_and_sublist_forms() -> None:
    a, b = _arrays([(5, 2, 3), (3, 4)])
    ea, eb, ta, tb = ember.tensor(a), ember.tensor(b), torch.tensor(a), torch.tensor(b)
    want = torch.einsum("...ij,jk", ta, tb).numpy()
    np.testing.assert_allclose(ember.einsum("...ij,jk", [ea, eb]).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(ember.einsum("...ij,jk", (ea, eb)).numpy(), want, rtol=1e-12)
    got = ember.einsum(ea, [Ellipsis, 0, 1], eb, [1, 2], [Ellipsis, 0, 2])
    np.testing.assert_allclose(got.numpy(), torch.einsum(ta, [Ellipsis, 0, 1], tb, [1, 2], [Ellipsis, 0, 2]).numpy(),
                               rtol=1e-12)
    np.testing.assert_allclose(ember.einsum(ea, [Ellipsis, 0, 1], eb, [1, 2]).numpy(),
                               torch.einsum(ta, [Ellipsis, 0, 1], tb, [1, 2]).numpy(), rtol=1e-12)


def test_mixed_dtypes_like_torch() -> None:
    # torch 2.13 refuses mixed dtypes where einsum contracts ("expected scalar type Float but found
    # Double") and promotes a pure elementwise product.
    a, b = _arrays([(2, 3), (3,)])
    with pytest.raises(RuntimeError, match="same dtype"):
        ember.einsum("...j,j", ember.tensor(a, dtype=ember.float32), ember.tensor(b))
    out = ember.einsum("i,i->i", ember.tensor(b, dtype=ember.float32), ember.tensor(b))
    assert out.dtype == ember.float64
    assert ember.einsum("...ij->...", ember.ones(2, 3, dtype=ember.int64)).dtype == ember.int64


def test_one_record_with_an_explicit_equation() -> None:
    x = ember.randn(4, 2, 3, requires_grad=True)
    out = ember.einsum("...ij,j", x, ember.randn(3))
    assert out.grad_fn.name() == "EinsumBackward0"
    assert "..." not in out.grad_fn.attrs["equation"]
    assert "->" in out.grad_fn.attrs["equation"]


@pytest.mark.parametrize("equation,shapes,match", [
    ("i.j", [(2, 3)], "found '.' for operand 0 that is not part of any ellipsis"),
    ("ij->jj", [(2, 3)], "output subscript j appears more than once in the output"),
    ("ij,jk", [(2, 3), (4, 5)], "subscript j has size 4 for operand 1 which does not broadcast"),
    ("ij", [(2, 3, 4)], "does not match the number of dimensions"),
    ("...ij,...jk", [(2, 2, 3), (3, 3, 4)], "does not broadcast"),
    ("ij->k", [(2, 3)], "output subscript k does not appear"),
    ("ij,jk", [(2, 3)], "names 2 operands but 1 were given"),
])
def test_errors_name_the_problem(equation: str, shapes: list, match: str) -> None:
    with pytest.raises(RuntimeError, match=match):
        ember.einsum(equation, *[ember.ones(*s) for s in shapes])
