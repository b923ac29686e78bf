"""ember.func.rearrange against torch.func.rearrange: shapes and values for composed, split, ellipsis, unit and
stacked-list patterns, gradients, vmap, and the error cases (same exception types and messages where torch has
them)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.func as tf

import ember
import ember.func as ef

CASES = [
    ("b c d -> b (c d)", {}),
    ("b c d -> (b c d)", {}),
    ("b c d -> d b c", {}),
    ("b (c1 c2) d -> b c1 c2 d", {"c1": 3}),
    ("b (c1 c2) d -> b c2 (d c1)", {"c2": 3}),
    ("(b1 b2) c d -> b2 (c b1) d", {"b1": 2, "b2": 1}),
    ("... d -> d ...", {}),
    ("b ... -> b (...)", {}),
    ("... -> (...)", {}),
    ("b c d -> b c d ()", {}),
    ("b c d -> () b 1 c d", {}),
    ("b c d -> b (d c)", {}),
    ("b ... d -> (d b) ...", {}),
    ("b c d ... -> d c b ...", {}),
]


@pytest.mark.parametrize("pattern,lengths", CASES, ids=[c[0] for c in CASES])
def test_rearrange_equals_torch(pattern, lengths):
    x = np.arange(24.0).reshape(2, 3, 4)
    got = ef.rearrange(ember.tensor(x), pattern, **lengths)
    want = tf.rearrange(torch.tensor(x), pattern, **lengths)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_rearrange_lists_gradients_and_vmap():
    xs = [np.arange(6.0).reshape(2, 3) + k for k in range(4)]
    got = ef.rearrange([ember.tensor(a) for a in xs], "n h w -> h (n w)")
    want = tf.rearrange([torch.tensor(a) for a in xs], "n h w -> h (n w)")
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    x = np.random.default_rng(0).standard_normal((2, 6, 4))
    weights = np.arange(48.0).reshape(4, 12)
    grads = []
    for lib, func in ((ember, ef), (torch, tf)):
        t = lib.tensor(x, requires_grad=True)
        (func.rearrange(t, "b (h w) c -> c (b h w)", h=2) * lib.tensor(weights)).sum().backward()
        grads.append(t.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])
    batched = ef.vmap(lambda t: ef.rearrange(t, "(h w) c -> c h w", w=3))(ember.tensor(x))
    np.testing.assert_array_equal(batched.numpy(), x.reshape(2, 2, 3, 4).transpose(0, 3, 1, 2))


ERRORS = [
    ("b c -> b c", {}),
    ("b c d -> b c", {}),
    ("b c d -> b c e", {}),
    ("b (c1 c2) d -> b c1 c2 d", {}),
    ("b c d -> b c c", {}),
    ("b (c1 c2) d -> b c1 c2 d", {"c1": 5}),
    ("b c d -> (b ...) c d", {}),
]


@pytest.mark.parametrize("pattern,lengths", ERRORS, ids=[e[0] + str(e[1]) for e in ERRORS])
def test_rearrange_errors_are_torchs(pattern, lengths):
    with pytest.raises(Exception) as theirs:
        tf.rearrange(torch.zeros(2, 3, 4), pattern, **lengths)
    with pytest.raises(Exception) as ours:
        ef.rearrange(ember.zeros(2, 3, 4), pattern, **lengths)
    assert type(ours.value).__name__ == type(theirs.value).__name__
    if "two dimensions at once" in str(theirs.value):  # torch names its internal dims (d1, d2); ember the user's
        assert str(ours.value) == "cannot infer the sizes of two dimensions at once c1 and c2"
    elif "one side" in str(theirs.value):  # a set of names: its printed order depends on the string hash seed
        head, _, names = str(theirs.value).partition(": {")
        assert str(ours.value).startswith(head + ": {")
        assert sorted(str(ours.value).partition(": {")[2].rstrip("}").split(", ")) == sorted(names.rstrip("}").split(", "))
    else:
        assert str(ours.value) == str(theirs.value)


def test_rearrange_errors_of_its_own():
    for pattern in ("b c d", "b (c (d)) -> b c d", "b c) d -> b c d", "b 2 d -> b d", "(b ...) c d -> b c d"):
        with pytest.raises(ValueError):
            ef.rearrange(ember.zeros(2, 3, 4), pattern)
    with pytest.raises(ValueError, match="axes the pattern does not have"):
        ef.rearrange(ember.zeros(2, 3, 4), "b c d -> b c d", e=2)
    with pytest.raises(ef.rearrange.__globals__["DimensionBindError"], match="do not match"):
        ef.rearrange(ember.zeros(2, 3, 4), "b (c e) d -> b c e d", c=2, e=2)
