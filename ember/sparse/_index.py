"""Integer bookkeeping of COO indices, on the device's arrays (``xp``): keys, coalescing plans, checks.

Indices never carry gradients, so this works on raw arrays (NumPy on CPU, the stand-in or CuPy on
CUDA); the values are always combined with differentiable ember ops by the callers.

Example:
    >>> import numpy as np
    >>> from ember.sparse._index import coalesce_plan
    >>> unique, inverse = coalesce_plan(np, np.array([[1, 0, 1], [0, 1, 0]]), (2, 2))
    >>> unique.tolist(), inverse.tolist()
    ([[0, 1], [1, 0]], [1, 0, 1])
"""
from __future__ import annotations

from typing import Any, Sequence

_INT64_MAX = 2 ** 63 - 1


def linear_keys(xp: Any, indices: Any, sizes: Sequence[int]) -> Any:
    """Row-major position of each entry among ``sizes`` (an int64 array of length nnz): the sort key of
    PyTorch's coalesced order (lexicographic in the indices)."""
    total = 1
    for s in sizes:
        total *= max(int(s), 1)
    if total > _INT64_MAX:
        raise RuntimeError(f"sparse: a tensor of sparse size {list(sizes)} has more than 2**63 positions; ember's "
                           f"coalescing sorts row-major positions as int64 and cannot order it")
    keys = xp.zeros((indices.shape[1],), dtype=xp.int64)
    for d, s in enumerate(sizes):
        keys = keys * int(s) + indices[d]
    return keys


def is_sorted_unique(xp: Any, keys: Any) -> bool:
    """Strictly increasing keys: the entries are already coalesced (sorted, no duplicates)."""
    return keys.shape[0] < 2 or bool((keys[1:] > keys[:-1]).all())


def coalesce_plan(xp: Any, indices: Any, sizes: Sequence[int]) -> tuple[Any, Any]:
    """``(unique_indices, inverse)``: the sorted distinct entries (sparse_dim x n_unique) and, per input
    entry, the position of its unique entry (duplicates share one)."""
    keys = linear_keys(xp, indices, sizes)
    _, first, inverse = xp.unique(keys, return_index=True, return_inverse=True)
    return indices[:, first], inverse.reshape(-1).astype(xp.int64, copy=False)


def group_ids(xp: Any, indices: Any, sizes: Sequence[int], keep: Sequence[int]) -> tuple[Any, int]:
    """Entries grouped by their indices in the dimensions ``keep`` (the others ignored): a group id per
    entry (0..n_groups-1) and the number of groups."""
    if not keep:
        return xp.zeros((indices.shape[1],), dtype=xp.int64), 1
    keys = linear_keys(xp, indices[list(keep)], [sizes[d] for d in keep])
    unique, inverse = xp.unique(keys, return_inverse=True)
    return inverse.reshape(-1).astype(xp.int64, copy=False), int(unique.shape[0])


def check_bounds(xp: Any, indices: Any, sizes: Sequence[int]) -> None:
    """PyTorch's invariant checks (``check_invariants=True``), with its messages."""
    if not indices.shape[1]:
        return
    low, high = indices.min(axis=1), indices.max(axis=1)
    for d, size in enumerate(sizes):
        if int(low[d]) < 0:
            raise RuntimeError(f"sparse_coo_tensor: found negative index {int(low[d])} for dim {d}")
        if int(high[d]) >= size:
            raise RuntimeError(f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, size is {size} "
                               f"but found index {int(high[d])}")
