"""``torch.hash_tensor`` (torch 2.13): the xor of every element's 64-bit word, over all or some dims, for each
dtype torch hashes, at special values (0, -0, inf, nan, extremes), with torch's errors; and on the stand-in device."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

FLOATS = [0.0, -0.0, 1.0, -2.5, 3.25e-8, 1e30, float("inf"), float("-inf"), float("nan")]
INTS = [0, 1, -1, 127, -128, 5, 42, -7, 3]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


def _values(d):
    if d == "bool":
        return [True, False, True, True, False, False, True, False, True]
    if d.startswith(("float", "bfloat")):
        return FLOATS
    return [v % 256 if d == "uint8" else v for v in INTS]


def _both(d, shape=(3, 3)):
    data = np.array(_values(d), dtype=np.float64 if d.startswith(("float", "bfloat")) else np.int64).reshape(shape)
    theirs = torch.tensor(data).to(getattr(torch, d))
    ours = ember.tensor(data).to(getattr(ember, d))
    return ours, theirs


def _same(ours, theirs):
    assert str(ours.dtype) == "ember.uint64" and str(theirs.dtype) == "torch.uint64"
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("d", DTYPES)
@pytest.mark.parametrize("dim,keepdim", [(None, False), (0, False), (1, True), (-1, False), ((0, 1), False),
                                         ([], False), ((1, 0), True)])
def test_hash_like_torch(d, dim, keepdim):
    ours, theirs = _both(d)
    if dim is None:
        _same(ember.hash_tensor(ours), torch.hash_tensor(theirs))
        _same(ours.hash_tensor(), theirs.hash_tensor())
    else:
        _same(ember.hash_tensor(ours, dim, keepdim=keepdim), torch.hash_tensor(theirs, dim, keepdim=keepdim))


def test_hash_of_views_odd_lengths_and_scalars():
    for shape, view in [((7,), lambda t: t), ((3, 5), lambda t: t.t()), ((4, 6), lambda t: t[:, ::2]),
                        ((2, 3, 5), lambda t: t.permute(2, 0, 1)), ((), lambda t: t), ((1,), lambda t: t)]:
        data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 1.37 - 3
        ours, theirs = view(ember.tensor(data)), view(torch.tensor(data))
        _same(ember.hash_tensor(ours), torch.hash_tensor(theirs))
        if ours.ndim:
            _same(ember.hash_tensor(ours, -1), torch.hash_tensor(theirs, -1))


def test_empty_and_requires_grad_like_torch():
    _same(ember.hash_tensor(ember.zeros(0, 3), 1), torch.hash_tensor(torch.zeros(0, 3), 1))
    _same(ember.hash_tensor(ember.ones(2, requires_grad=True)), torch.hash_tensor(torch.ones(2, requires_grad=True)))
    assert not ember.hash_tensor(ember.ones(2, requires_grad=True)).requires_grad


@pytest.mark.parametrize("call,error", [
    (lambda L: L.hash_tensor(L.zeros(0)), RuntimeError),
    (lambda L: L.hash_tensor(L.zeros(0, 3), 0), IndexError),
    (lambda L: L.hash_tensor(L.ones(2, 3), 2), IndexError),
    (lambda L: L.hash_tensor(L.ones(2, 3), (0, 0)), RuntimeError),
    (lambda L: L.hash_tensor(L.ones(2, 3), mode=1), RuntimeError),
    (lambda L: L.hash_tensor(L.ones(2, dtype=L.complex64)), NotImplementedError),
    (lambda L: L.hash_tensor(L.ones(2, dtype=L.uint32)), NotImplementedError),
    (lambda L: L.hash_tensor(L.ones(2, 3), 1, out=L.empty(2)), RuntimeError),
])
def test_errors_like_torch(call, error):
    with pytest.raises(error):
        call(torch)
    with pytest.raises(error):
        call(ember)


def test_out_like_torch():
    theirs = torch.empty(2, dtype=torch.uint64)
    ours = ember.empty(2, dtype=ember.uint64)
    data = np.array([[1.5, -2.0, 7.0], [0.0, 3.0, -0.0]], dtype=np.float32)
    assert ember.hash_tensor(ember.tensor(data), 1, out=ours) is ours
    torch.hash_tensor(torch.tensor(data), 1, out=theirs)
    _same(ours, theirs)


def test_hash_on_the_standin_device():
    from ember.testing import standin_cuda

    data = np.array([[1.0, -2.5, 0.0], [3.0, np.nan, -0.0]], dtype=np.float32)
    with standin_cuda():
        x = ember.tensor(data, device="cuda")
        got = ember.hash_tensor(x, 1)
        assert got.device.type == "cuda"
        values = got.cpu().tolist()
    assert values == torch.hash_tensor(torch.tensor(data), 1).tolist()
