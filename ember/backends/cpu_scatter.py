"""``target[idx] += values`` with repeated row indices, in NumPy passes instead of ``np.add.at``.

An embedding's weight gradient is a scatter-add of one gradient row per token into the table's rows:
``np.add.at(zeros, idx, g)``. NumPy's ``add.at`` walks the rows one at a time (~2.5 us a row of 384 floats:
10 ms of a char-GPT step's 4096 tokens, where torch's ``embedding_dense_backward`` takes ~1 ms). Here the
rows are added in rounds: round k adds, with one fancy-indexed ``+=``, the k-th occurrence of every index
that occurs k or more times. An index occurs at most once per round, so each ``+=`` is exact, and each row
of ``target`` receives its values in the order they come in ``idx``, as ``add.at`` adds them: the result is
``add.at``'s bit for bit (tested). The rounds are as many as the most repeated index occurs, so an index
repeated in more than half the rows (few rounds worth their setup) stays with ``add.at``.

Example:
    >>> import numpy as np
    >>> out = np.zeros((3, 2))
    >>> scatter_add_rows(np, out, (np.array([2, 0, 2]),), np.ones((3, 2)))
    True
    >>> out.tolist()
    [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]]
"""
from __future__ import annotations

from typing import Any

import numpy

# Fewer rows than this: add.at's per-call cost is less than the sort's.
MIN_ROWS = 32


def scatter_add_rows(xp: Any, target: Any, full: tuple, values: Any) -> bool:
    """``xp.add.at(target, full, values)`` for one integer index array selecting rows of a NumPy ``target``
    (``full == (idx,)``, ``values`` of shape ``idx.shape + target.shape[1:]``), done in rounds; returns False
    (nothing done) for anything else, and the caller runs ``add.at``."""
    if xp is not numpy or len(full) != 1 or target.ndim < 1:
        return False
    idx = full[0]
    if idx.__class__ is not numpy.ndarray or idx.dtype.kind not in "iu" or idx.size < MIN_ROWS:
        return False
    rest = target.shape[1:]
    values = numpy.asarray(values)
    if values.shape != idx.shape + rest or values.dtype != target.dtype:
        return False
    flat = idx.reshape(-1)
    rows = target.shape[0]
    low, high = int(flat.min()), int(flat.max())
    if low < -rows or high >= rows:
        return False  # add.at raises its IndexError
    if low < 0:  # -1 and rows - 1 are one row: one group
        flat = numpy.where(flat < 0, flat + rows, flat)
    order = numpy.argsort(flat, kind="stable")  # each index's occurrences in their order in idx
    ordered = flat[order]
    n = ordered.shape[0]
    starts = numpy.flatnonzero(numpy.concatenate(([True], ordered[1:] != ordered[:-1])))
    rank = numpy.arange(n) - numpy.repeat(starts, numpy.diff(numpy.append(starts, n)))  # occurrence number
    per_round = numpy.bincount(rank)
    if per_round.size * 2 > n:  # an index in more than half the rows: as many rounds as rows
        return False
    by_round = order[numpy.argsort(rank, kind="stable")]  # round 0's positions, then round 1's, ...
    source = values.reshape((n,) + rest)
    begin = 0
    for count in per_round.tolist():
        pick = by_round[begin:begin + count]
        target[flat[pick]] += source[pick]
        begin += count
    return True
