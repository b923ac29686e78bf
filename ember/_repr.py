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
    if nonzero.size == 0:  # (before sci_mode=True: PyTorch prints zeros as '0.' even then)
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    if sci is True:
        return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
    low, high = nonzero.min(), nonzero.max()
    wide = sci is None and (high / low > 1000.0 or high > 1e8)
    if np.all(nonzero == np.ceil(nonzero)):
        if wide:
            return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
        return lambda v: f"{v:.0f}." if np.isfinite(v) else str(v)
    if wide or (sci is None and low < 1e-4):
        return lambda v: f"{v:.{p}e}" if np.isfinite(v) else str(v)
    return lambda v: f"{v:.{p}f}" if np.isfinite(v) else str(v)


def _float_parts(array: np.ndarray) -> tuple[Any, int]:
    """One float formatter as PyTorch's ``_Formatter``: the style and the width of the widest nonzero finite
    value (zeros, inf and nan are not measured; at least 1)."""
    edges = _edges(array)
    style = _float_style(edges)
    shown = edges[np.isfinite(edges) & (edges != 0)]
    return style, max((len(style(v)) for v in shown.reshape(-1)), default=1)


def _format_complex(array: np.ndarray, prefix: str) -> str:
    """PyTorch's complex printout: the real and imaginary parts each get their own formatter (``1.+2.0000j``),
    and an element counts ``real width + imaginary width + 1`` toward the line width."""
    real_style, real_width = _float_parts(array.real.astype(np.float64))
    imag_style, imag_width = _float_parts(array.imag.astype(np.float64))

    def fmt(v: complex) -> str:
        real = real_style(v.real).rjust(real_width)
        imag = (imag_style(v.imag).rjust(imag_width) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag

    summarize = array.size > OPTIONS["threshold"]
    return _layout(array, len(prefix), summarize, fmt, real_width + imag_width + 1)


def _format_array(array: np.ndarray, prefix: str) -> str:
    shown = None
    if array.dtype.kind == "c":
        return _format_complex(array, prefix)
    if array.dtype.kind == "f" or array.dtype.name == "bfloat16" or array.dtype.name.startswith("float8"):
        array = array.astype(np.float64)  # (ml_dtypes' float8 -> float64 is exact, as bfloat16's)
        edges = _edges(array)
        style = _float_style(edges)
        # PyTorch measures a float tensor's width on its nonzero finite elements only (at least 1): zeros, inf
        # and nan are not counted, so an all-zero row holds (80 - indent) // 3 elements and `[1., -inf]` has no
        # padding before `1.`.
        shown = edges[np.isfinite(edges) & (edges != 0)]
        width = max((len(style(v)) for v in shown.reshape(-1)), default=1)
    elif array.dtype.kind == "b":
        style = lambda v: "True" if v else "False"  # noqa: E731
    else:
        style = str
    if shown is None:  # every element is right-aligned to the widest one, as PyTorch prints
        width = max((len(style(v)) for v in _edges(array).reshape(-1)), default=0)
    summarize = array.size > OPTIONS["threshold"]
    return _layout(array, len(prefix), summarize, lambda v: style(v).rjust(width), width)


def _layout(array: np.ndarray, indent: int, summarize: bool, fmt: Any, width: int) -> str:
    """PyTorch's layout of the body: a row holds ``(linewidth - indent) // (width + 2)`` elements, continuation
    lines start under the first element, sub-tensors are separated by ``ndim - 1`` newlines, and a summarized
    dimension keeps ``edgeitems`` at each end around ``...``."""
    edge = OPTIONS["edgeitems"]
    if array.ndim == 0:
        return fmt(array.item())
    n = array.shape[0]
    short = summarize and n > 2 * edge
    if array.ndim == 1:
        per_line = max(1, (OPTIONS["linewidth"] - indent) // (width + 2))
        values = array.tolist()
        cells = ([fmt(v) for v in values[:edge]] + [" ..."] + [fmt(v) for v in values[n - edge:]]) if short \
            else [fmt(v) for v in values]
        rows = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(rows) + "]"
    rows_at = (list(range(edge)) + [None] + list(range(n - edge, n))) if short else list(range(n))
    parts = ["..." if i is None else _layout(array[i], indent + 1, summarize, fmt, width) for i in rows_at]
    return "[" + ("," + "\n" * (array.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def tensor_repr(t: Any) -> str:
    cls = type(t)
    # A user's Tensor subclass prints under its own name (``MyTensor([1., 2.])``), as PyTorch's printout;
    # ember's own subclasses (Parameter, Buffer, graph/quantized/nested tensors) keep ``tensor(`` or their
    # own __repr__, as torch's do.
    prefix = "tensor(" if cls.__module__.startswith("ember") else f"{cls.__name__}("
    extras = []
    if t.device.type == "meta":  # no data to print: PyTorch shows the size, and any dtype but the default
        extras += [f"device='{t.device}'", f"size={tuple(t.shape)}"]
        if t.dtype is not dtypes.get_default_dtype():
            extras.append(f"dtype={t.dtype!r}")
        if t.grad_fn is not None:
            extras.append(f"grad_fn=<{t.grad_fn.name()}>")
        elif t.requires_grad:
            extras.append("requires_grad=True")
        return _with_suffixes(prefix + "...", extras, len(prefix))
    else:
        array = t._device.backend.to_numpy(t._data)  # printing copies device data to the host, as PyTorch
        body = _format_array(array, prefix) if array.size else "[]"
        if t.device.type != "cpu":
            extras.append(f"device='{t.device}'")
        if array.size == 0 and array.ndim != 1:
            extras.append(f"size={tuple(array.shape)}")
    dt = t.dtype
    # The default complex dtype is implicit too (complex64 under float32, complex128 under float64), as PyTorch.
    if t.device.type != "meta" and t.numel() == 0:  # an empty tensor names every dtype but the default one
        if dt is not dtypes.get_default_dtype():
            extras.append(f"dtype={dt!r}")
    elif dt.is_complex:
        if dt is not dtypes.get_default_complex_dtype():
            extras.append(f"dtype={dt!r}")
    elif dt.name not in _IMPLICIT or (dt is dtypes.float32 and dtypes.get_default_dtype() is not dtypes.float32):
        extras.append(f"dtype={dt!r}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return _with_suffixes(prefix + body, extras, len(prefix))


def _with_suffixes(text: str, suffixes: list[str], indent: int) -> str:
    """``text`` + ``, suffix`` for each suffix and ``)``; a suffix that would end past the line width starts a new
    line at ``indent``, as PyTorch's printout (``tensor([...],\n       requires_grad=True)``)."""
    parts = [text]
    # PyTorch counts the last line from its newline and adds one (two for a single line)
    last = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last + len(suffix) + 2 > OPTIONS["linewidth"]:
            parts.append(",\n" + " " * indent + suffix)
            last = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last += len(suffix) + 2
    return "".join(parts) + ")"


# For other printouts built the same way (quantized tensors, ember/ao/qtensor.py).
format_body = _format_array
with_suffixes = _with_suffixes
