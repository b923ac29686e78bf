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


def _previous_with_same_target(targets: np.ndarray) -> np.ndarray:
    """For each step i, the last step k < i with targets[k] == targets[i], or -1."""
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    previous = np.full(targets.size, -1, dtype=np.int64)
    same = sorted_targets[1:] == sorted_targets[:-1]
    previous[order[1:][same]] = order[:-1][same]
    return previous


def fisher_yates(swap_targets: np.ndarray, n: int) -> np.ndarray:
    """The permutation made by swapping i with ``swap_targets[i]`` (>= i) for i = 0..n-2, in that order.

    Example:
        >>> fisher_yates(np.array([2, 1]), 3).tolist()
        [2, 1, 0]
    """
    steps = swap_targets.size  # n - 1
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    j = swap_targets.astype(np.int64)
    previous = _previous_with_same_target(j)
    # f(k): the last step before k that targeted position k (targets are >= their step, so all such steps
    # are <= k; step k itself may target k).
    last_before = np.full(n, -1, dtype=np.int64)
    hits = np.flatnonzero(j != np.arange(steps))       # steps that moved something into a later position
    # the last step targeting each position (ascending order: the last write wins in a plain assignment
    # would be unspecified, so take the maximum explicitly)
    np.maximum.at(last_before, j[hits], hits)
    index = np.arange(n, dtype=np.int64)
    # V(k) = V(f(k)) if f(k) exists, else k: follow the chains by pointer doubling
    parent = np.where(last_before >= 0, last_before, index)
    while True:
        grand = parent[parent]
        if np.array_equal(grand, parent):
            break
        parent = grand
    value = parent  # the root of each chain is its own original value
    result = np.empty(n, dtype=np.int64)
    result[:steps] = np.where(previous >= 0, value[np.maximum(previous, 0)], j)
    result[steps] = value[steps]
    return result
