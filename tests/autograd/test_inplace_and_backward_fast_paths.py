"""The unrecorded in-place fast path (``inplace._plain_update``: ``w -= lr * w.grad``, ``zero_()``) and
``loss.backward()``'s short entry give PyTorch's results, and every case outside them still takes the checked path
(errors, views, overlaps, promotion, recording, version counters), compared with torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.ops import inplace


@pytest.fixture
def fast_hits(monkeypatch):
    hits: list = []
    original = inplace._plain_update

    def counting(t, other):
        out = original(t, other)
        hits.append(out is not None)
        return out

    monkeypatch.setattr(inplace, "_plain_update", counting)
    return hits


def _both(values, dtype=np.float32, requires_grad=False):
    a = np.asarray(values, dtype=dtype)
    return ember.tensor(a, requires_grad=requires_grad), torch.tensor(a, requires_grad=requires_grad)


def test_manual_sgd_step_takes_the_fast_path_and_matches_torch(fast_hits):
    (w, tw), (x, tx) = _both([[1.0, -2.0], [3.0, 0.5]], requires_grad=True), _both([[0.5, 1.0], [-1.0, 2.0]])
    for _ in range(3):
        (x @ w).pow(2).sum().backward()
        (tx @ tw).pow(2).sum().backward()
        with ember.no_grad():
            w -= 0.01 * w.grad
            w.sub_(0.5 * w.grad)
            w.grad.zero_()
        with torch.no_grad():
            tw -= 0.01 * tw.grad
            tw.sub_(0.5 * tw.grad)
            tw.grad.zero_()
    assert all(fast_hits) and len(fast_hits) == 9
    np.testing.assert_allclose(w.detach().numpy(), tw.detach().numpy(), rtol=1e-6)
    assert w._version == tw._version and w.grad._version == tw.grad._version


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "__iadd__", "__isub__", "__imul__", "__itruediv__"])
def test_float_tensor_with_number_or_tensor_matches_torch(op, dtype):
    specials = [0.0, -0.0, 1.5, -3.0, np.inf, -np.inf, np.nan, 1e-40, 3e38]
    for other in (2.5, -1, 0, _both([2.0, -0.0, 0.0, np.inf, 1e-3, -2.0, 3.0, np.nan, 0.5], dtype)):
        (t, tt) = _both(specials, dtype)
        e_other, t_other = other if isinstance(other, tuple) else (other, other)
        with np.errstate(all="ignore"):
            getattr(t, op)(e_other)
        getattr(tt, op)(t_other)
        np.testing.assert_array_equal(t.numpy(), tt.numpy())


def test_cases_outside_the_fast_path_keep_their_checks(fast_hits):
    leaf, tleaf = _both([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.add_(1.0)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.zero_()
    x = ember.arange(6.0)
    with pytest.raises(RuntimeError, match="overlap|memory location"):
        x[1:].add_(x[:-1])  # partial overlap, as torch refuses
    small = ember.zeros(2)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        small.add_(ember.ones(3, 2))  # (the fast path's ufunc raises the same error)
    del fast_hits[:]
    ints = ember.tensor([1, 2])
    with pytest.raises(RuntimeError):
        ints.add_(1.5)  # int tensor with a float: torch refuses the cast
    half, thalf = _both([1.0, 2.0], np.float16)
    half.mul_(1.1)
    thalf.mul_(1.1)
    np.testing.assert_array_equal(half.numpy(), thalf.numpy())
    f32, tf32 = _both([1.0, 3.0])
    f64, tf64 = _both([0.1, 0.2], np.float64)
    f32.add_(f64)  # another dtype: promoted math, kept dtype
    tf32.add_(tf64)
    assert f32.dtype == ember.float32 and np.array_equal(f32.numpy(), tf32.numpy())
    assert not any(fast_hits)


def test_views_expanded_tensors_and_recorded_writes():
    base, tbase = _both([[1.0, 2.0], [3.0, 4.0]])
    base[0].mul_(3.0)  # a view: writes through to its base
    tbase[0].mul_(3.0)
    np.testing.assert_array_equal(base.numpy(), tbase.numpy())
    e = ember.ones(3).expand(2, 3)
    e.zero_()  # a fill of an expanded tensor is allowed (every alias gets the value), as in torch
    assert e.numpy().tolist() == [[0.0] * 3] * 2
    w, tw = _both([1.0, -2.0, 3.0], requires_grad=True)
    y, ty = _both([0.5, 0.5, 0.5])
    y.add_(w)  # other requires grad: recorded, y now has history
    ty.add_(tw)
    y.pow(2).sum().backward()
    ty.pow(2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy())


def test_a_saved_tensor_changed_by_the_fast_path_is_refused():
    w = ember.tensor([1.0, 2.0], requires_grad=True)
    b = ember.tensor([3.0, 4.0])
    c = w * b  # saves b
    b.mul_(2.0)  # b takes no gradient: the fast path, which still bumps b's version
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward()


def test_backward_short_entry_matches_the_general_one():
    w, tw = _both([1.0, -2.0, 3.0], requires_grad=True)
    loss, tloss = (w * w).sum(), (tw * tw).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    tloss.backward(retain_graph=True)
    tloss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), tw.grad.numpy())
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        ember.tensor(1.0).backward()
    with pytest.raises(RuntimeError, match="implicitly created only for scalar"):
        (w * 2).backward()
    d, td = _both(2.0, np.float64, requires_grad=True)
    (d * d).backward()
    (td * td).backward()
    assert d.grad.dtype == ember.float64 and float(d.grad) == float(td.grad)
