"""matmul with a NumPy array or a list as an operand. ``tensor @ array`` converts the array, as torch does;
``array @ tensor`` too (ember's operators take NumPy arrays on either side, where torch raises); the function
``matmul`` with a list raises a TypeError naming both types, as torch raises one (ember once failed with an
AttributeError about an internal field)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_array_operands_of_the_operator_are_converted():
    a = np.arange(6.0).reshape(2, 3)
    expected = (torch.ones(4, 2, dtype=torch.float64) @ a).numpy()
    np.testing.assert_array_equal((ember.ones(4, 2, dtype=ember.float64) @ a).numpy(), expected)
    np.testing.assert_array_equal((a.T @ ember.ones(2, 4, dtype=ember.float64)).numpy(), expected.T)


@pytest.mark.parametrize("call", [
    lambda lib: lib.matmul(lib.ones(3), [1.0, 2.0, 3.0]),
    lambda lib: lib.matmul([1.0, 2.0, 3.0], lib.ones(3)),
], ids=["tensor_list", "list_tensor"])
def test_non_tensor_operand_raises_type_error_like_torch(call):
    with pytest.raises(TypeError):
        call(torch)
    with pytest.raises(TypeError, match=r"matmul\(\): expected both operands to be tensors"):
        call(ember)
