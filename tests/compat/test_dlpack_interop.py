"""DLPack both ways with NumPy and PyTorch: no copies (writes show on both sides), dtypes kept, legacy capsules,
and PyTorch's refusal to export a tensor that requires grad."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def test_from_numpy_shares_memory():
    a = np.arange(3.0)
    t = ember.from_dlpack(a)
    t[0] = 7.0
    assert a[0] == 7.0 and t.dtype == ember.float64


def test_numpy_and_torch_read_ember_memory():
    x = ember.arange(4.0)
    np.testing.assert_array_equal(np.from_dlpack(x), [0.0, 1.0, 2.0, 3.0])
    tt = torch.from_dlpack(x)
    tt[1] = 9.0
    assert x.tolist() == [0.0, 9.0, 2.0, 3.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool", "complex64"])
def test_torch_tensors_come_in_with_their_dtype(dtype):
    y = torch.ones(3, dtype=getattr(torch, dtype))
    e = ember.from_dlpack(y)
    assert e.dtype == getattr(ember, dtype) and e.tolist() == y.tolist()
    e[0] = 0
    assert y[0].item() == 0  # shared


def test_legacy_capsules_both_ways():
    assert ember.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(2))).tolist() == [1.0, 1.0]
    assert torch.utils.dlpack.from_dlpack(ember.to_dlpack(ember.full((2,), 3.0))).tolist() == [3.0, 3.0]


def test_requires_grad_is_not_exported_like_torch():
    for lib in (ember, torch):
        with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
            np.from_dlpack(lib.ones(2, requires_grad=True))
        with pytest.raises(BufferError, match="Can't export tensors that require gradient"):
            lib.from_dlpack(lib.ones(2, requires_grad=True))
