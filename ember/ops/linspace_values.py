"""The values of ``torch.linspace`` bit for bit: PyTorch's CPU kernel (``linspace_kernel`` in
``aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp``), replayed with NumPy.

torch converts the ends to the result's dtype first (refusing values that overflow it), takes one step
``(end - start) / (steps - 1)`` (in float64 for integer dtypes, in the dtype itself for floating ones), and fills
the first ``steps // 2`` values as ``start + step * i`` and the rest as ``end - step * (steps - 1 - i)``. Its build
contracts each of these into one fused multiply-add (a single rounding); integer results are then truncated toward
zero. Half precision computes each operation in float32 and rounds it to the dtype (c10::Half's operators), the
index included. ``np.linspace`` in float64 cast down differs in the last bit for most float32 results and by one
for ~4% of integer results (``linspace(79, -23, 1283, dtype=int64)[641]``: torch 27, a two-rounding 28).

Example:
    >>> linspace_values(79, -23, 1283, dtypes.int64)[641]
    27
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember import dtypes
from ember.ops.fma import fma_arrays  # the exact single rounding torch's compiled kernel does


def scalar_ends(op: str, start: Any, end: Any) -> tuple:
    """``start``/``end`` as numbers; tensors must be 0-d (torch's message otherwise)."""
    dims = [getattr(v, "ndim", 0) for v in (start, end)]
    if any(dims):
        raise RuntimeError(f"{op} only supports 0-dimensional start and end tensors, but got start with {dims[0]} "
                           f"dimension(s) and end with {dims[1]} dimension(s).")
    return tuple(v.item() if hasattr(v, "item") else v for v in (start, end))


def _checked(op: str, value: Any, dt: Any) -> Any:
    """``value`` as torch's ``Scalar::to<dtype>`` takes it: a float stays a float, an int an int, and a value
    outside the dtype's range raises torch's error (negative ints wrap into unsigned dtypes, as in C)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool):
        value = int(value)
    if dt.is_floating_point:
        top = float(dtypes.finfo_np(dt.np).max)
        if not (isinstance(value, float) and not math.isfinite(value)) and abs(value) > top:
            raise RuntimeError(f"{op}: value cannot be converted to type {dt} without overflow: {value}")
        return value
    info = np.iinfo(dt.np)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value) or value < info.min or value > info.max:
            raise RuntimeError(f"{op}: value cannot be converted to type {dt} without overflow: {value}")
        return int(value)  # truncation toward zero
    value = int(value)
    wraps = info.min == 0 and value < 0 and -value <= info.max
    if (value < info.min and not wraps) or value > info.max:
        raise RuntimeError(f"{op}: value cannot be converted to type {dt} without overflow: {value}")
    return int(np.array(value).astype(np.int64).astype(dt.np)) if wraps else value


def linspace_values(start: Any, end: Any, steps: int, dt: Any, op: str = "linspace") -> np.ndarray:
    """torch's ``linspace(start, end, steps, dtype=dt)`` as a NumPy array (real dtypes; complex: ``np.linspace``).

    Example: linspace_values(4.3, 0, 50, dtypes.uint8)[1]  # 3, as torch (the ends are truncated first)
    """
    if dt.is_complex:
        return np.linspace(complex(start), complex(end), steps).astype(dt.np)
    if dt is dtypes.bool_:
        raise RuntimeError('"linspace_cpu" not implemented for \'Bool\'')
    if steps == 0:  # torch converts nothing
        return np.zeros((0,), dtype=dt.np)
    if steps == 1:  # torch's fill_(start): half precision unchecked (70000 -> inf), the other dtypes checked
        if dt.is_floating_point and dt.itemsize <= 2:
            value = start.item() if hasattr(start, "item") else start
            with np.errstate(over="ignore"):
                return np.full((1,), np.float32(value), dtype=np.float32).astype(dt.np)
        return np.full((1,), _checked(op, start, dt), dtype=dt.np)
    lo = _checked(op, start, dt)
    hi = _checked(op, end, dt)
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf is NaN in torch as well
        return _fill(lo, hi, steps, dt)


def _fill(lo: Any, hi: Any, steps: int, dt: Any) -> np.ndarray:
    half = steps // 2
    near = np.arange(half, dtype=np.int64)             # counted from start
    far = np.arange(steps - half - 1, -1, -1, dtype=np.int64)  # counted back from end
    if dt.is_floating_point and dt.itemsize <= 2:       # c10::Half / BFloat16: each operation in float32, rounded
        low = dt.np

        def r(x: Any) -> np.ndarray:
            return np.asarray(x, dtype=np.float32).astype(low).astype(np.float32)
        a, b = r(np.float32(lo)), r(np.float32(hi))  # c10 converts a double to Half through float
        step = r(r(b - a) / r(np.float32(steps - 1)))
        first = r(a + r(step * r(near.astype(np.float32))))
        second = r(b - r(step * r(far.astype(np.float32))))
        return np.concatenate([first, second]).astype(low)
    work = np.dtype(dt.np).type if dt.is_floating_point else np.float64
    a, b = work(lo), work(hi)
    step = (b - a) / work(steps - 1)
    first = fma_arrays(np, np.full(half, step, work), near.astype(work), np.full(half, a, work))
    second = fma_arrays(np, np.full(steps - half, -step, work), far.astype(work), np.full(steps - half, b, work))
    values = np.concatenate([first, second])
    if dt.is_floating_point:
        return values
    return np.trunc(values).astype(dt.np)
