"""Which ops take uint16/uint32/uint64 tensors, as torch 2.13's CPU: its "limited support" for these dtypes runs
storage and movement (views, reshape, cat/stack, indexing, clone/contiguous/copy, expand, where), casts, ``==``/``!=``,
``*``, ``/`` (to float), bitwise and/or/xor, ``sum``/``prod``/``cumsum`` (int64 results), ``sort`` and ``unique``;
every other op raises ``NotImplementedError`` naming the op and the dtype, as torch's missing kernels do ("add_stub"
not implemented for 'UInt32'). Promotion with any other integer or bool dtype raises (ember/dtypes.py).
Checked op by op against torch in tests/tensor/test_unsigned_dtypes_vs_torch.py.

Example:
    >>> x = ember.tensor([3, 4], dtype=ember.uint32)
    >>> (x * 2).tolist(), x.sum().dtype
    ([6, 8], ember.int64)
"""
from __future__ import annotations

from typing import Any

from ember import dtypes

# Ops that move or select elements, casts, graph bookkeeping: the arrays pass through unchanged.
MOVES = frozenset("""as_strided cat stack clone contiguous copy_slices diagonal expand getitem index_put permute reshape
    to_device unfold view_replay where to_dtype transpose squeeze unsqueeze view select narrow split chunk unbind
    masked_select index_select_mask""".split())
# Ops torch 2.13 computes for uint16/32/64 on the CPU.
COMPUTES = frozenset("""eq ne mul div true_divide bitwise_and bitwise_or bitwise_xor logical_and logical_or sum prod
    cumsum sort unique unique_consecutive""".split())
PASSIVE = frozenset(("state", "control", "comm"))


def torch_name(np_dtype: Any) -> str:
    """torch's ScalarType name: ``UInt16``/``UInt32``/``UInt64``."""
    return "UInt" + dtypes.from_numpy_dtype(np_dtype).name[4:]


def first_unsigned(arrays: Any) -> Any:
    """The first uint16/32/64 NumPy dtype among ``arrays``, else None."""
    for a in arrays:
        dt = getattr(a, "dtype", None)
        if dt is not None and dt in dtypes.WIDE_UNSIGNED_NP:
            return dt
    return None


def check(op: Any, np_dtype: Any) -> None:
    """Refuse ``op`` on a uint16/32/64 operand where torch has no CPU kernel, naming the op, the dtype and the fix."""
    if op.name in MOVES or op.name in COMPUTES or op.category in PASSIVE:
        return
    raise NotImplementedError(f'"{op.name}" not implemented for \'{torch_name(np_dtype)}\' (as in PyTorch 2.13, '
                              "uint16/uint32/uint64 tensors have kernels only for copies, casts, ==, !=, *, /, bitwise "
                              f"and/or/xor, sum, prod, cumsum, sort and unique); compute in int64: x.long().{op.name}"
                              "(...) (or .float())")


class _Named:
    """An op name for :func:`check` where no record exists (functions that call NumPy directly)."""

    category = "function"

    def __init__(self, name: str) -> None:
        self.name = name


def refuse(op_name: str, *tensors: Any) -> None:
    """:func:`check` for the functions outside dispatch (``nonzero``, shifts, ``masked_fill``, ``arange``)."""
    np_dtype = first_unsigned([getattr(t, "_data", t) for t in tensors])
    if np_dtype is not None:
        check(_Named(op_name), np_dtype)
