"""Python's types as dtypes, as torch reads them (found by captum's tests): ``float`` is float64 and ``complex``
complex128 whatever the default dtype (ember gave the default float32/complex64), ``int`` int64, ``bool`` bool;
``Tensor.to(complex)`` was refused. Also ``F.pad`` of a 0-d tensor with an empty pad (captum's occlusion of
0-d inputs) copies it, as torch's."""
from __future__ import annotations

import pytest

import ember

torch = pytest.importorskip("torch")

CALLS = {
    "tensor": lambda lib, dt: lib.tensor(3, dtype=dt),
    "zeros": lambda lib, dt: lib.zeros(2, dtype=dt),
    "full": lambda lib, dt: lib.full((2,), 1, dtype=dt),
    "empty": lambda lib, dt: lib.empty(2, dtype=dt),
    "to": lambda lib, dt: lib.ones(2).to(dt),
    "to_kw": lambda lib, dt: lib.ones(2).to(dtype=dt),
    "sum": lambda lib, dt: lib.ones(2, dtype=dt).sum(dtype=dt),
    "as_tensor": lambda lib, dt: lib.as_tensor([1, 0], dtype=dt),
}


@pytest.mark.parametrize("default", ["float32", "float64"])
@pytest.mark.parametrize("py", [float, int, bool, complex], ids=lambda t: t.__name__)
@pytest.mark.parametrize("call", sorted(CALLS))
def test_python_type_dtype_equals_torch(call, py, default):
    ember.set_default_dtype(getattr(ember, default))
    torch.set_default_dtype(getattr(torch, default))
    try:
        got, ref = CALLS[call](ember, py), CALLS[call](torch, py)
    finally:
        ember.set_default_dtype(ember.float32)
        torch.set_default_dtype(torch.float32)
    assert str(got.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]


def test_pad_zero_dim_with_empty_pad_copies():
    x = ember.tensor(2.0, requires_grad=True)
    y = ember.nn.functional.pad(x, ())
    ref = torch.nn.functional.pad(torch.tensor(2.0), ())
    assert y.shape == ref.shape == () and y.item() == ref.item() and y is not x
    y.backward()
    assert x.grad.item() == 1.0
