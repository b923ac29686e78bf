"""Which ops take float8 tensors, as torch 2.13's CPU: storage and movement (views, reshape, cat/stack, indexing
and index_put, clone/contiguous/copy, expand, constant pad, where), casts with ``.to()``, and four computations
(``==``, ``!=``, ``isnan``, ``abs``, and ``*`` of two float8 tensors of one dtype); every other op raises
PyTorch's ``"<op>" not implemented for 'Float8_e4m3fn'`` (checked op by op against torch in
tests/tensor/test_float8_dtypes_vs_torch.py).

The computing ops decode their float8 operands to float32 (ember/float8.py), run the op's impl, and encode a
floating result back into the operands' float8 dtype with torch's rounding.

Example:
    >>> x = ember.tensor([1.0, -2.5]).to(ember.float8_e4m3fn)
    >>> (x * x).float().tolist(), (x == 1).tolist()
    ([1.0, 6.0], [True, False])
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import dtypes, float8

# Ops that move or select bytes: the float8 arrays pass through unchanged.
MOVES = frozenset("""as_strided cat stack clone contiguous copy_slices diagonal expand getitem index_put permute reshape
    to_device unfold view_replay where to_dtype""".split())
# Ops torch 2.13 computes for float8 on the CPU (all operands float8 of one dtype for mul).
COMPUTES = frozenset("eq ne isnan abs mul isinf".split())  # (isinf only for e5m2, the format with infinities)
# Categories of graph/state bookkeeping records (no arithmetic).
PASSIVE = frozenset(("state", "control", "comm"))


def has_float8(arrays: list) -> Any:
    """The first float8 NumPy dtype among ``arrays``, else None."""
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if dt is not None and dt in dtypes.FLOAT8_NP:
            return dt
    return None


def torch_name(np_dtype: Any) -> str:
    return "F" + dtypes.from_numpy_dtype(np_dtype).name[1:]


def check(op: Any, arrays: list, np_dtype: Any) -> None:
    """Refuse ``op`` on float8 operands where torch has no CPU kernel, naming the op and the dtype."""
    if op.name in MOVES or op.category in PASSIVE or op.name == "pad":
        return
    if op.name in COMPUTES and not (op.name == "isinf" and np_dtype != dtypes.float8_e5m2.np):
        if op.name == "mul" and not all(getattr(a, "dtype", None) == np_dtype for a in arrays):
            raise NotImplementedError(f'"mul_cpu_reduced_float" not implemented for \'{torch_name(np_dtype)}\': '
                                      "float8 tensors multiply only with a float8 tensor of the same dtype; convert "
                                      "with .float() first")
        return
    raise NotImplementedError(f'"{op.name}" not implemented for \'{torch_name(np_dtype)}\' (as in PyTorch 2.13 on '
                              f"the CPU, float8 dtypes are for storage, casts and movement); compute in float32: "
                              f"x.float().{op.name}(...)")


def check_fill_value(value: Any, target: Any, op: str) -> None:
    """torch's checked conversion of a Python number filled into a float8 tensor (fill_, full): a value above the
    format's largest (or +-inf where the format has none) raises; NaN and negative values are converted."""
    if target not in dtypes.FLOAT8_DTYPES or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    top = float8.finfo(target.name)["max"]
    if value != value:
        return
    if (value in (float("inf"), float("-inf")) and target is not dtypes.float8_e5m2) or (
            value not in (float("inf"), float("-inf")) and value > top):
        raise RuntimeError(f"{op}: value cannot be converted to type c10::F{target.name[1:]} without overflow "
                           f"({value!r}; the format's largest value is {top})")


def compute(xp: Any, op: Any, arrays: list, attrs: dict, np_dtype: Any) -> Any:
    """Run a computing op on decoded float32 operands; a floating result is encoded back to ``np_dtype``."""
    name = dtypes.from_numpy_dtype(np_dtype).name
    wide = [float8.decode(xp.asarray(a), dtypes.from_numpy_dtype(a.dtype).name)
            if getattr(a, "dtype", None) in dtypes.FLOAT8_NP else a for a in arrays]
    out = (op.impl_no_half or op.impl)(xp, *wide, **attrs)
    if getattr(out, "dtype", None) is not None and out.dtype.kind == "f":
        return holding(float8.encode(np.asarray(out, dtype=np.float32), name), np_dtype)
    return out


def holding(codes: np.ndarray, np_dtype: Any) -> np.ndarray:
    """A new array of float8 ``np_dtype`` holding ``codes`` (its own memory, not a view of the uint8 codes: saved
    files and views then see one storage of the float8 dtype)."""
    out = np.empty(codes.shape, dtype=np_dtype)
    out.view(np.uint8)[...] = codes
    return out


def to_float8(x: Any, target: Any) -> Any:
    """``x`` (any NumPy array) converted to float8 ``target`` (an ember dtype) with torch's rounding: through
    float32 (torch converts through float), complex keeping the real part, bools as 0/1."""
    if x.dtype in dtypes.FLOAT8_NP:
        x = from_float8(x)
    if x.dtype.kind == "c":
        x = x.real
    return holding(float8.encode(np.asarray(x).astype(np.float32), target.name), target.np)


def from_float8(x: Any) -> Any:
    """float32 values of a float8 array."""
    return float8.decode(x, dtypes.from_numpy_dtype(x.dtype).name)
