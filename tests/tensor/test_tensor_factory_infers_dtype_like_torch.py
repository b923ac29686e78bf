"""``tensor(data)`` infers the dtype of nested data as PyTorch does: Python numbers count as their default dtypes,
NumPy scalars/arrays and tensors as their own, and the result is their promotion (programs that build
``torch.tensor([np.float64(x) for ...])`` get float64, not the default float)."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = {
    "numpy float64 scalar in a list": lambda t: [np.float64(1.0)],
    "numpy float32 scalar in a list": lambda t: [np.float32(1.0)],
    "numpy int32 scalar in a list": lambda t: [np.int32(1)],
    "numpy int32 with a python int": lambda t: [np.int32(1), 2],
    "numpy float64 then python float": lambda t: [np.float64(1.0), 2.0],
    "python float then numpy float64": lambda t: [1.0, np.float64(2.0)],
    "nested numpy float64": lambda t: [[np.float64(1.0)], [2.0]],
    "numpy int8 with python float": lambda t: [np.int8(1), 1.5],
    "numpy float16 alone": lambda t: [np.float16(1.0)],
    "numpy float16 with python float": lambda t: [np.float16(1.0), 1.0],
    "numpy bool": lambda t: [np.bool_(True)],
    "numpy uint8 with negative python int": lambda t: [np.uint8(3), -1],
    "python bool and int": lambda t: [True, 2],
    "python complex": lambda t: [1, 2.5j],
    "numpy float32 with python complex": lambda t: [np.float32(1.0), 1j],
    "empty": lambda t: [],
    "nested empty": lambda t: [[], []],
    "int16 arrays": lambda t: [np.array([1, 2], dtype=np.int16), np.array([3, 4], dtype=np.int16)],
    "int32 tensor with python int": lambda t: [t.tensor(1, dtype=t.int32), 2],
    "float64 tensors with python float": lambda t: [t.tensor(1.0, dtype=t.float64), 2.0],
    "tuple of numpy float64": lambda t: (np.float64(0.5), np.float64(1.5)),
    "numpy float64 scalar alone": lambda t: np.float64(3.0),
    "python floats": lambda t: [[0.5, 1.5], [2.5, 3.5]],
}


@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy.ndarrays")
@pytest.mark.parametrize("name", sorted(CASES))
def test_inferred_dtype_and_values_match_torch(name):
    expected = torch.tensor(CASES[name](torch))
    got = ember.tensor(CASES[name](ember))
    assert str(got.dtype).replace("ember.", "") == str(expected.dtype).replace("torch.", "")
    assert tuple(got.shape) == tuple(expected.shape)
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


def test_default_dtype_governs_python_floats_but_not_numpy_scalars():
    previous = ember.get_default_dtype()
    ember.set_default_dtype(ember.float64)
    try:
        assert ember.tensor([1.0, 2.0]).dtype == ember.float64
        assert ember.tensor([np.float32(1.0)]).dtype == ember.float32
        assert ember.tensor([np.float32(1.0), 2.0]).dtype == ember.float64
    finally:
        ember.set_default_dtype(previous)


def test_explicit_dtype_still_wins():
    assert ember.tensor([np.float64(1.0), 2.0], dtype=ember.float32).dtype == ember.float32
