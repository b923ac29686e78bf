"""PyTorch-like printing: ``tensor([[1., 2.]], requires_grad=True)``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes

_IMPLICIT = ("float32", "int64", "bool")

# torch.set_printoptions: precision, threshold, edgeitems, linewidth, sci_mode (None: automatic).
OPTIONS: dict[str, Any] = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}


def _edges(array: np.ndarray, threshold: int | None = None, edge: int | None = None) -> np.ndarray:
    """The elements a summarized print shows (all of them for small arrays)."""
    threshold = OPTIONS["threshold"] if threshold is None else threshold
    edge = OPTIONS["edgeitems"] if edge is None else edge
    if array.size <= threshold:
        return array
    for axis in range(array.ndim):
        if array.shape[axis] > 2 * edge:
            head = np.take(array, range(edge), axis=axis)
            tail = np.take(array, range(array.shape[axis] - edge, array.shape[axis]), axis=axis)
            array = np.concatenate([head, tail], axis=axis)
    return array


def _float_style(values: np.ndarray) -> Any:
    """PyTorch's choice: integers as '3.', else 4 decimals, or scientific for wide ranges."""
    p, sci = OPTIONS["precision"], OPTIONS["sci_mode"]
    finite = np.abs(values[np.isfinite(values)])
    nonzero = finite[finite != 0]
    if sci is True:
        return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
    if nonzero.size == 0:
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    low, high = nonzero.min(), nonzero.max()
    wide = sci is None and (high / low > 1000.0 or high > 1e8)
    if np.all(nonzero == np.ceil(nonzero)):
        if wide:
            return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    if wide or (sci is None and low < 1e-4):
        return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
    return lambda v: f"{v:.{p}f}" if np.isfinite(v) else str(v)


def _format_array(array: np.ndarray, prefix: str) -> str:
    if array.dtype.kind == "f" or array.dtype.name == "bfloat16":
        array = array.astype(np.float64)
        style, key = _float_style(_edges(array)), "float_kind"
    elif array.dtype.kind == "b":
        style, key = (lambda v: "True" if v else "False"), "bool"
    else:
        style, key = str, "int"
    # Every element is right-aligned to the widest one, as PyTorch prints.
    width = max((len(style(v)) for v in _edges(array).reshape(-1)), default=0)
    return np.array2string(array, separator=", ", prefix=prefix, threshold=OPTIONS["threshold"],
                           edgeitems=OPTIONS["edgeitems"], max_line_width=OPTIONS["linewidth"],
                           formatter={key: lambda v: style(v).rjust(width)})


def tensor_repr(t: Any) -> str:
    prefix = "tensor("
    extras = []
    if t.device.type == "meta":  # no data to print: PyTorch shows the size, and any dtype but the default
        extras += [f"device='{t.device}'", f"size={tuple(t.shape)}"]
        if t.dtype is not dtypes.get_default_dtype():
            extras.append(f"dtype=ember.{t.dtype.name}")
        if t.grad_fn is not None:
            extras.append(f"grad_fn=<{t.grad_fn.name()}>")
        elif t.requires_grad:
            extras.append("requires_grad=True")
        return prefix + "..." + "".join(", " + e for e in extras) + ")"
    else:
        array = t._device.backend.to_numpy(t._data)  # printing copies device data to the host, as PyTorch
        body = _format_array(array, prefix) if array.size else "[]"
        if t.device.type != "cpu":
            extras.append(f"device='{t.device}'")
        if array.size == 0 and array.ndim != 1:
            extras.append(f"size={tuple(array.shape)}")
    dt = t.dtype
    # The default complex dtype is implicit too (complex64 under float32, complex128 under float64), as PyTorch.
    if dt.is_complex:
        if dt is not dtypes.get_default_complex_dtype():
            extras.append(f"dtype=ember.{dt.name}")
    elif dt.name not in _IMPLICIT or (dt is dtypes.float32 and dtypes.get_default_dtype() is not dtypes.float32):
        extras.append(f"dtype=ember.{dt.name}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return prefix + body + "".join(", " + e for e in extras) + ")"
