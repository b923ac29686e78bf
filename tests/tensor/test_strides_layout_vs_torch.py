"""Strides as PyTorch: ``stride()``, ``is_contiguous(memory_format=...)`` and ``contiguous()`` of views (transposes,
permutes, expands, slices with steps, size-0 and size-1 dims, channels-last), and the layout of copies under
``preserve_format`` (``clone``, ``*_like``, ``to``), ``empty_strided`` and ``empty_permuted``, each compared with
torch 2.13 on the same calls (the cases are in layout_cases.py)."""
from __future__ import annotations

import pytest

import ember
from layout_cases import sources

torch = pytest.importorskip("torch")

SOURCES = sources()
# what each case does to the source tensor (the same call in both libraries)
DERIVED = {
    "self": lambda L, t: t,
    "contiguous": lambda L, t: t.contiguous(),
    "clone": lambda L, t: t.clone(),
    "clone_preserve": lambda L, t: t.clone(memory_format=L.preserve_format),
    "empty_like": lambda L, t: L.empty_like(t),
    "zeros_like": lambda L, t: L.zeros_like(t),
    "ones_like": lambda L, t: L.ones_like(t),
    "full_like": lambda L, t: L.full_like(t, 2.0),
    "rand_like": lambda L, t: L.rand_like(t),
    "randn_like": lambda L, t: L.randn_like(t),
    "zeros_like_int": lambda L, t: L.zeros_like(t, dtype=L.int64),
    "to_float64": lambda L, t: t.to(L.float64),
    "double": lambda L, t: t.double(),
    "half": lambda L, t: t.half(),
    "to_copy": lambda L, t: t.to("cpu", copy=True),
    "type_as": lambda L, t: t.type_as(L.zeros((), dtype=L.int32)),
    # elementwise results: TensorIterator's layout (the first operand whose strides decide)
    "exp": lambda L, t: t.exp(),
    "neg": lambda L, t: -t,
    "relu": lambda L, t: L.relu(t),
    "add_number": lambda L, t: t + 1,
    "mul_self": lambda L, t: t * t,
    "add_row_major": lambda L, t: t + L.zeros(t.shape),
    "row_major_add": lambda L, t: L.zeros(t.shape) + t,
    "add_broadcast_row": lambda L, t: t + L.ones(t.shape[-1:]),
    "gt_number": lambda L, t: t > 0,
    "where": lambda L, t: L.where(t > 0, t, 0.0),
    "int_plus_float": lambda L, t: t.long() + 0.5,
}

# A size-1 dimension's stride differs from torch's in a few elementwise results, where the layout step would cost
# every op: binary ops look only when the first operand is not row-major (NumPy's c_contiguous ignores size-1
# dimensions). 11 cases, listed; everything else about them matches. (One-input ops on a dense permuted input now
# keep its strides exactly, as torch: dispatch.unary runs them in memory order, models21.)
SIZE_ONE_STRIDES = {
    ("permute(2, 1, 3)(0, 2, 1)", "add_number"), ("permute(2, 1, 3)(0, 2, 1)", "gt_number"),
    ("permute(2, 1, 3)(0, 2, 1)", "where"), ("permute(2, 1, 3)(1, 0, 2)", "add_number"),
    ("permute(2, 1, 3)(1, 0, 2)", "gt_number"), ("permute(2, 1, 3)(1, 0, 2)", "where"),
    ("permute(2, 1, 3)(2, 1, 0)", "row_major_add"), ("permute(2, 1, 3)(0, 2, 1)", "add_broadcast_row"),
    ("permute(2, 1, 3)(1, 0, 2)", "add_broadcast_row"), ("permute(2, 1, 3)(0, 2, 1)", "int_plus_float"),
    ("permute(2, 1, 3)(1, 0, 2)", "int_plus_float"),
}


def facts(L, t) -> dict:
    out = {"shape": tuple(t.shape), "stride": t.stride(), "contiguous": t.is_contiguous(),
           "contiguous_stride": t.contiguous().stride()}
    if t.ndim == 4:
        out["channels_last"] = t.is_contiguous(memory_format=L.channels_last)
    if t.ndim == 5:
        out["channels_last_3d"] = t.is_contiguous(memory_format=L.channels_last_3d)
    return out


@pytest.mark.parametrize("derived", sorted(DERIVED))
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_layout_facts_like_torch(source, derived):
    theirs = facts(torch, DERIVED[derived](torch, SOURCES[source](torch)))
    ours = facts(ember, DERIVED[derived](ember, SOURCES[source](ember)))
    if (source, derived) in SIZE_ONE_STRIDES:  # the same layout but for a size-1 dimension's stride
        assert ours["stride"] != theirs["stride"]
        ours, theirs = _without_size_one(ours), _without_size_one(theirs)
    assert ours == theirs, f"{source} -> {derived}"


def _without_size_one(found: dict) -> dict:
    out = dict(found)
    for key in ("stride", "contiguous_stride"):
        out[key] = tuple(s for s, n in zip(found[key], found["shape"]) if n != 1)
    return out


def test_values_survive_relayout():
    """A copy laid out with the input's strides still holds the input's values, element by element."""
    for name, make in SOURCES.items():
        x = make(ember)
        for derived in ("clone", "to_float64", "to_copy"):
            y = DERIVED[derived](ember, x)
            assert y.tolist() == x.to(y.dtype).contiguous().tolist(), (name, derived)


@pytest.mark.parametrize("size,stride", [((2, 3), (1, 2)), ((2, 3), (3, 1)), ((2, 3, 4), (1, 2, 6)), ((3, 4), (0, 1)),
                                         ((2, 2), (1, 1)), ((4,), (3,)), ((2, 0, 3), (3, 3, 1)), ((), ()),
                                         ((2, 1, 3), (3, 7, 1)), ((2, 3), (10, 2))])
def test_empty_strided_honours_strides(size, stride):
    ours = ember.empty_strided(size, stride)
    theirs = torch.empty_strided(size, stride)
    assert tuple(ours.shape) == tuple(theirs.shape)
    if 0 not in size:
        assert ours.stride() == theirs.stride() == tuple(stride)
    assert ours.is_contiguous() == theirs.is_contiguous()
    new = ember.zeros(1, dtype=ember.float64).new_empty_strided(size, stride)
    assert new.dtype == ember.float64 and (0 in size or new.stride() == tuple(stride))


def test_empty_strided_is_writable_storage():
    x = ember.empty_strided((2, 3), (1, 2))
    x.copy_(ember.arange(6.0).reshape(2, 3))
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert (x + 1).tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


def test_empty_strided_refuses_like_torch():
    for args in [((2, 3), (1,)), ((2, -1), (1, 1)), ((2, 3), (1, -1))]:
        with pytest.raises(RuntimeError):
            torch.empty_strided(*args)
        with pytest.raises(RuntimeError, match="empty_strided"):
            ember.empty_strided(*args)


@pytest.mark.parametrize("size,order", [((2, 3, 4), (0, 2, 1)), ((2, 3, 4), (2, 1, 0)), ((2, 3, 4, 5), (0, 2, 3, 1)),
                                        ((5,), (0,)), ((2, 1, 3), (1, 0, 2))])
def test_empty_permuted_like_torch(size, order):
    assert ember.empty_permuted(size, order).stride() == torch.empty_permuted(size, order).stride()


def test_clone_keeps_autograd_and_values_of_a_transpose():
    x = ember.arange(6.0).reshape(2, 3).requires_grad_()
    y = x.t().clone()
    assert y.stride() == (1, 3)
    (y * ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])).sum().backward()
    assert x.grad.tolist() == [[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]
