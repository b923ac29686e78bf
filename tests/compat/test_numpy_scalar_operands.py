"""NumPy scalars where PyTorch programs pass them: as Python numbers, and on either side of an operator.

Real programs compute scales with NumPy (``scores / np.sqrt(d_k)`` in graykode/nlp-tutorial's Transformer,
``x * np.float32(0.5)``) and take dims or sizes from NumPy arithmetic. PyTorch reads a NumPy scalar as the
Python number it holds (a float32 tensor stays float32), NumPy defers to the tensor's reflected operator
(``np.float64(2) * t`` is a tensor), and NumPy integers are accepted wherever an int is.
Left out: ``np.bool_`` operands (PyTorch promotes them like floats) and 0-d ndarrays (PyTorch reads those as
float64 tensors) - both rare in programs, both kept NumPy's way here.
"""
from __future__ import annotations

import operator

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

SCALARS = {"f64": np.float64(2.5), "f32": np.float32(2.5), "f16": np.float16(1.5), "i64": np.int64(3),
           "i32": np.int32(3), "u8": np.uint8(3)}
OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
       "pow": operator.pow, "floordiv": operator.floordiv, "lt": operator.lt, "eq": operator.eq}
DTYPES = ["float32", "float16", "int64", "int32", "uint8"]


def _result(lib, dtype: str, op, scalar, scalar_first: bool):
    t = lib.tensor([1, 2, 4], dtype=getattr(lib, dtype))
    return op(scalar, t) if scalar_first else op(t, scalar)


@pytest.mark.parametrize("scalar_first", [False, True])
@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("scalar", sorted(SCALARS))
def test_binary_operator_with_numpy_scalar(scalar: str, op: str, scalar_first: bool) -> None:
    for dtype in DTYPES:
        if op == "pow" and scalar_first and dtype in ("int64", "int32", "uint8"):
            continue  # integer overflow of NumPy's power warns; values compared for floats
        want = _result(torch, dtype, OPS[op], SCALARS[scalar], scalar_first)
        got = _result(ember, dtype, OPS[op], SCALARS[scalar], scalar_first)
        assert isinstance(got, ember.Tensor), (dtype, type(got))
        assert str(got.dtype)[6:] == str(want.dtype)[6:], dtype  # ember.float32 / torch.float32
        np.testing.assert_allclose(got.double().numpy(), want.double().numpy(), rtol=1e-3)


CALLS = {
    "where_other": lambda t, x: t.where(x > 0, x, np.float64(2.5)),
    "where_input": lambda t, x: t.where(x > 0, np.float64(2.5), x),
    "clamp": lambda t, x: x.clamp(np.float64(-1.5), np.float64(1.5)),
    "clamp_min_int_tensor": lambda t, x: x.long().clamp(min=np.int64(0)),
    "full_int": lambda t, x: t.full((2,), np.int64(7)),
    "full_float": lambda t, x: t.full((2,), np.float64(2.5)),
    "masked_fill": lambda t, x: x.masked_fill(x > 0, np.float64(-1e9)),
    "sum_dim": lambda t, x: x.sum(np.int64(0)),
    "mean_dims": lambda t, x: x.mean((np.int64(0), np.int32(1))),
    "softmax_dim": lambda t, x: x.softmax(np.int64(-1)),
    "topk": lambda t, x: x.topk(np.int64(2)).values,
    "kthvalue": lambda t, x: x.kthvalue(np.int64(1), 0).values,
    "roll": lambda t, x: x.roll(np.int64(1), np.int64(0)),
    "reshape": lambda t, x: x.reshape(np.int64(2), -1),
    "index": lambda t, x: x[np.int64(1)],
}


@pytest.mark.parametrize("case", sorted(CALLS))
def test_numpy_scalars_as_arguments(case: str) -> None:
    want = CALLS[case](torch, torch.arange(6.0).reshape(3, 2) - 2)
    got = CALLS[case](ember, ember.arange(6.0).reshape(3, 2) - 2)
    assert str(got.dtype)[6:] == str(want.dtype)[6:]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)

