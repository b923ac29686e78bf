"""torch's deprecated ``x.add(alpha, other)`` forms keep working after a ``TorchFunctionMode`` has been entered and
left, and inside one: ember's import builds the overridable method forms early (``ember.nested`` defines a subclass),
so a method replaced later in the import was put back to its old form when the mode ended (found by the full suite:
the deprecated-overload tests failed after any mode test ran in the same process)."""
from __future__ import annotations

import warnings

import numpy as np
import torch

import ember
from ember.overrides import TorchFunctionMode


class _PassThrough(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _deprecated_add(lib):
    a, b = lib.tensor([1.0, 2.0]), lib.tensor([3.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return a.add(2, b).numpy(), a.clone().sub_(0.5, b).numpy(), lib.addcmul(a, 0.5, b, b).numpy()


def test_deprecated_forms_inside_and_after_a_mode_like_torch():
    expected = _deprecated_add(torch)
    with _PassThrough():
        inside = _deprecated_add(ember)
    after = _deprecated_add(ember)
    for got in (inside, after):
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)


def test_every_method_is_the_same_object_after_a_mode():
    before = {name: ember.Tensor.__dict__.get(name) for name in ("add", "add_", "sub", "addcmul_", "split", "dot")}
    with _PassThrough():
        pass
    after = {name: ember.Tensor.__dict__.get(name) for name in before}
    assert after == before
