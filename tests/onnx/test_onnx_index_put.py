"""ONNX export of ``index_put`` (setitem, ``index_put_(accumulate=True)``): onnxruntime vs NumPy.

Each case writes into a traced input with one index form (slices with steps, negative ints, index
tensors adjacent or apart, Ellipsis, None, int32 indices, boolean masks, repeated positions with
accumulate) and compares the exported model's result with the same write done by NumPy.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ember

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import ember.onnx as eonnx  # noqa: E402


def _i(values: Any, dtype: Any = np.int64) -> np.ndarray:
    return np.array(values, dtype=dtype)


# (name, x shape, value shape, index as NumPy sees it)
CASES = [
    ("step_slice", (4, 5), (2, 2), (slice(None, None, 2), slice(1, 4, 2))),
    ("step_from_one", (4, 5), (5,), (slice(1, None, 3),)),  # negative steps raise, as in PyTorch
    ("negative_int", (3, 4), (4,), (-1,)),
    ("int_then_slice", (3, 4, 2), (4,), (1, slice(None), 0)),
    ("tensors_adjacent_middle", (2, 3, 4, 5), (2, 2, 5), (slice(None), _i([0, 2]), _i([-1, 1]))),
    ("tensors_apart", (3, 4, 5), (2, 4), (_i([0, 2]), slice(None), _i([4, 1]))),
    # PyTorch applies the int first: (4, 2), where NumPy's reading of the same index is (2, 4)
    ("int_and_tensor_apart", (3, 4, 5), (4, 2), (1, slice(None), _i([4, 1]))),
    ("broadcast_index_tensors", (4, 5), (3, 2), (_i([[0], [1], [3]]), _i([2, 4]))),
    ("int32_index", (4, 3), (2, 3), (_i([3, 0], np.int32),)),
    ("ellipsis", (2, 3, 4), (2, 3), (Ellipsis, 1)),
    ("none_basic", (2, 3), (1, 3), (None, 0)),
    ("broadcast_value", (3, 4), (1,), (slice(1, None), _i([0, 3]))),
    ("mask_scalar", (3, 4), (), None),  # x[x > 0] = v
    ("mask_leading_dims", (3, 2, 2), (), None),  # x[(x > 0).any(2).any(1)] = v
]


def _mask(name: str, x: np.ndarray) -> np.ndarray:
    return x > 0 if name == "mask_scalar" else (x > 0).any(2).any(1)


def _ember_index(index: tuple) -> tuple:
    return tuple(ember.tensor(it) if isinstance(it, np.ndarray) else it for it in index)


@pytest.mark.parametrize("accumulate", [False, True], ids=["put", "accumulate"])
@pytest.mark.parametrize("name,shape,vshape,index", CASES, ids=[c[0] for c in CASES])
def test_index_put_export_matches_numpy(name: str, shape: tuple, vshape: tuple, index: Any, accumulate: bool,
                                        rng: np.random.Generator) -> None:
    x = rng.standard_normal(shape).astype(np.float32)
    v = rng.standard_normal(vshape).astype(np.float32)

    def fn(xt: Any, vt: Any) -> Any:
        y = xt * 1.0
        key = (xt > 0) if name == "mask_scalar" else ((xt > 0).any(2).any(1) if index is None else _ember_index(index))
        if accumulate:
            return y.index_put_(key if isinstance(key, tuple) else (key,), vt, accumulate=True)
        y[key] = vt
        return y

    want = x.copy()
    key = _mask(name, x) if index is None else index
    target = want
    if index is not None and any(type(k) is int for k in key) and any(isinstance(k, np.ndarray) for k in key):
        # PyTorch's reading: the ints select first (a view), then the index arrays
        target = want[tuple(k if type(k) is int else slice(None) for k in key)]
        key = tuple(k for k in key if type(k) is not int)
    if accumulate:
        np.add.at(target, key, np.broadcast_to(v, target[key].shape))
    else:
        target[key] = v
    model = eonnx.export(fn, (ember.tensor(x), ember.tensor(v)))
    got = eonnx.run(model, [x, v])[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=name)


def test_index_put_accumulate_repeats_and_int_dtype() -> None:
    """Repeated positions add up (ScatterND reduction='add'), in an integer dtype too."""
    x = np.arange(12, dtype=np.int64).reshape(4, 3)
    v = np.array([[1, 2, 3], [10, 20, 30], [100, 200, 300]], dtype=np.int64)
    idx = np.array([2, 0, 2])

    def fn(xt: Any, vt: Any) -> Any:
        return (xt * 1).index_put_((ember.tensor(idx),), vt, accumulate=True)

    want = x.copy()
    np.add.at(want, idx, v)
    got = eonnx.run(eonnx.export(fn, (ember.tensor(x), ember.tensor(v))), [x, v])[0]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


def test_index_put_mask_with_tensor_value_refuses() -> None:
    """x[mask] = tensor writes a data-dependent number of elements: the export says so."""

    def fn(xt: Any, vt: Any) -> Any:
        y = xt * 1.0
        y[xt > 0] = vt[xt > 0]
        return y

    x = ember.tensor(np.array([1.0, -1.0, 2.0], dtype=np.float32))
    with pytest.raises((NotImplementedError, ember.interpreters.TracingError)):
        eonnx.export(fn, (x, x))
