"""PyTorch-like printing: ``tensor([[1., 2.]], requires_grad=True)``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes

_IMPLICIT = ("float32", "int64", "bool")


def _format_array(array: np.ndarray, prefix: str) -> str:
    if array.dtype.kind == "f" or array.dtype.name == "bfloat16":
        values = array.astype(np.float64)
        finite = values[np.isfinite(values)]
        integral = finite.size == 0 or bool(np.all(finite == np.round(finite)))
        big = finite.size and (np.abs(finite).max() >= 1e8 or (np.abs(finite[finite != 0]).min(initial=1) < 1e-4))
        if big:
            formatter = {"float_kind": lambda v: f"{v:.4e}"}
        elif integral:
            formatter = {"float_kind": lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)}
        else:
            formatter = {"float_kind": lambda v: f"{v:.4f}"}
        return np.array2string(values, separator=", ", prefix=prefix, formatter=formatter, threshold=1000,
                               edgeitems=3, max_line_width=80)
    if array.dtype.kind == "b":
        return np.array2string(array, separator=", ", prefix=prefix, threshold=1000, edgeitems=3,
                               formatter={"bool": lambda v: "True" if v else "False"})
    return np.array2string(array, separator=", ", prefix=prefix, threshold=1000, edgeitems=3)


def tensor_repr(t: Any) -> str:
    array = np.asarray(t.__array__())
    prefix = "tensor("
    body = _format_array(array, prefix) if array.size else "[]"
    extras = []
    if t.device.type != "cpu":
        extras.append(f"device='{t.device}'")
    if array.size == 0 and array.ndim != 1:
        extras.append(f"size={tuple(array.shape)}")
    dt = t.dtype
    if dt.name not in _IMPLICIT or (dt is dtypes.float32 and dtypes.get_default_dtype() is not dtypes.float32):
        extras.append(f"dtype=ember.{dt.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"
