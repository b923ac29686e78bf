"""``tensor(data)`` with tensors inside nested lists, as PyTorch reads them: each such tensor is one number (its
``item()``), so one-element tensors of any shape add no dimension (minimalRL's ppo-continuous builds
``torch.tensor([[[a], ...], ...])`` from sampled actions of shape (1,)), and a tensor of several elements inside a
list raises PyTorch's "only one element tensors" ValueError. NumPy arrays inside lists stay sequences."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "one (1,) tensor": lambda t: [t.tensor([1.0])],
    "(1,) tensors nested": lambda t: [[t.tensor([1.0])], [t.tensor([2.0])]],
    "(1, 1) tensor": lambda t: [t.tensor([[1.0]])],
    "two (1,) tensors": lambda t: [t.tensor([1.0]), t.tensor([2.0])],
    "0-d tensors": lambda t: [t.tensor(1.0), t.tensor(2.0)],
    "number and (1,) tensor": lambda t: [[1.0], [t.tensor([2.0])]],
    "(1,) tensor and number": lambda t: [[t.tensor([2.0])], [1.0]],
    "int64 (1,) tensor": lambda t: [[t.tensor([3])]],
    "float64 (1,) tensor with float": lambda t: [t.tensor([3.0], dtype=t.float64), 1.0],
    "int32 (1, 1, 1) tensor": lambda t: [[t.tensor([[[7]]], dtype=t.int32)]],
    "tuple of (1,) tensors": lambda t: ([t.tensor([1.5])], [t.tensor([2.5])]),
    "rollouts of (1,) actions": lambda t: [[[t.tensor([0.1 * (i + j)])] for j in range(3)] for i in range(4)],
    "numpy (1,) arrays stay sequences": lambda t: [[np.array([1.0])], [np.array([2.0])]],
}


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")
@pytest.mark.parametrize("name", sorted(CASES))
def test_shape_dtype_values_match_torch(name):
    expect = torch.tensor(CASES[name](torch))
    got = ember.tensor(CASES[name](ember))
    assert tuple(got.shape) == tuple(expect.shape)
    assert str(got.dtype).split(".")[-1] == str(expect.dtype).split(".")[-1]
    np.testing.assert_array_equal(got.numpy(), expect.numpy())


@pytest.mark.parametrize("make", [lambda t: [t.tensor([1.0, 2.0])], lambda t: [t.tensor([1.0]), t.tensor([1.0, 2.0])],
                                  lambda t: [[t.tensor([[1.0, 2.0]])]]])
def test_several_element_tensor_in_a_list_raises_as_torch(make):
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        torch.tensor(make(torch))
    with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
        ember.tensor(make(ember))


def test_explicit_dtype_and_a_tensor_argument_unchanged():
    a = ember.tensor([2.0, 3.0])
    assert ember.tensor(a).shape == (2,)  # a tensor itself is copied, not read as a number
    assert ember.tensor([[ember.tensor([1.0])]], dtype=ember.float64).shape == (1, 1)
