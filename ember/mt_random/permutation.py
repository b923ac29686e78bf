"""``randperm`` as PyTorch draws it, without a Python loop per element.

PyTorch shuffles ``0..n-1`` by Fisher-Yates: for i = 0..n-2 it swaps entries i and j_i = i + word_i % (n - i).
The swaps look sequential, but only positions that two steps touch interact: step i reads the value at j_i,
which is the original j_i unless an earlier step k with j_k == j_i moved something there (then it is what
stood at k before step k). Writing V(k) for that value, V(k) = V(f(k)) where f(k) is the last earlier step
that targeted k, else k. Those chains are resolved by pointer doubling (a few vectorized passes), so the
result equals the sequential shuffle exactly at NumPy speed.
"""
from __future__ import annotations

import numpy as np


def fisher_yates(swap_targets: np.ndarray, n: int) -> np.ndarray:
    """The permutation made by swapping i with ``swap_targets[i]`` (>= i) for i = 0..n-2, in that order.

    Example:
        >>> fisher_yates(np.array([2, 1]), 3).tolist()
        [2, 1, 0]
    """
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    j = swap_targets.astype(np.int64)
    steps = j.size  # n - 1
    # Group the steps by target (stable: ascending steps within a group).
    order = np.argsort(j, kind="stable")
    grouped = j[order]
    same = grouped[1:] == grouped[:-1]
    # previous[i]: the last step before i with the same target (-1 if none)
    previous = np.full(steps, -1, dtype=np.int64)
    previous[order[1:][same]] = order[:-1][same]
    # f(k): the last step before k that targeted position k. Every step targeting k is <= k, so it is the
    # last of k's group, or the one before it when that last one is step k itself (a swap with itself).
    ends = np.flatnonzero(np.append(~same, True))
    last_before = np.full(n, -1, dtype=np.int64)
    last_before[grouped[ends]] = order[ends]
    self_swap = np.flatnonzero(last_before[:steps] == np.arange(steps))
    last_before[self_swap] = previous[self_swap]
    # V(k) = V(f(k)) if f(k) exists, else k: follow the chains to their roots by pointer doubling
    index = np.arange(n, dtype=np.int64)
    parent = np.where(last_before >= 0, last_before, index)
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            break
        parent = grand
    result = np.empty(n, dtype=np.int64)
    result[:steps] = np.where(previous >= 0, parent[np.maximum(previous, 0)], j)
    result[steps] = parent[steps]
    return result
