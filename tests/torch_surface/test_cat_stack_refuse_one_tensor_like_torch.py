"""``torch.cat(t)`` / ``torch.stack(t)`` of one tensor raise TypeError, as torch (seen in a labml harness of mine:
ember iterated the tensor's rows and silently concatenated or stacked them)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

NAMES = ["cat", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", "concat", "concatenate"]


@pytest.mark.parametrize("name", NAMES)
def test_one_tensor_is_refused_as_in_torch(name):
    with pytest.raises(TypeError, match="must be tuple of Tensors"):
        getattr(torch, name)(torch.zeros(2, 3))
    with pytest.raises(TypeError, match=r"must be tuple of Tensors, not Tensor"):
        getattr(ember, name)(ember.zeros(2, 3))


@pytest.mark.parametrize("name", NAMES)
def test_sequences_still_work(name):
    a = np.arange(6.0).reshape(2, 3)
    for wrap in (list, tuple):
        e = getattr(ember, name)(wrap([ember.tensor(a), ember.tensor(a + 1)]))
        t = getattr(torch, name)(wrap([torch.tensor(a), torch.tensor(a + 1)]))
        np.testing.assert_array_equal(e.numpy(), t.numpy())
